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
// The SDK's streamable HTTP handler does not hand a request's context to the
// handlers of a stateful session; what it does hand them is the TokenInfo that
// auth.RequireBearerToken put in that context (as CallToolRequest.Extra). So
// an HTTP verifier returns NewTokenInfo(principal, expiry), and the handlers
// here find the principal either way.
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

// principalOf finds the caller of one request: in the context first, then in
// the token information the transport attached to the request.
func principalOf(ctx context.Context, extra *mcp.RequestExtra) *memgate.Principal {
	if p := PrincipalFrom(ctx); p != nil {
		return p
	}
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	p, _ := extra.TokenInfo.Extra[TokenInfoPrincipal].(*memgate.Principal)
	return p
}
