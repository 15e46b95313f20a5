package corpus

import (
	"math/rand/v2"
	"slices"

	"github.com/memgate/memgate"
)

// pairStride and pairOffset pick the second gloss of a memory, as in the
// performance notes: memory i joins glosses i and (i·7919+13) mod len.
const (
	pairStride = 7919
	pairOffset = 13
)

// newRand returns the generator every function of this package uses, so a
// seed means the same thing everywhere.
func newRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x6d656d67617465)) // "memgate"
}

// Memories builds n memories of about 176 bytes from glosses. The glosses
// are shuffled with seed (the slice itself is not changed), and memory i
// joins the entries (see Gloss.Entry) of shuffled glosses i and
// (i·7919+13) mod len(glosses) with "; ", as in
// "entity: that which is perceived ...; thing: a separate and self-contained
// entity". Its tags are the part of speech and the lexicographer file of
// gloss i, also given as metadata "pos" and "lex".
//
// IDs are left empty for the store to make; a memory is known by its index
// in the result. n is capped at len(glosses). The same glosses, n and seed
// always give the same memories.
func Memories(glosses []Gloss, n int, seed int64) []memgate.Write {
	l := len(glosses)
	n = min(n, l)
	if n <= 0 {
		return nil
	}
	order := newRand(seed).Perm(l)
	out := make([]memgate.Write, n)
	for i := range out {
		j := (i*pairStride + pairOffset) % l
		if j == i {
			j = (j + 1) % l
		}
		a, b := glosses[order[i]], glosses[order[j]]
		out[i] = memgate.Write{
			Text:     a.Entry() + "; " + b.Entry(),
			Tags:     []string{a.POS, a.Lex},
			Metadata: map[string]any{"pos": a.POS, "lex": a.Lex},
		}
	}
	return out
}

// HamWrites turns the paragraphs Ham returns into n memories, shuffled with
// seed: each is one paragraph, tagged with its list name and carrying it as
// metadata "list". n is capped at the number of paragraphs.
func HamWrites(ham map[string][]string, n int, seed int64) []memgate.Write {
	lists := make([]string, 0, len(ham))
	total := 0
	for name, ps := range ham {
		lists = append(lists, name)
		total += len(ps)
	}
	slices.Sort(lists)
	n = min(n, total)
	if n <= 0 {
		return nil
	}
	all := make([]memgate.Write, 0, total)
	for _, name := range lists {
		for _, p := range ham[name] {
			all = append(all, memgate.Write{
				Text:     p,
				Tags:     []string{name},
				Metadata: map[string]any{"list": name},
			})
		}
	}
	r := newRand(seed)
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:n:n]
}
