// Package memgate holds the vocabulary every part of memgate shares: the
// Memory and the requests that read and write it, search hits and receipts,
// the calling Principal, and one Error type whose Code travels unchanged from
// storage to the wire.
//
// It imports only the standard library. Every other package imports it, and it
// imports none of them.
package memgate
