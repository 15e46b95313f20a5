package main

import (
	"net/http"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// trashCmd works on the memories forget keeps with --trash-retention.
type trashCmd struct {
	List    trashListCmd    `cmd:"" help:"List the forgotten memories in the trash, oldest first."`
	Restore trashRestoreCmd `cmd:"" help:"Bring a memory back from the trash, with its id, as a new version."`
	Purge   trashPurgeCmd   `cmd:"" help:"Delete every memory in the trash for good."`
}

type trashListCmd struct {
	Store     storeFlags     `embed:""`
	Lifecycle lifecycleFlags `embed:"" group:"config"`

	Limit  *int   `name:"limit" placeholder:"N" help:"Most memories, 1 to 1000 (default 50)."`
	Cursor string `name:"cursor" help:"next_cursor of the previous page."`
}

func (c *trashListCmd) Run(a *app) error {
	limit, err := pageLimit(c.Limit)
	if err != nil {
		return err
	}
	return a.heldStore(func() error { return c.direct(a, limit) }, c.through(a, limit))
}

func (c *trashListCmd) direct(a *app, limit int) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		page, err := st.Trash(a.ctx, c.Cursor, limit)
		if err != nil {
			return err
		}
		return a.printJSON(page)
	})
}

type trashRestoreCmd struct {
	Store     storeFlags     `embed:""`
	Lifecycle lifecycleFlags `embed:"" group:"config"`

	ID string `arg:"" help:"Id of the memory."`
}

func (c *trashRestoreCmd) Run(a *app) error {
	return a.heldStore(func() error { return c.direct(a) }, a.postThrough("/trash/", c.ID, "/restore"))
}

func (c *trashRestoreCmd) direct(a *app) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		m, err := st.Restore(a.ctx, c.ID)
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"memory": m, "restored": true})
	})
}

type trashPurgeCmd struct {
	Store storeFlags `embed:""`
}

func (c *trashPurgeCmd) Run(a *app) error {
	return a.heldStore(func() error { return c.direct(a) }, func(r *remote, ns memgate.Namespace) error {
		return r.json(a.ctx, http.MethodPost, "/control/v1/trash/"+string(ns)+"/purge", nil, a.stdout)
	})
}

func (c *trashPurgeCmd) direct(a *app) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		n, err := st.EmptyTrash(a.ctx)
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"purged": n})
	})
}
