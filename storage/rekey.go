package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// rekeyFault, when set by a test, is called at each step of a rekey; an
// error from it stops the rekey there as a crash would, leaving what is on
// disk as it is.
var rekeyFault func(step string) error

// The steps a test can stop a rekey at.
const (
	rekeyStepCopying = "copying" // part of the new file is written
	rekeyStepSynced  = "synced"  // the new file is whole and synced, not in place
	rekeyStepRenamed = "renamed" // the new file is in place, its folder not synced
	rekeySuffix      = ".rekey"  // the new file, beside the old one
	rekeyBatch       = 1000      // values per transaction of the copy
)

// Rekey rewrites the store at path under the encryption to: a new salt,
// to's KDF parameters, every value sealed and every content-derived key
// hashed under the new keys. opts opens the store as it is (with its
// current encryption). The store must not be open elsewhere: Rekey holds
// its lock throughout, and fails with store_locked otherwise.
//
// The new store is written to a file beside the old one, synced, checked,
// and renamed over it, then the folder is synced: a crash at any point
// leaves either the old store or the new one whole at path. A file left
// beside by a crash is removed by the next rekey. Versions, timestamps and
// list cursors stay valid.
//
// The new store is bound to opts.Binding, as the old one was (or, if it
// was older than bindings, is from now on); RekeyAs binds it to another.
func Rekey(ctx context.Context, path string, opts Options, to *Encryption) error {
	return RekeyAs(ctx, path, opts, to, opts.Binding)
}

// RekeyAs is Rekey that binds the new store to binding: how a store moves
// to another namespace. opts.Binding is the one it has now.
func RekeyAs(ctx context.Context, path string, opts Options, to *Encryption, binding string) error {
	const op = "storage.Rekey"
	if to == nil {
		return memgate.Invalid("passphrase", "rekey needs the new passphrase")
	}
	src, err := Open(path, opts)
	if err != nil {
		return err
	}
	// Closed after the rename: the lock stays held until the new file is
	// in place, so no other process can write the old one meanwhile.
	defer src.Close()
	// Let pending writes settle, and merge the tail now, so that Close has
	// nothing to write into the replaced file.
	src.write.close()
	if src.index.current().len() > 0 {
		if err := src.index.merge(); err != nil {
			return memgate.AsError(op, err)
		}
	}
	tmp := path + rekeySuffix
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return memgate.Internal(op, err)
	}
	crashed := false
	fault := func(step string) error {
		if rekeyFault == nil {
			return nil
		}
		err := rekeyFault(step)
		crashed = err != nil
		return err
	}
	defer func() {
		if !crashed {
			os.Remove(tmp)
		}
	}()
	count, err := copyRekeyed(ctx, src, tmp, to, binding, fault)
	if err != nil {
		return memgate.AsError(op, err)
	}
	if err := fault(rekeyStepSynced); err != nil {
		return err
	}
	// Open the copy as any store, as a check that it is whole and opens
	// under the new passphrase.
	check, err := Open(tmp, Options{Encryption: to, Binding: binding, LockTimeout: opts.LockTimeout, MergeEvery: opts.MergeEvery})
	if err != nil {
		return memgate.AsError(op, err)
	}
	st, err := check.Stats(ctx)
	if cerr := check.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return memgate.AsError(op, err)
	}
	if st.Count != count {
		return memgate.Internal(op, errors.New("the rekeyed copy does not hold every memory"))
	}
	if err := os.Rename(tmp, path); err != nil {
		return memgate.Internal(op, err)
	}
	if err := fault(rekeyStepRenamed); err != nil {
		return err
	}
	return memgate.Wrap(op, syncDir(filepath.Dir(path)))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// copyRekeyed writes src's contents, sealed under to, into a new file at
// path and syncs it; it returns the number of memories.
func copyRekeyed(ctx context.Context, src *Store, path string, to *Encryption, binding string, fault func(string) error) (int64, error) {
	kdf, check, dst, err := to.create(binding)
	if err != nil {
		return 0, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.AllocSize = 1 << 20
	from := src.seal
	var count int64
	// One read transaction of the source: nobody else writes it (Rekey
	// holds its lock and has stopped its committer).
	err = src.readTx("storage.Rekey", func(stx *bolt.Tx) error {
		smeta := stx.Bucket(bucketMeta)
		n, err := src.counter(smeta, metaCount)
		if err != nil {
			return err
		}
		count = int64(n)
		w := &rekeyWriter{db: db}
		if err := w.do(func(tx *bolt.Tx) error {
			if err := createBuckets(tx, kdf, check, dst); err != nil {
				return err
			}
			meta := tx.Bucket(bucketMeta)
			// The counters and the merged mark, sealed anew (Rekey merged
			// the tail: no merge is under way).
			for _, key := range [][]byte{metaCount, metaBytes, metaTotalLen, metaMerged} {
				v, err := src.counter(smeta, key)
				if err != nil {
					return err
				}
				if err := meta.Put(key, dst.sealU64(key, v)); err != nil {
					return err
				}
			}
			// Any other record, as it is.
			return smeta.ForEach(func(k, v []byte) error {
				switch {
				case bytes.Equal(k, metaKDF), bytes.Equal(k, metaKeyCheck), bytes.Equal(k, metaSchema),
					bytes.Equal(k, metaSeq), bytes.Equal(k, metaMerging), bytes.Equal(k, metaCount),
					bytes.Equal(k, metaBytes), bytes.Equal(k, metaTotalLen), bytes.Equal(k, metaMerged):
					return nil
				}
				return meta.Put(bytes.Clone(k), bytes.Clone(v))
			})
		}); err != nil {
			return err
		}
		// Records, with their id and creation keys; and the new key of
		// every term the records hold, for the postings.
		terms := map[string][]byte{}
		extended := false
		sdocs := stx.Bucket(bucketDocs)
		c := sdocs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			plain, err := from.open(bucketDocs, k, v)
			if err != nil {
				return err
			}
			r, err := unmarshalRecord(plain)
			if err != nil {
				return err
			}
			if len(k) != 8 {
				return errBadRecord
			}
			key, doc := bytes.Clone(k), binary.BigEndian.Uint64(k)
			sealed := dst.seal(bucketDocs, key, plain)
			if err := w.put(bucketDocs, key, sealed); err != nil {
				return err
			}
			ref := binary.AppendUvarint(nil, doc)
			idKey := dst.key(kindID, r.id)
			if err := w.put(bucketIDs, idKey, dst.seal(bucketIDs, idKey, ref)); err != nil {
				return err
			}
			ck := createdKey(&r)
			if err := w.put(bucketCreated, ck, dst.seal(bucketCreated, ck, ref)); err != nil {
				return err
			}
			// The lifecycle's indexes, made anew: the text's key changes with
			// the store's keys.
			if err := w.put(bucketHashes, twoKey(dst.key(kindText, textKey(r.text)), key), []byte{}); err != nil {
				return err
			}
			if r.expires != 0 {
				if err := w.put(bucketExpiry, twoKey(u64(uint64(r.expires)), key), []byte{}); err != nil {
					return err
				}
			}
			extended = extended || r.extended()
			recordTerms(&r, func(kind byte, content string, _ int) {
				old := from.key(kind, content)
				if _, ok := terms[string(old)]; !ok {
					terms[string(old)] = dst.key(kind, content)
				}
			})
			if err := w.maybeFlush(ctx); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
		if err := w.do(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMeta).Put(metaSeq, dst.sealU64(metaSeq, sdocs.Sequence())); err != nil {
				return err
			}
			return tx.Bucket(bucketDocs).SetSequence(sdocs.Sequence())
		}); err != nil {
			return err
		}
		if err := fault(rekeyStepCopying); err != nil {
			return err
		}
		// Posting chunks, under their term's new key. A chunk of a term no
		// record holds indexes nothing any search could ask for: it is left out.
		pc := stx.Bucket(bucketPostings).Cursor()
		for k, v := pc.First(); k != nil; k, v = pc.Next() {
			if len(k) <= 8 {
				return errBadRecord
			}
			term, first := k[:len(k)-8], binary.BigEndian.Uint64(k[len(k)-8:])
			nt, ok := terms[string(term)]
			if !ok {
				continue
			}
			plain, err := from.open(bucketPostings, k, v)
			if err != nil {
				return err
			}
			key := chunkKey(nt, first)
			if err := w.put(bucketPostings, key, dst.seal(bucketPostings, key, plain)); err != nil {
				return err
			}
			if err := w.maybeFlush(ctx); err != nil {
				return err
			}
		}
		// The trash, under its ids' new keys.
		if tb := stx.Bucket(bucketTrash); tb != nil {
			tc := tb.Cursor()
			for k, v := tc.First(); k != nil; k, v = tc.Next() {
				plain, err := from.open(bucketTrash, k, v)
				if err != nil {
					return err
				}
				when, _, r, err := src.openTrash(k, v)
				if err != nil {
					return err
				}
				key := dst.key(kindID, r.id)
				if err := w.put(bucketTrash, key, dst.seal(bucketTrash, key, plain)); err != nil {
					return err
				}
				if err := w.put(bucketTrashAt, twoKey(u64(uint64(when)), key), []byte{}); err != nil {
					return err
				}
				if r.expires != 0 {
					if err := w.put(bucketTrashExpiry, twoKey(u64(uint64(r.expires)), key), []byte{}); err != nil {
						return err
					}
				}
				extended = extended || r.extended()
			}
		}
		if extended {
			if err := w.flush(); err != nil {
				return err
			}
			if err := w.do(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion))
			}); err != nil {
				return err
			}
		}
		// Candidates, under their id's new key.
		cc := stx.Bucket(bucketCands).Cursor()
		for k, v := cc.First(); k != nil; k, v = cc.Next() {
			plain, err := from.open(bucketCands, k, v)
			if err != nil {
				return err
			}
			_, r, err := src.decodeCandidate(k, v)
			if err != nil {
				return err
			}
			key := dst.key(kindID, r.id)
			if err := w.put(bucketCands, key, dst.seal(bucketCands, key, plain)); err != nil {
				return err
			}
		}
		return w.flush()
	})
	if err != nil {
		return 0, err
	}
	return count, db.Sync()
}

// rekeyWriter gathers puts and writes them rekeyBatch at a time.
type rekeyWriter struct {
	db      *bolt.DB
	pending []rekeyPut
}

type rekeyPut struct{ bucket, key, value []byte }

func (w *rekeyWriter) do(fn func(tx *bolt.Tx) error) error { return w.db.Update(fn) }

func (w *rekeyWriter) put(bucket, key, value []byte) error {
	w.pending = append(w.pending, rekeyPut{bucket, key, value})
	return nil
}

func (w *rekeyWriter) maybeFlush(ctx context.Context) error {
	if len(w.pending) < rekeyBatch {
		return nil
	}
	if err := cancelled(ctx); err != nil {
		return err
	}
	return w.flush()
}

func (w *rekeyWriter) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	err := w.db.Update(func(tx *bolt.Tx) error {
		for _, p := range w.pending {
			b, err := tx.CreateBucketIfNotExists(p.bucket) // the lifecycle's are made when needed
			if err != nil {
				return err
			}
			if bytes.Equal(p.bucket, bucketDocs) || bytes.Equal(p.bucket, bucketCreated) {
				b.FillPercent = 1 // appended in key order
			}
			if err := b.Put(p.key, p.value); err != nil {
				return err
			}
		}
		return nil
	})
	w.pending = w.pending[:0]
	return err
}
