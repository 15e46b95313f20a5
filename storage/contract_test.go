package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/storetest"
)

var _ storetest.Store = (*storage.Store)(nil)

// The bbolt store keeps the contract every backend keeps.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storage.Options) storetest.Store {
		o.NoSync = true
		s, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
