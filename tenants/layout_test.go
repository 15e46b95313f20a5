package tenants

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate"
)

// The layout is what operators see on disk and what rekey walks: the pool
// must put a store exactly where StoreFile says.
func TestStoreFileIsWhereThePoolPutsTheStore(t *testing.T) {
	dir := t.TempDir()
	if got, want := StoreFile(dir, "team"), filepath.Join(dir, "stores", "team", "memgate.db"); got != want {
		t.Fatalf("StoreFile = %s, want %s", got, want)
	}
	p, err := NewPool(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := p.Lease(t.Context(), memgate.Namespace("team"))
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(StoreFile(dir, "team")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("no store file at StoreFile: %v", err)
	}
	if fi, err := os.Stat(StoreDir(dir, "team")); err != nil || !fi.IsDir() || filepath.Dir(StoreDir(dir, "team")) != StoresDir(dir) {
		t.Fatalf("StoreDir is not a folder in StoresDir: %v", err)
	}
}
