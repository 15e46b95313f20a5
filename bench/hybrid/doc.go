// Package hybrid measures hybrid recall against lexical recall on the
// WordNet corpus of bench/corpus: latency at 100k memories, success@5 on
// known-item queries and on paraphrases (each content word of a memory
// replaced by a WordNet synonym, so BM25 cannot match it), the space the
// vectors take, and the time from a restart to hybrid answers. It runs
// when MEMGATE_HYBRID_FIGURES is set, with the data sets of
// bench/datasets.sh and the vectors of scripts/vectors.sh in
// MEMGATE_EMBEDDINGS; docs/PERFORMANCE.md has its figures.
package hybrid
