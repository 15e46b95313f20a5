package storage

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// An index written before accents folded: Open rebuilds it from the
// records, in one transaction, and raises the schema.
func TestOpenReindexesAnIndexWithAccents(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	cafe := put(t, s, memgate.Write{Text: "Café au lait", Tags: []string{"drinks"}})
	put(t, s, memgate.Write{Text: "a résumé to send"})
	put(t, s, memgate.Write{Text: "the third, merged with the others"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it what memgate before folding wrote: schema 3, and a posting
	// of a term the records no longer give.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaRecords)); err != nil {
			return err
		}
		// A chunk of one posting for document 1 (see postings.go).
		var chunk []byte
		chunk = binary.AppendUvarint(chunk, 1) // count
		chunk = binary.AppendUvarint(chunk, 0) // span
		chunk = binary.AppendUvarint(chunk, 0) // gap
		chunk = binary.AppendUvarint(chunk, 1) // tf
		chunk = binary.AppendUvarint(chunk, 3) // length
		return tx.Bucket(bucketPostings).Put(append(plainSealer{}.key(kindWord, "stale"), u64(1)...), chunk)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	for query, want := range map[string]int{"cafe": 1, "café": 1, "resume": 1, "stale": 0, "merged": 1} {
		res, err := s.Search(context.Background(), memgate.Query{Text: query})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) != want {
			t.Errorf("%q after the reindex: %d hits, want %d", query, len(res.Hits), want)
		}
	}
	res, err := s.Search(context.Background(), memgate.Query{Tags: []string{"drinks"}})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != cafe.ID {
		t.Errorf("tags after the reindex: %v %v", err, res.Hits)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaSchema); binary.BigEndian.Uint64(v) != schemaFolded {
			t.Errorf("schema %d after the reindex, want %d", binary.BigEndian.Uint64(v), schemaFolded)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A write after it is indexed as any other, and a reopen does not
	// reindex again.
	put(t, s, memgate.Write{Text: "Crème brûlée"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if old, err := s.needsReindex(); err != nil || old {
		t.Errorf("needsReindex after the reindex: %v %v", old, err)
	}
	res, err = s.Search(context.Background(), memgate.Query{Text: "creme brulee"})
	if err != nil || len(res.Hits) != 1 {
		t.Errorf("creme brulee: %v %d hits", err, len(res.Hits))
	}
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{NoSync: true, MergeEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		checkFile(t, path)
	})
	return s
}

// writeFoldingCorpus writes the same memories, replacements and deletions
// to s: accented texts, tags and metadata, some merged to disk and some in
// the tail.
func writeFoldingCorpus(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	words := []string{"Café", "résumé", "naïve", "crème", "brûlée", "façade", "piñata", "über", "smörgåsbord", "coöperate"}
	for i := range 60 {
		w := memgate.Write{
			ID:       fmt.Sprintf("m%02d", i),
			Text:     fmt.Sprintf("%s and %s, note %d of the fold", words[i%len(words)], words[(i*7+3)%len(words)], i),
			Tags:     []string{fmt.Sprintf("t%d", i%3)},
			Metadata: map[string]any{"n": i % 4},
		}
		if _, _, err := s.Put(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		switch {
		case i%7 == 0:
			if err := s.Delete(ctx, fmt.Sprintf("m%02d", i), nil); err != nil {
				t.Fatal(err)
			}
		case i%5 == 0:
			w := memgate.Write{ID: fmt.Sprintf("m%02d", i), Text: fmt.Sprintf("replaced: Über naïveté %d", i)}
			if _, _, err := s.Put(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// foldAnswers is what a set of searches returns from s: ids and scores.
func foldAnswers(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, q := range []memgate.Query{
		{Text: "cafe"}, {Text: "resume naive"}, {Text: "creme brulee fold"}, {Text: "uber naivete"},
		{Text: "note", Limit: 100}, {Text: "fold", Tags: []string{"t1"}, Limit: 100},
		{Text: "coöperate", Filter: map[string]any{"n": 2}}, {Tags: []string{"t2"}, Limit: 100},
	} {
		res, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		line := q.Text + ":"
		for _, h := range res.Hits {
			line += fmt.Sprintf(" %s=%.9f/%.9f", h.ID, h.Score, h.LexicalScore)
		}
		out = append(out, line)
	}
	return out
}

// A rebuild cut short, at every batch in turn, is resumed by the next Open
// and answers as a store that never needed one; meanwhile the store is at
// the new schema, which memgate before it refuses.
func TestOpenResumesARebuildCutShort(t *testing.T) {
	defer func(n int) { reindexBatch = n }(reindexBatch)
	reindexBatch = 8

	fresh := openAt(t, filepath.Join(t.TempDir(), FileName))
	writeFoldingCorpus(t, fresh)
	want := foldAnswers(t, fresh)
	if len(want[0]) <= len("cafe:") {
		t.Fatalf("the fresh store finds nothing for cafe: %q", want[0])
	}

	for cut := range 8 {
		t.Run(fmt.Sprintf("before batch %d", cut), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			s, err := Open(path, Options{NoSync: true, MergeEvery: 5})
			if err != nil {
				t.Fatal(err)
			}
			writeFoldingCorpus(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			downgrade(t, path)

			reindexFault = func(n int) error {
				if n == cut {
					return errors.New("cut short")
				}
				return nil
			}
			_, err = Open(path, Options{NoSync: true})
			reindexFault = nil
			if err == nil {
				t.Fatal("Open succeeded through a failing rebuild")
			}
			if !midRebuild(t, path) {
				t.Error("a rebuild cut short is not at the new schema with its mark")
			}

			s = openAt(t, path)
			if got := foldAnswers(t, s); !slices.Equal(got, want) {
				t.Errorf("after the rebuild resumed:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if old, err := s.needsReindex(); err != nil || old {
				t.Errorf("needsReindex after the rebuild: %v %v", old, err)
			}
		})
	}
}

// downgrade makes the store at path what memgate before folding wrote:
// schema 3, with a posting of a term no record gives.
func downgrade(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaRecords)); err != nil {
			return err
		}
		chunk := encodeChunk([]posting{{doc: 1, tf: 1, docLen: 3}})
		return tx.Bucket(bucketPostings).Put(chunkKey(plainSealer{}.key(kindWord, "stale"), 1), chunk)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rebuildChild opens the store at path, whose index needs the rebuild, a
// memory a transaction, saying "batch" before each; the parent kills it.
func rebuildChild(path string) {
	reindexBatch = 1
	reindexFault = func(int) error {
		fmt.Println("batch")
		return nil
	}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	s.Close()
	fmt.Println("done")
}

// A process killed (SIGKILL) during the rebuild, at any point of a
// transaction or between two, leaves a store the next Open finishes, and
// which then answers as a store that never needed one.
func TestRebuildSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	fresh := openAt(t, filepath.Join(t.TempDir(), FileName))
	writeFoldingCorpus(t, fresh)
	want := foldAnswers(t, fresh)

	for round, after := range []int{3, 20, 41} {
		path := filepath.Join(t.TempDir(), FileName)
		s, err := Open(path, Options{NoSync: true, MergeEvery: 5})
		if err != nil {
			t.Fatal(err)
		}
		writeFoldingCorpus(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		downgrade(t, path)

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashModeEnv+"=rebuild")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(stdout)
		batches := 0
		for sc.Scan() {
			if sc.Text() == "done" {
				t.Fatalf("round %d: the rebuild ended after %d batches, before the kill", round, batches)
			}
			if batches++; batches == after {
				// Inside the transaction the line announced, or just
				// after it: the child does not wait for the kill.
				time.Sleep(time.Duration(round) * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		for sc.Scan() {
		}
		cmd.Wait()
		deadline.Stop()
		if !midRebuild(t, path) {
			t.Fatalf("round %d: the kill did not leave a rebuild to finish", round)
		}

		s = openAt(t, path)
		if got := foldAnswers(t, s); !slices.Equal(got, want) {
			t.Errorf("round %d, killed at batch %d: after the rebuild resumed:\n%s\nwant\n%s", round, after, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		t.Logf("round %d: killed at batch %d, resumed, answers as a fresh store", round, after)
	}
}

// midRebuild reports whether the store at path is at the new schema with a
// rebuild under way.
func midRebuild(t *testing.T, path string) bool {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mid bool
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		mid = binary.BigEndian.Uint64(meta.Get(metaSchema)) == schemaFolded && meta.Get(metaFolding) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mid
}
