package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// rekeyCmd re-encrypts every store of the data folder under a new
// passphrase (or, with --from-plain, encrypts plain stores). Each store is
// rewritten beside itself and renamed into place (storage.Rekey), so a
// crash leaves each one whole under the old passphrase or the new; a store
// already under the new passphrase is left alone, so running the command
// again after a crash finishes the job. Every store comes out bound to the
// namespace of its folder.
//
// With --from-namespace it moves one store instead: the store in
// --namespace's folder, copied there from another namespace's, is rekeyed
// from that namespace's binding to its own.
type rekeyCmd struct {
	NewPassphraseEnv string `name:"new-passphrase-env" default:"MEMGATE_NEW_PASSPHRASE" placeholder:"VAR" help:"Environment variable that holds the new passphrase (the current one is in --passphrase-env's)."`
	FromPlain        bool   `name:"from-plain" help:"The stores are plain: encrypt them under the new passphrase (no current passphrase needed)."`
	FromNamespace    string `name:"from-namespace" placeholder:"NAME" help:"Move one store: the store in --namespace's folder was copied from this namespace; bind it to --namespace (the passphrase stays unless the new one is set)."`
}

// rekeyReport is what rekey prints.
type rekeyReport struct {
	Rekeyed   int `json:"rekeyed"`
	Unchanged int `json:"unchanged"` // already under the new passphrase
}

func (c *rekeyCmd) Run(a *app) error {
	if !envVarName.MatchString(c.NewPassphraseEnv) {
		return usageError{errors.New("--new-passphrase-env: must be the name of an environment variable (letters, digits and _)")}
	}
	var from *storage.Encryption
	if !c.FromPlain {
		var err error
		if from, err = a.passphrase("passphrase-env", a.cfg.Encryption.PassphraseEnv); err != nil {
			return err
		}
	}
	var (
		to  *storage.Encryption
		err error
	)
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
	var rep rekeyReport
	for _, s := range stores {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		opts := storage.Options{MaxTextBytes: a.cfg.MaxMemoryBytes, Logger: a.log, Encryption: from, Binding: s.ns}
		if c.FromNamespace != "" {
			opts.Binding = c.FromNamespace
		}
		err := storage.RekeyAs(a.ctx, s.path, opts, to, s.ns)
		if errors.Is(err, storage.ErrWrongPassphrase) || errors.Is(err, storage.ErrOtherNamespace) ||
			c.FromPlain && errors.Is(err, storage.ErrEncrypted) {
			// Rekeyed by an earlier run that stopped part way?
			opts.Encryption, opts.Binding = to, s.ns
			if st, oerr := storage.Open(s.path, opts); oerr == nil {
				st.Close()
				rep.Unchanged++
				continue
			}
		}
		if err != nil {
			// Stores before this one stay rekeyed; a rerun goes on from here.
			if e := memgate.AsError("cmd.rekey", err); e.Code != memgate.CodeInternal {
				return &memgate.Error{Code: e.Code, Op: e.Op, Cause: e.Cause, Details: e.Details,
					Message: "namespace " + s.ns + ": " + e.Message}
			}
			return err
		}
		a.log.Info("rekeyed", "op", "cmd.rekey", "namespace", s.ns)
		rep.Rekeyed++
	}
	return a.printJSON(rep)
}

type storeFile struct {
	ns   string
	path string
}

// storeFiles lists the store files of the data folder dir: a plain file in a
// plain folder named as a namespace, the way the pool lays them out.
func storeFiles(dir string) ([]storeFile, error) {
	root := filepath.Join(dir, "stores")
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
		path := filepath.Join(root, e.Name(), storage.FileName)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, storeFile{ns: e.Name(), path: path})
	}
	return out, nil
}
