package storage

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

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
