package main

import (
	"errors"
	"os"
	"slices"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// rekeyCmd re-encrypts every store of the data folder under a new
// passphrase (or, with --from-plain, encrypts plain stores, and re-keys the
// encrypted ones too when the current passphrase is set). It checks every
// store before it changes any: a store it could not finish (a plain one
// without --from-plain, a passphrase that does not open it, another
// namespace's) refuses the run, naming it. Each store is rewritten beside
// itself and renamed into place (storage.Rekey), so a crash leaves each one
// whole under the old passphrase or the new; a store already under the new
// passphrase is left alone, so running the command again after a crash
// finishes the job. Every store comes out bound to the namespace of its
// folder. The count line is printed however the run ends.
//
// With --from-namespace it moves one store instead: the store in
// --namespace's folder, copied there from another namespace's, is rekeyed
// from that namespace's binding to its own.
type rekeyCmd struct {
	Base       baseFlags      `embed:"" group:"config"`
	Namespace  namespaceFlag  `embed:"" group:"config"`
	Passphrase passphraseFlag `embed:"" group:"config"`

	NewPassphraseEnv string `name:"new-passphrase-env" default:"MEMGATE_NEW_PASSPHRASE" placeholder:"VAR" help:"Environment variable that holds the new passphrase (the current one is in --passphrase-env's)."`
	FromPlain        bool   `name:"from-plain" help:"Encrypt the plain stores under the new passphrase (no current passphrase needed); with the current one set too, re-key the encrypted stores as well."`
	FromNamespace    string `name:"from-namespace" placeholder:"NAME" help:"Move one store: the store in --namespace's folder was copied from this namespace; bind it to --namespace (the passphrase stays unless the new one is set)."`
}

// rekeyedStore, when set by a test, is called after each store is
// rekeyed; an error from it stops the run there as a crash would.
var rekeyedStore func() error

// rekeyReport is what rekey prints.
type rekeyReport struct {
	Rekeyed   int `json:"rekeyed"`
	Unchanged int `json:"unchanged"` // already under the new passphrase
}

func (c *rekeyCmd) Run(a *app) error {
	// rekey takes no --store, but reads the variable a deployment sets for
	// serve: under postgres it would otherwise leave the database as it
	// was, with a report of nothing to do.
	switch a.getenv(envName("store")) {
	case "", storeBbolt:
	case storePostgres:
		return usageError{errors.New("rekey works on the bbolt stores of a data folder; " + envName("store") +
			"=postgres names a database, whose namespaces move to a new passphrase through export and import (docs/SCALING.md)")}
	default:
		return usageError{errors.New(envName("store") + ": must be bbolt or postgres")}
	}
	if !envVarName.MatchString(c.NewPassphraseEnv) {
		return usageError{errors.New("--new-passphrase-env: must be the name of an environment variable (letters, digits and _)")}
	}
	var (
		from, to *storage.Encryption
		err      error
	)
	// --from-plain needs no current passphrase; given one, it re-keys the
	// encrypted stores of a mixed folder in the same run.
	if !c.FromPlain || a.getenv(a.cfg.PassphraseEnv) != "" {
		if from, err = a.passphrase("passphrase-env", a.cfg.PassphraseEnv); err != nil {
			return err
		}
	}
	if c.FromNamespace != "" && a.getenv(c.NewPassphraseEnv) == "" && from != nil {
		to = from // a move keeps the passphrase
	} else if to, err = a.passphrase("new-passphrase-env", c.NewPassphraseEnv); err != nil {
		return err
	}
	stores, err := storeFiles(a.cfg.DataDir)
	if err != nil {
		return memgate.Internal("cmd.rekey", err)
	}
	if c.FromNamespace != "" {
		if _, err := memgate.ParseNamespace("from-namespace", c.FromNamespace); err != nil {
			return usageError{errors.New("--from-namespace: must be a namespace name")}
		}
		stores = slices.DeleteFunc(stores, func(s storeFile) bool { return s.ns != a.cfg.Namespace })
		if len(stores) == 0 {
			return &memgate.Error{Code: memgate.CodeNotFound, Message: "--namespace names no store of the data folder to move"}
		}
	}
	// Every store is checked before any changes: a store the run could not
	// finish refuses the whole run, and the count line says nothing changed.
	var (
		rep  rekeyReport
		plan []rekeyStep
	)
	for _, s := range stores {
		if err := a.ctx.Err(); err != nil {
			return a.rekeyFailed(rekeyReport{}, err)
		}
		src, done, err := c.check(a, s, from, to)
		if err != nil {
			return a.rekeyFailed(rekeyReport{}, inNamespace(s.ns, err))
		}
		if done {
			rep.Unchanged++ // rekeyed by an earlier run that stopped part way
			continue
		}
		plan = append(plan, rekeyStep{s, src})
	}
	for _, p := range plan {
		err := a.ctx.Err()
		if err == nil {
			err = storage.RekeyAs(a.ctx, p.store.path, c.options(a, p.store, p.from), to, p.store.ns)
			if err != nil {
				err = inNamespace(p.store.ns, err)
			}
		}
		if err == nil {
			a.log.Info("rekeyed", "op", "cmd.rekey", "namespace", p.store.ns)
			rep.Rekeyed++
			if rekeyedStore != nil {
				err = rekeyedStore()
			}
		}
		if err != nil {
			// Stores before this one stay rekeyed, this one is whole under
			// its old keys: the same command run again goes on from here.
			return a.rekeyFailed(rep, err)
		}
	}
	return a.printJSON(rep)
}

// rekeyFailed prints the count line of a run that stops with err.
func (a *app) rekeyFailed(rep rekeyReport, err error) error {
	_ = a.printJSON(rep) // err is what the run reports
	return err
}

// rekeyStep is a store to rekey and the encryption it is under now (nil:
// plain).
type rekeyStep struct {
	store storeFile
	from  *storage.Encryption
}

// options opens store s as it is, under from.
func (c *rekeyCmd) options(a *app, s storeFile, from *storage.Encryption) storage.Options {
	opts := storage.Options{MaxTextBytes: a.cfg.MaxMemoryBytes, Logger: a.log, Encryption: from, Binding: s.ns}
	if c.FromNamespace != "" {
		opts.Binding = c.FromNamespace
	}
	return opts
}

// errPlainStore and errNeedPassphrase refuse a mixed folder, saying which
// run finishes it.
var (
	errPlainStore = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store is not encrypted; encrypt it with memgate rekey --from-plain, with the current passphrase set as well to re-key the encrypted stores in the same run"}
	errNeedPassphrase = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store is encrypted; set its passphrase in --passphrase-env's variable as well, so that rekey --from-plain re-keys it"}
)

// check opens store s to find what the run would do with it: rekey it from
// src (nil: a plain store), or leave it (done: it is under to already).
// Otherwise the error says why the run cannot finish it. Nothing is
// written.
func (c *rekeyCmd) check(a *app, s storeFile, from, to *storage.Encryption) (src *storage.Encryption, done bool, err error) {
	try := func(opts storage.Options) error {
		st, err := storage.Open(s.path, opts)
		if err == nil {
			err = st.Close()
		}
		return err
	}
	var sources []*storage.Encryption
	if c.FromPlain {
		sources = append(sources, nil)
	}
	if from != nil {
		sources = append(sources, from)
	}
	for _, enc := range sources {
		err = try(c.options(a, s, enc))
		if err == nil {
			return enc, false, nil
		}
		if !wrongKeys(err) {
			return nil, false, err // locked, damaged: as it is
		}
	}
	terr := try(storage.Options{MaxTextBytes: a.cfg.MaxMemoryBytes, Logger: a.log, Encryption: to, Binding: s.ns})
	switch {
	case terr == nil:
		return nil, true, nil
	case !wrongKeys(terr):
		return nil, false, terr
	case errors.Is(err, storage.ErrNotEncrypted):
		return nil, false, errPlainStore
	case errors.Is(err, storage.ErrEncrypted):
		return nil, false, errNeedPassphrase
	}
	return nil, false, err
}

// wrongKeys reports whether err only says the store is not under the keys
// (or the mode) it was opened with.
func wrongKeys(err error) bool {
	return errors.Is(err, storage.ErrWrongPassphrase) || errors.Is(err, storage.ErrOtherNamespace) ||
		errors.Is(err, storage.ErrEncrypted) || errors.Is(err, storage.ErrNotEncrypted)
}

// inNamespace names the store's namespace in err's message.
func inNamespace(ns string, err error) error {
	if e := memgate.AsError("cmd.rekey", err); e.Code != memgate.CodeInternal {
		return &memgate.Error{Code: e.Code, Op: e.Op, Cause: e.Cause, Details: e.Details,
			Message: "namespace " + ns + ": " + e.Message}
	}
	return err
}

type storeFile struct {
	ns   string
	path string
}

// storeFiles lists the store files of the data folder dir: a plain file in a
// plain folder named as a namespace, the way the pool lays them out.
func storeFiles(dir string) ([]storeFile, error) {
	root := tenants.StoresDir(dir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []storeFile
	for _, e := range entries {
		if !e.IsDir() || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if _, err := memgate.ParseNamespace("namespace", e.Name()); err != nil {
			continue
		}
		path := tenants.StoreFile(dir, memgate.Namespace(e.Name()))
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, storeFile{ns: e.Name(), path: path})
	}
	return out, nil
}
