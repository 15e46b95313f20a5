// Package embed turns text into vectors for memgate's hybrid recall. It
// owns the embedders' I/O: reading a file of word vectors (the JSON of the
// npm wink-embeddings packages, or GloVe-style text), keeping a compact
// binary copy of it so that a restart loads in a fraction of a second, and
// calling an OpenAI-compatible /v1/embeddings endpoint.
//
// The arithmetic (which words, how they are weighted, how rankings fuse)
// is package search's; embed only reads, caches and calls. An embedder
// that is still loading answers search.ErrNotReady, one that cannot be
// reached search.ErrUnavailable, so that a search can answer lexically and
// say why.
//
// Nothing here logs text, queries or keys. This package may import the
// standard library and the project's root and search packages only.
package embed
