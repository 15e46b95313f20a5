// Package synthetic makes the made-up corpus of the benchmarks that run
// without the datasets: the storage package's and the bench module's.
package synthetic

import (
	"math/rand/v2"
	"strings"
)

// Texts makes n texts of about 176 bytes from a Zipf-distributed
// vocabulary of 20,000 made-up words. The same n always gives the same
// texts, the first n of any larger n.
func Texts(n int) []string {
	rng := rand.New(rand.NewPCG(7, 11))
	vocab := make([]string, 20000)
	for i := range vocab {
		b := make([]byte, 4+rng.IntN(6))
		for j := range b {
			b[j] = "bcdfghjklmnprstvwaeiou"[rng.IntN(22)]
		}
		vocab[i] = string(b)
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 5)), 1.1, 1, uint64(len(vocab)-1))
	out := make([]string, n)
	for i := range out {
		var sb strings.Builder
		for sb.Len() < 170 {
			sb.WriteString(vocab[z.Uint64()])
			sb.WriteByte(' ')
		}
		out[i] = strings.TrimSpace(sb.String())
	}
	return out
}
