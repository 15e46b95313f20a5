package server

import (
	"context"

	"github.com/memgate/memgate"
)

// Reader reads one namespace's memories.
type Reader interface {
	Get(ctx context.Context, id string) (memgate.Memory, error)
	List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error)
	Search(ctx context.Context, q memgate.Query) (memgate.Result, error)
	Stats(ctx context.Context) (memgate.StoreStats, error)
}

// Writer changes one namespace's memories. Write says what it did: the
// memory as stored, whether it was created or was a duplicate.
type Writer interface {
	Write(ctx context.Context, w memgate.Write) (memgate.Written, error)
	Delete(ctx context.Context, id string, ifVersion *int64) error
}

// Exporter hands take up to limit memories as JSON Lines, starting after
// cursor (the header line first on the first page), and returns how many it
// handed and the cursor of the next page ("" at the end). A memory line for
// which take returns false ends the page before it; the first is always
// taken.
type Exporter interface {
	ExportLines(ctx context.Context, cursor string, limit int, take func(line []byte) bool) (int, string, error)
}

// Proposer keeps writes as candidates awaiting a person's approval; the
// store of a server in candidate mode must be one.
type Proposer interface {
	Propose(ctx context.Context, w memgate.Write) (memgate.Memory, error)
}

// Store is everything the tools need from one namespace's store. Its errors
// should be *memgate.Error; any other error reaches the client as internal.
type Store interface {
	Reader
	Writer
	Exporter
}

// Lease returns the store of namespace ns and a release function that the
// server calls exactly once, when the request that leased it ends.
type Lease func(ctx context.Context, ns memgate.Namespace) (Store, func(), error)

// leaseFor returns the lease of a call to tool t: one that may create the
// store for a tool that writes, one that never does for the others.
func (s *Server) leaseFor(t toolDef) Lease {
	if t.write && t.tool.Name != ToolForget {
		return s.lease
	}
	return s.leaseRead
}

// leaseRead is Options.LeaseRead, or Lease when there is none. (Both are
// observed: telemetry.go.)
func (s *Server) leaseRead(ctx context.Context, ns memgate.Namespace) (Store, func(), error) {
	if s.leaseOnly != nil {
		return s.leaseOnly(ctx, ns)
	}
	return s.lease(ctx, ns)
}

// LeaseOf adapts a lease function that returns a concrete store type, such as
// (*tenants.Pool).Lease, to a Lease. A failed lease never yields a non-nil
// interface holding a nil store.
func LeaseOf[S Store](lease func(context.Context, memgate.Namespace) (S, func(), error)) Lease {
	return func(ctx context.Context, ns memgate.Namespace) (Store, func(), error) {
		s, release, err := lease(ctx, ns)
		if err != nil {
			return nil, nil, err
		}
		return s, release, nil
	}
}

// Resolve returns the namespace of a call by principal p (nil when the
// transport authenticates nobody) with namespace argument arg ("" when the
// call has none).
type Resolve func(p *memgate.Principal, arg string) (memgate.Namespace, error)

// fixedNamespace is the Resolve of a server configured without one: always
// memgate.DefaultNamespace, or the argument when there is one.
func fixedNamespace(_ *memgate.Principal, arg string) (memgate.Namespace, error) {
	if arg == "" {
		return memgate.DefaultNamespace, nil
	}
	return memgate.ParseNamespace("namespace", arg)
}
