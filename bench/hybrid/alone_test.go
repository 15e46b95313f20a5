package hybrid

import (
	"context"
	"fmt"
	"math"
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
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	docs := make([]float32, n*dim)
	var signs []uint64
	all8 := make([]int8, 0, n*dim)
	scales := make([]float32, n)
	for i, m := range mems {
		d := docs[i*dim : (i+1)*dim]
		v.Embed(d, m.Text)
		all8, scales[i] = search.Quantize(all8, d)
		signs = search.AppendSigns(signs, all8[i*dim:])
	}
	// The clusters as a store of n vectors trains them (storage/clusters.go):
	// half the square root of n, on a sample of 16,384 at an even stride.
	k := max(int(math.Sqrt(float64(n))/2), 64)
	take := min(n, 16384)
	sample := make([]int8, 0, take*dim)
	for j := range take {
		sample = append(sample, all8[(j*n/take)*dim:(j*n/take+1)*dim]...)
	}
	clusters, err := search.TrainClusters(context.Background(), sample, dim, k, 10)
	if err != nil {
		t.Fatal(err)
	}
	rparts := make([]search.ResidualPart, k)
	for i := range n {
		x := all8[i*dim : (i+1)*dim]
		c := clusters.Nearest8(x)
		var alpha float32
		rp := &rparts[c]
		rp.Slots = append(rp.Slots, int32(i))
		rp.Signs, alpha = search.AppendResidual(rp.Signs, x, scales[i], clusters.Centroid(c))
		rp.Alpha = append(rp.Alpha, alpha)
	}
	var rq search.ResidualQuery
	var rprobed []search.ResidualPart
	// ivf is what a clustered scan keeps: the slots of the shortlist of sl
	// of the nearest clusters up to n/div vectors.
	var probe search.Probe
	ivf := func(query []float32, list *search.Shortlist, div, sl int) map[int32]bool {
		clusters.Rank(&probe, query)
		rprobed = rprobed[:0]
		seen := 0
		for c, ok := probe.Next(); ok; c, ok = probe.Next() {
			rp := rparts[c]
			rp.Base = probe.Scores[c]
			rprobed = append(rprobed, rp)
			if seen += len(rp.Slots); seen >= n/div {
				break
			}
		}
		list.Reset(sl)
		rq.Set(query)
		list.ScanResiduals(rprobed, &rq)
		list.Finish(ids)
		on := map[int32]bool{}
		for _, s := range list.Slots() {
			on[s] = true
		}
		return on
	}
	type variant struct{ div, sl int }
	variants := []variant{{16, 1 << 20}, {16, 128}, {16, 64}, {24, 64}, {12, 128}, {32, 128}, {64, 128}}
	known, para, synset := querySets(t, glosses, mems)
	q := make([]float32, dim)
	cos := make([]float32, n)
	var sq search.SignQuery
	var list search.Shortlist
	for _, set := range []struct {
		name string
		qs   []query
	}{{"known-item", known}, {"paraphrase", para}, {"synset", synset}} {
		found, ranks, near := 0, 0, 0
		held := make([]int, 1+len(variants)) // the whole scan's, then each variant's
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
			// The five nearest, and which of them each scan keeps.
			var five search.TopK
			five.Reset(5)
			for i, c := range cos {
				five.Push(uint64(i), float64(c))
			}
			sq.Set(q)
			list.Reset(512)
			list.Scan(signs, &sq, 0, n)
			list.Finish(ids)
			kept := []map[int32]bool{{}}
			for _, s := range list.Slots() {
				kept[0][s] = true
			}
			for _, va := range variants {
				kept = append(kept, ivf(q, &list, va.div, va.sl))
			}
			for _, f := range five.Sorted() {
				near++
				for j, on := range kept {
					if on[int32(f.Doc)] {
						held[j]++
					}
				}
			}
		}
		t.Logf("%-10s vectors alone, exact: success@5 %.3f, mean rank of the target %d of %d", set.name, float64(found)/float64(len(set.qs)), ranks/len(set.qs), n)
		line := fmt.Sprintf("%-10s of the five nearest by cosine, held by the whole scan's 512 by sign %.3f", set.name, float64(held[0])/float64(near))
		for j, va := range variants {
			line += fmt.Sprintf("; clusters, 1/%d and %d: %.3f", va.div, va.sl, float64(held[j+1])/float64(near))
		}
		t.Log(line)
	}
}
