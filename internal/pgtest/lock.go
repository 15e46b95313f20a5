package pgtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
)

// held is this process's hold on the tests' server: the databases of its
// tests that are alive, and the shared lock they keep while there are any.
var held struct {
	sync.Mutex
	n    int
	file *os.File
}

// lockFile opens the lock of the server that admin names, one file per
// server in the temporary folder, named by a hash of the DSN.
func lockFile(admin string) (*os.File, error) {
	sum := sha256.Sum256([]byte(admin))
	name := filepath.Join(os.TempDir(), "memgate-pgtest-"+hex.EncodeToString(sum[:8])+".lock")
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
}

// share holds the server for one database: it waits while another process
// restarts it. It returns the release.
func share(admin string) (func(), error) {
	held.Lock()
	defer held.Unlock()
	if held.n == 0 {
		f, err := lockFile(admin)
		if err != nil {
			return nil, err
		}
		if err := flock(f, false); err != nil {
			f.Close()
			return nil, err
		}
		held.file = f
	}
	held.n++
	return func() {
		held.Lock()
		defer held.Unlock()
		held.n--
		if held.n == 0 {
			held.file.Close() // and its lock with it
			held.file = nil
		}
	}, nil
}

// exclusive runs restart once no other process holds the server, and holds
// them off meanwhile. This process's own shared lock goes first, or the
// exclusive one would wait for it; it comes back after.
func exclusive(admin string, restart func() error) error {
	held.Lock()
	defer held.Unlock()
	if held.file != nil {
		held.file.Close()
		held.file = nil
	}
	f, err := lockFile(admin)
	if err != nil {
		return err
	}
	if err := flock(f, true); err != nil {
		f.Close()
		return err
	}
	err = restart()
	if held.n == 0 {
		f.Close()
		return err
	}
	if lerr := flock(f, false); lerr != nil {
		f.Close()
		return errors.Join(err, lerr)
	}
	held.file = f
	return err
}
