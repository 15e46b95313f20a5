package storage

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// Cutting a posting out of an encoded chunk gives the chunk that encoding
// the other postings would, with the right first document, for every
// position, gap size and chunk length.
func TestCutPostingEqualsReencoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 3000 {
		n := 1 + r.IntN(chunkSize)
		ps := make([]posting, n)
		doc := uint64(1 + r.IntN(1<<20))
		for i := range ps {
			if i > 0 {
				doc += 1 + uint64(r.IntN([]int{1, 200, 1 << 20}[r.IntN(3)]))
			}
			ps[i] = posting{doc: doc, tf: uint32(1 + r.IntN(300)), docLen: uint32(r.IntN(20000))}
		}
		chunk := encodeChunk(ps)
		i := r.IntN(n)
		val, first, found, ok := cutPosting(chunk, ps[0].doc, ps[i].doc)
		if !ok || !found {
			t.Fatalf("round %d: cut of posting %d of %d: found %v ok %v", round, i, n, found, ok)
		}
		rest := slices.Delete(slices.Clone(ps), i, i+1)
		if len(rest) == 0 {
			if val != nil {
				t.Fatalf("round %d: the only posting cut, the chunk is still %x", round, val)
			}
			continue
		}
		if want := encodeChunk(rest); !bytes.Equal(val, want) || first != rest[0].doc {
			t.Fatalf("round %d: cut of posting %d of %d:\n got %x first %d\nwant %x first %d", round, i, n, val, first, want, rest[0].doc)
		}
		// A document that is not in the chunk leaves it alone.
		if _, _, found, ok := cutPosting(chunk, ps[0].doc, ps[i].doc+1); !ok || found && !slices.ContainsFunc(ps, func(p posting) bool { return p.doc == ps[i].doc+1 }) {
			t.Fatalf("round %d: a missing document was found (ok %v)", round, ok)
		}
	}
	// Malformed chunks are errors, never panics.
	chunk := encodeChunk([]posting{{doc: 5, tf: 1, docLen: 2}, {doc: 9, tf: 1, docLen: 2}})
	for cut := range len(chunk) {
		if _, _, found, ok := cutPosting(chunk[:cut], 5, 9); found && ok {
			t.Fatalf("a chunk cut to %d of %d bytes gave up its last posting", cut, len(chunk))
		}
	}
}
