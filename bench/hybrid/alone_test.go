package hybrid

import (
	"testing"

	"github.com/memgate/memgate/search"
)

// TestVectorsAlone measures what the word vectors can do without BM25 and
// without the sign shortlist: every memory embedded as the store embeds
// it, every query scored against all of them in float, exactly. It reports,
// for each set of queries, how often the target is among the five nearest
// (success@5) and its mean rank; and for the known items, how many of the
// five nearest a shortlist of 512 by sign holds (what the store scores
// exactly). docs/PERFORMANCE.md and docs/RECALL.md quote it.
func TestVectorsAlone(t *testing.T) {
	glosses, mems, v, _, _ := setup(t)
	n, dim := len(mems), v.Dim()
	docs := make([]float32, n*dim)
	var signs []uint64
	q8 := make([]int8, 0, dim)
	for i, m := range mems {
		d := docs[i*dim : (i+1)*dim]
		v.Embed(d, m.Text)
		q8, _ = search.Quantize(q8[:0], d)
		signs = search.AppendSigns(signs, q8)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	known, para, synset := querySets(t, glosses, mems)
	q := make([]float32, dim)
	cos := make([]float32, n)
	var sq search.SignQuery
	var list search.Shortlist
	for _, set := range []struct {
		name string
		qs   []query
	}{{"known-item", known}, {"paraphrase", para}, {"synset", synset}} {
		found, ranks, near, held := 0, 0, 0, 0
		for _, x := range set.qs {
			v.Embed(q, x.text)
			for i := range n {
				var c float32
				for j, y := range docs[i*dim : (i+1)*dim] {
					c += q[j] * y
				}
				cos[i] = c
			}
			better := 0
			for _, c := range cos {
				if c > cos[x.target] {
					better++
				}
			}
			if better < 5 {
				found++
			}
			ranks += better
			if set.name != "known-item" {
				continue
			}
			sq.Set(q)
			list.Reset(512)
			list.Scan(signs, &sq, 0, n)
			list.Finish(ids)
			on := map[int32]bool{}
			for _, s := range list.Slots() {
				on[s] = true
			}
			for i, c := range cos {
				top := 0
				for _, d := range cos {
					if d > c {
						top++
						if top == 5 {
							break
						}
					}
				}
				if top < 5 {
					near++
					if on[int32(i)] {
						held++
					}
				}
			}
		}
		t.Logf("%-10s vectors alone, exact: success@5 %.3f, mean rank of the target %d of %d", set.name, float64(found)/float64(len(set.qs)), ranks/len(set.qs), n)
		if near > 0 {
			t.Logf("%-10s the shortlist of 512 by sign holds %.3f of the five nearest by cosine", set.name, float64(held)/float64(near))
		}
	}
}
