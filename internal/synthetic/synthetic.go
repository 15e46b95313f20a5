// Package synthetic makes up data: the corpus of the benchmarks that run
// without the datasets (the storage package's and the bench module's), and
// the hostile strings of the tests that pin encoders against encoding/json.
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

// Hostile returns a string of up to max pieces, each an arbitrary byte
// (often not UTF-8), an ASCII byte (control characters, quotes and
// backslashes among them) or a rune below U+3000: what tests that pin an
// encoder against encoding/json feed it.
func Hostile(r *rand.Rand, max int) string {
	var b []byte
	for range r.IntN(max) {
		switch r.IntN(4) {
		case 0:
			b = append(b, byte(r.IntN(256)))
		case 1:
			b = append(b, byte(r.IntN(0x80)))
		default:
			b = append(b, string(rune(r.IntN(0x3000)))...)
		}
	}
	return string(b)
}
