package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/memgate/memgate"
)

// A Verifier checks one bearer token and returns who holds it and when the
// token expires. A token it does not accept is an error of this package's
// kinds; *JWT and *Introspector are Verifiers.
type Verifier interface {
	Verify(ctx context.Context, token string) (*memgate.Principal, time.Time, error)
}

// Options configure an Authenticator.
type Options struct {
	// Static holds the static tokens, nil for none. They are tried first.
	Static *StaticTokens
	// Verifier is the JWT or introspection verifier, nil for none.
	Verifier Verifier
	// ReadScope is the scope every request needs; WriteScope the one the
	// server checks for writes. Challenges name them; "" turns the read
	// check off.
	ReadScope, WriteScope string
	// Metadata, when set, is published, and challenges point to it.
	Metadata *Metadata
	// RequireNamespace refuses (403) a principal that names no namespace
	// of its own: the token strategy without --namespace-from-subject.
	RequireNamespace bool
}

// Authenticator admits or refuses HTTP requests. It is safe for concurrent
// use.
type Authenticator struct {
	o Options
}

// New returns the Authenticator of o.
func New(o Options) (*Authenticator, error) {
	if o.Static == nil && o.Verifier == nil {
		return nil, errors.New("no way to authenticate: give static tokens or a verifier")
	}
	for _, s := range []string{o.ReadScope, o.WriteScope} {
		if s != "" && !validScope(s) {
			return nil, errors.New("a scope name must be 1 to 128 visible characters without spaces, quotes or backslashes")
		}
	}
	return &Authenticator{o: o}, nil
}

// Authenticate returns the principal of r and when its credential expires
// (zero for never), or a *Refusal.
func (a *Authenticator) Authenticate(r *http.Request) (*memgate.Principal, time.Time, error) {
	p, exp, err := a.verify(r)
	if err != nil {
		return nil, time.Time{}, a.refuse(r, err)
	}
	if a.o.ReadScope != "" && !p.HasScope(a.o.ReadScope) {
		return nil, time.Time{}, a.refuse(r, &failure{http.StatusForbidden, ErrInsufficientScope,
			"the token lacks the scope " + a.o.ReadScope, a.o.ReadScope})
	}
	if a.o.RequireNamespace && p.Namespace == "" {
		return nil, time.Time{}, a.refuse(r, errNoNamespace)
	}
	return p, exp, nil
}

func (a *Authenticator) verify(r *http.Request) (*memgate.Principal, time.Time, error) {
	token, err := BearerToken(r)
	if err != nil {
		return nil, time.Time{}, err
	}
	var staticErr error
	if a.o.Static != nil {
		p, ok, err := a.o.Static.Lookup(token)
		if ok {
			return p, time.Time{}, nil
		}
		staticErr = err // a tokens file that does not read
	}
	if a.o.Verifier != nil {
		p, exp, err := a.o.Verifier.Verify(r.Context(), token)
		if err == nil {
			return p, exp, nil
		}
		if staticErr == nil || isUnavailable(err) {
			return nil, time.Time{}, err
		}
	}
	if staticErr != nil {
		return nil, time.Time{}, staticErr
	}
	return nil, time.Time{}, errBadToken
}

func isUnavailable(err error) bool {
	var f *failure
	return errors.As(err, &f) && f.status == http.StatusServiceUnavailable
}

// refuse turns a failure into a Refusal with its challenge.
func (a *Authenticator) refuse(r *http.Request, err error) *Refusal {
	var f *failure
	if !errors.As(err, &f) {
		f = errBadToken
	}
	ref := &Refusal{status: f.status, code: f.code, message: f.message}
	if f.status == http.StatusServiceUnavailable {
		return ref // not the credential's fault: no challenge
	}
	scope := f.scope
	if scope == "" {
		scope = strings.TrimSpace(a.o.ReadScope + " " + a.o.WriteScope)
	}
	var meta string
	if a.o.Metadata != nil {
		meta = a.o.Metadata.URL(r)
	}
	desc := ""
	if f.code != "" {
		desc = f.message
	}
	ref.challenge = challenge("realm", "memgate", "error", f.code, "error_description", desc,
		"scope", scope, "resource_metadata", meta)
	return ref
}
