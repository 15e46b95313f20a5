package tenants

import (
	"path/filepath"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// The layout of a data folder: every store in a folder of its own, named
// as its namespace, under the stores folder:
//
//	<data-dir>/stores/<namespace>/memgate.db
//
// These functions are the only place that spells it; the pool, the
// commands that walk every store (rekey) and the benchmarks call them.

// storesFolder is the folder, inside the data folder, that holds the stores.
const storesFolder = "stores"

// StoresDir is the folder of dataDir that holds every store.
func StoresDir(dataDir string) string { return filepath.Join(dataDir, storesFolder) }

// StoreDir is the folder of namespace ns's store in dataDir. It does not
// check ns: a caller with a name from outside parses it first.
func StoreDir(dataDir string, ns memgate.Namespace) string {
	return filepath.Join(StoresDir(dataDir), string(ns))
}

// StoreFile is the path of namespace ns's store file in dataDir.
func StoreFile(dataDir string, ns memgate.Namespace) string {
	return filepath.Join(StoreDir(dataDir, ns), storage.FileName)
}

// storeFileIn is the path of ns's store file relative to the stores folder.
func storeFileIn(ns memgate.Namespace) string {
	return filepath.Join(string(ns), storage.FileName)
}
