// Package auth establishes who sends an HTTP request to memgate, and answers
// the ones it cannot admit the way RFC 6750 and RFC 9728 ask.
//
// # Credentials
//
// Three kinds of bearer token are understood, each by a Verifier:
//
//   - Static tokens (StaticTokens): one from MEMGATE_TOKEN, which may do
//     everything, and any number from a tokens file, each stored as the
//     SHA-256 digest of the token with its subject, namespaces and scopes.
//     Digests are compared in constant time.
//   - JWTs (JWT): signed by a key of a JWKS document (fetched over HTTPS,
//     cached, refreshed in the background, or read from a file), from one
//     issuer, for one audience, with an asymmetric algorithm.
//   - Opaque tokens checked by RFC 7662 introspection (Introspector) at the
//     pinned origin of one issuer, over verified TLS, without redirects or
//     proxies, with a deadline, size caps and a cap on concurrent calls.
//
// An Authenticator tries the static tokens first and then the one JWT or
// introspection verifier, turns the claims into a memgate.Principal (the
// subject, unique per issuer; the namespaces the token may use; its scopes),
// and insists on the read scope.
//
// # Refusals
//
// Every failure is a *Refusal: a status (401 for a missing or bad credential,
// 403 for a missing scope or namespace, 503 when the identity service fails
// or is busy) and the WWW-Authenticate challenge to send with it, which
// carries the RFC 6750 error code, the scope needed and, when metadata is
// published, the address of the RFC 9728 protected resource metadata
// (Metadata). A Refusal's message is fixed text: it never holds a token, a
// claim value or a subject, so it is safe to log.
//
// The package knows HTTP, not MCP, and imports only the root package memgate
// of this module. The gateway (package server) consumes an Authenticator
// through an interface of its own.
package auth
