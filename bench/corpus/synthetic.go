package corpus

import "github.com/memgate/memgate/internal/synthetic"

// Synthetic makes n texts of about 176 bytes from a Zipf-distributed
// vocabulary of 20,000 made-up words, for runs without the datasets. The
// same n always gives the same texts (the storage package's benchmarks use
// the same ones).
func Synthetic(n int) []string { return synthetic.Texts(n) }
