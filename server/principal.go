package server

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the authenticated caller. A tool,
// resource or prompt handler that runs under ctx resolves its namespace and
// checks its scopes against p.
func WithPrincipal(ctx context.Context, p *memgate.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put in ctx, or nil.
func PrincipalFrom(ctx context.Context) *memgate.Principal {
	p, _ := ctx.Value(principalKey{}).(*memgate.Principal)
	return p
}

// TokenInfoPrincipal is the key of auth.TokenInfo.Extra under which a
// verifier passes the *memgate.Principal it established.
//
// Over HTTP the principal travels only this way. The SDK runs a stateful
// session's handlers under the context of the request that opened the
// session, so a principal in that context would be the opener's, for every
// later request too. What the SDK hands each request's handler is the
// TokenInfo that auth.RequireBearerToken put in that request's context (as
// RequestExtra.TokenInfo): the rights of the credential the request itself
// carries. The session binds only the subject (TokenInfo.UserID).
const TokenInfoPrincipal = "memgate.principal"

// NewTokenInfo returns the auth.TokenInfo an HTTP token verifier gives the
// SDK for principal p: its scopes, its subject as the user id (which makes
// the SDK bind a session to its user), and p itself under
// TokenInfoPrincipal.
func NewTokenInfo(p *memgate.Principal, expires time.Time) *auth.TokenInfo {
	return &auth.TokenInfo{
		Scopes:     p.Scopes,
		Expiration: expires,
		UserID:     p.Subject,
		Extra:      map[string]any{TokenInfoPrincipal: p},
	}
}

// principalOf finds the caller of one request: the principal of the
// credential the request carried, when the transport attached one (HTTP),
// else the one in the context (stdio, in-process calls). A request that
// carries token information without a principal has none: it is never
// given the context's.
func principalOf(ctx context.Context, extra *mcp.RequestExtra) *memgate.Principal {
	if extra != nil && extra.TokenInfo != nil {
		p, _ := extra.TokenInfo.Extra[TokenInfoPrincipal].(*memgate.Principal)
		return p
	}
	return PrincipalFrom(ctx)
}
