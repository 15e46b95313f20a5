// Package coldopen measures the first search of a cold small store: it
// writes -stores stores of -memories memories each, syncs them, then for
// each store drops the file from the page cache, opens it and searches it
// once. It prints the p50 and p99 of open + first search.
//
//	go run . coldopen            # in bench/
//
// It is the in-process half of scenario S6 (b): what a namespace pays when
// the pool opens its store for the first time after the page cache lost it.
package coldopen

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
)

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("coldopen", flag.ContinueOnError)
	stores := fs.Int("stores", 200, "stores to open cold")
	memories := fs.Int("memories", 100, "memories per store")
	dir := fs.String("dir", "", "work folder, on the disk to measure (default: a temporary folder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return run(*dir, *stores, *memories)
}

func run(dir string, stores, memories int) error {
	dir, done, err := measure.WorkDir(dir, "coldopen")
	if err != nil {
		return err
	}
	defer done()
	ctx := context.Background()
	path := func(i int) string { return filepath.Join(dir, fmt.Sprint(i), storage.FileName) }
	for i := range stores {
		if err := os.MkdirAll(filepath.Dir(path(i)), 0o700); err != nil {
			return err
		}
		st, err := storage.Open(path(i), storage.Options{NoSync: true})
		if err != nil {
			return err
		}
		for j := range memories {
			w := memgate.Write{Text: fmt.Sprintf("entity %d, an object of store %d, with a few words about things %d", j, i, j*i)}
			if _, _, err := st.Put(ctx, w); err != nil {
				st.Close()
				return err
			}
		}
		if err := st.Close(); err != nil {
			return err
		}
	}
	var took []time.Duration
	for i := range stores {
		if err := syncFile(path(i)); err != nil {
			return err
		}
		if err := measure.DropCache(filepath.Dir(path(i))); err != nil {
			return err
		}
		start := time.Now()
		st, err := storage.Open(path(i), storage.Options{})
		if err != nil {
			return err
		}
		if _, err := st.Search(ctx, memgate.Query{Text: "entity object", Limit: 10}); err != nil {
			st.Close()
			return err
		}
		took = append(took, time.Since(start))
		st.Close()
	}
	fi, err := os.Stat(path(0))
	if err != nil {
		return err
	}
	fmt.Printf("cold open + first search of %d stores of %d memories (%d KiB each): p50 %.0f µs, p99 %.0f µs\n",
		stores, memories, fi.Size()>>10, measure.Percentile(took, 0.50), measure.Percentile(took, 0.99))
	return nil
}

// syncFile writes a file's dirty pages to disk, so that dropping it from
// the page cache drops all of it.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
