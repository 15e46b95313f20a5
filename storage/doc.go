// Package storage keeps one namespace's memories in one bbolt file: the
// memories, the store-wide version counter, and an inverted index that
// changes in the same transaction as the memory it describes, so a search
// never sees a memory that Get does not, and never misses one that Get sees.
//
// # Layout
//
// Every write of a memory takes a new document number from the docs bucket's
// sequence, and that number is also the memory's version: one counter per
// store, so a version never repeats, not even after a forget and a
// re-create. Because document numbers only grow, the docs bucket is in write
// order (which is updated_desc, read backwards), and an index posting list
// only ever grows at its end.
//
//	docs      document number → record (the memory's fields)
//	ids       key(id) → document number
//	created   created_at, first document number → document number
//	postings  key(term), first document number → chunk of postings
//	gone      document number → term keys of a merged memory forgotten
//	          since the last merge, whose postings that merge takes out
//	meta      schema version, memory count, text bytes, total term count;
//	          in an encrypted store, the KDF record and the key check
//
// Words of the title and text, tags, and metadata pairs are all terms, each
// kind in its own key space; tags and metadata filters read a posting list
// instead of scanning memories. A write's postings go to an in-memory tail
// (tail.go) that is merged into the posting chunks every few thousand
// documents (merge.go), so a write touches a handful of pages: nothing on
// the write path grows with the number of memories.
//
// Values pass through one seal step and content-derived keys through one key
// step (see sealer), so encryption at rest changes those two and nothing else:
// a plain store keeps both as they are; an encrypted one (encrypt.go) seals
// values with an AEAD bound to their bucket and key, and turns those keys
// into keyed hashes. Rekey (rekey.go) rewrites a store under new keys beside
// itself and renames it into place.
//
// # Commits
//
// Writes go through a committer (commit.go) that groups concurrent writers
// into one bbolt transaction, committed (and fsynced) at once when the store
// is idle. A write returns only after its commit has. Reads run in parallel
// with each other and with commits.
//
// The write path reads in three places: write.go turns a memory into a
// transaction's changes (the record, its id, its creation key, the counters,
// and its index entries for the tail); the committer runs those changes in
// one transaction and does nothing else; the index (indexer.go) owns the
// tail and its merge: it says whether writes may run, puts each committed
// transaction's change in the tail, and merges when the tail is due.
//
// This package knows memories, not namespaces or MCP: it must never import
// tenants, server, auth or cmd.
package storage
