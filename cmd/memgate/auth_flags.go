package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/auth"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// The secrets of the auth modes, read from the environment only (never a
// flag: a command line is visible to every user of the machine).
const (
	envStaticToken        = "MEMGATE_TOKEN"
	envIntrospectionToken = "MEMGATE_OAUTH_INTROSPECTION_TOKEN"
	envAdminToken         = "MEMGATE_ADMIN_TOKEN"
)

// authFlags configure who may call serve --transport http. See
// docs/AUTH.md for the modes, the tokens file and the namespace rules.
type authFlags struct {
	TokensFile string `name:"tokens-file" placeholder:"FILE" help:"Static bearer tokens, one JSON object a line: sha256 of the token, subject, namespaces, scopes (docs/AUTH.md). Edits apply within a second. Besides MEMGATE_TOKEN (environment only)."`

	JWTIssuer      string        `name:"jwt-issuer" placeholder:"ISSUER" help:"Accept JWTs whose iss is exactly this."`
	JWTAudience    string        `name:"jwt-audience" placeholder:"AUDIENCE" help:"Accept JWTs whose aud holds this."`
	JWTJWKSURL     string        `name:"jwt-jwks-url" placeholder:"URL" help:"JWKS of the JWT issuer (https; http only on a loopback host); cached and refreshed."`
	JWTJWKSFile    string        `name:"jwt-jwks-file" placeholder:"FILE" help:"JWKS of the JWT issuer, from a file read at start."`
	JWTCAFile      string        `name:"jwt-ca-file" placeholder:"FILE" help:"PEM certificates: the only ones trusted for --jwt-jwks-url (a private CA)."`
	JWTAlgorithms  []string      `name:"jwt-algorithms" placeholder:"ALG" help:"Signature algorithms accepted (default RS*, PS*, ES*, EdDSA; never HS* or none)."`
	JWTJWKSRefresh time.Duration `name:"jwt-jwks-refresh" placeholder:"DURATION" help:"Refetch the JWKS in the background once it is this old."`
	ClockSkew      time.Duration `name:"clock-skew" aliases:"jwt-clock-skew" placeholder:"DURATION" help:"Leeway for exp, nbf and iat of JWTs, and nbf and iat of introspected tokens."`

	OAuthIssuer           string        `name:"oauth-issuer" placeholder:"URL" help:"OAuth authorization server (https): introspection answers must name it as iss."`
	OAuthResource         string        `name:"oauth-resource" placeholder:"URL" help:"This server's resource identifier: introspected tokens must hold it in aud."`
	OAuthIntrospection    string        `name:"oauth-introspection" placeholder:"URL" help:"RFC 7662 introspection endpoint, on the issuer's origin; memgate authenticates with MEMGATE_OAUTH_INTROSPECTION_TOKEN (environment only)."`
	OAuthClientID         string        `name:"oauth-client-id" placeholder:"ID" help:"Send MEMGATE_OAUTH_INTROSPECTION_TOKEN as this client's secret (HTTP Basic) instead of as a bearer token."`
	OAuthCAFile           string        `name:"oauth-ca-file" placeholder:"FILE" help:"PEM certificates: the only ones trusted for the introspection endpoint (a private CA)."`
	IntrospectionTimeout  time.Duration `name:"introspection-timeout" placeholder:"DURATION" help:"Deadline of one introspection (503 past it)."`
	IntrospectionCacheTTL time.Duration `name:"introspection-cache-ttl" default:"0s" placeholder:"DURATION" help:"Keep an active introspection answer this long, never past its exp (0s: ask every time)."`

	PublicURL            string `name:"public-url" placeholder:"URL" help:"The MCP endpoint's URL as clients reach it, the resource of the RFC 9728 metadata (default: --oauth-resource, else --jwt-audience when it is a URL, else the request's own address)."`
	ReadScope            string `name:"read-scope" default:"memory:read" placeholder:"SCOPE" help:"Scope every authenticated request needs (403 without it; empty: none)."`
	WriteScope           string `name:"write-scope" default:"memory:write" placeholder:"SCOPE" help:"Scope remember and forget need besides (empty: none)."`
	AdminScope           string `name:"admin-scope" default:"memory:admin" placeholder:"SCOPE" help:"Scope the admin API under /admin/v1/ needs (MEMGATE_ADMIN_TOKEN, environment only, holds it)."`
	NamespaceClaim       string `name:"namespace-claim" placeholder:"CLAIM" help:"Claim naming a token's namespace (a string) or namespaces (an array, the first its own)."`
	NamespaceFromSubject bool   `name:"namespace-from-subject" help:"Token strategy: a token without the namespace claim gets a namespace of its own, derived from its issuer and subject (a per-user SaaS)."`
}

// Bounds of the auth flags.
const (
	maxClockSkew        = 5 * time.Minute
	minJWKSRefresh      = 10 * time.Second
	maxJWKSRefresh      = 24 * time.Hour
	minIntrospectWait   = 100 * time.Millisecond
	maxIntrospectWait   = time.Minute
	maxIntrospectionTTL = time.Hour
)

func (f *authFlags) jwt() bool {
	return f.JWTIssuer != "" || f.JWTAudience != "" || f.JWTJWKSURL != "" || f.JWTJWKSFile != "" ||
		f.JWTCAFile != "" || len(f.JWTAlgorithms) > 0
}

func (f *authFlags) oauth() bool {
	return f.OAuthIssuer != "" || f.OAuthResource != "" || f.OAuthIntrospection != "" ||
		f.OAuthClientID != "" || f.OAuthCAFile != ""
}

// validate reports the problems of the authorization flags through bad.
// MEMGATE_TOKEN and the files are checked when serve starts (authenticator):
// Config does not see the environment's secrets.
func (f *authFlags) validate(c *Config, bad badFunc) {
	jwt, oauth := f.jwt(), f.oauth()
	if c.Transport != "http" {
		for _, s := range []struct {
			flag string
			set  bool
		}{{"tokens-file", f.TokensFile != ""}, {"jwt-issuer", jwt}, {"oauth-issuer", oauth}, {"public-url", f.PublicURL != ""}} {
			if s.set {
				bad(s.flag, "authorization is for --transport http; stdio serves the one client that started it")
			}
		}
	}
	if jwt && oauth {
		bad("oauth-issuer", "JWT (--jwt-*) and OAuth introspection (--oauth-*) exclude each other; choose one")
	}
	if jwt {
		if f.JWTIssuer == "" {
			bad("jwt-issuer", "JWT needs the issuer its tokens must name")
		}
		if f.JWTAudience == "" {
			bad("jwt-audience", "JWT needs the audience its tokens must hold (this server's identifier at the issuer)")
		}
		switch {
		case f.JWTJWKSURL == "" && f.JWTJWKSFile == "":
			bad("jwt-jwks-url", "JWT needs the issuer's keys: --jwt-jwks-url or --jwt-jwks-file")
		case f.JWTJWKSURL != "" && f.JWTJWKSFile != "":
			bad("jwt-jwks-file", "give --jwt-jwks-url or --jwt-jwks-file, not both")
		case f.JWTJWKSURL != "":
			if err := auth.CheckServiceURL(f.JWTJWKSURL, true); err != nil {
				bad("jwt-jwks-url", "%s", err.Error())
			}
		}
		if f.JWTCAFile != "" && f.JWTJWKSURL == "" {
			bad("jwt-ca-file", "only --jwt-jwks-url uses it")
		}
		for _, alg := range f.JWTAlgorithms {
			if !slices.Contains(auth.DefaultAlgorithms, alg) {
				bad("jwt-algorithms", "%q is not one of %s", alg, strings.Join(auth.DefaultAlgorithms, ", "))
				break
			}
		}
	}
	if f.JWTJWKSRefresh < minJWKSRefresh || f.JWTJWKSRefresh > maxJWKSRefresh {
		bad("jwt-jwks-refresh", "must be from %s to %s", minJWKSRefresh, maxJWKSRefresh)
	}
	if f.ClockSkew < 0 || f.ClockSkew > maxClockSkew {
		bad("clock-skew", "must be from 0s to %s", maxClockSkew)
	}
	if oauth {
		switch {
		case f.OAuthIssuer == "":
			bad("oauth-issuer", "OAuth introspection needs the authorization server's issuer URL")
		default:
			if err := auth.CheckServiceURL(f.OAuthIssuer, false); err != nil {
				bad("oauth-issuer", "%s", err.Error())
			}
		}
		if f.OAuthResource == "" {
			bad("oauth-resource", "OAuth introspection needs this server's resource identifier (the MCP endpoint's URL)")
		} else if err := auth.CheckResource(f.OAuthResource); err != nil {
			bad("oauth-resource", "%s", err.Error())
		}
		switch {
		case f.OAuthIntrospection == "":
			bad("oauth-introspection", "OAuth introspection needs the introspection endpoint")
		default:
			if err := auth.CheckServiceURL(f.OAuthIntrospection, false); err != nil {
				bad("oauth-introspection", "%s", err.Error())
			} else if f.OAuthIssuer != "" && !auth.SameOrigin(f.OAuthIssuer, f.OAuthIntrospection) {
				bad("oauth-introspection", "must be on the issuer's origin (scheme, host and port): tokens are sent nowhere else")
			}
		}
	}
	if f.IntrospectionTimeout < minIntrospectWait || f.IntrospectionTimeout > maxIntrospectWait {
		bad("introspection-timeout", "must be from %s to %s", minIntrospectWait, maxIntrospectWait)
	}
	if f.IntrospectionCacheTTL < 0 || f.IntrospectionCacheTTL > maxIntrospectionTTL {
		bad("introspection-cache-ttl", "must be from 0s to %s", maxIntrospectionTTL)
	}
	if f.IntrospectionCacheTTL > 0 && !oauth {
		bad("introspection-cache-ttl", "only OAuth introspection uses it")
	}
	if f.PublicURL != "" {
		if err := auth.CheckResource(f.PublicURL); err != nil {
			bad("public-url", "%s", err.Error())
		}
		if !jwt && !oauth {
			bad("public-url", "only the JWT and OAuth modes publish metadata")
		}
	}
	if f.AdminScope == "" || !auth.ValidScope(f.AdminScope) {
		bad("admin-scope", "a scope is 1 to 128 visible characters without spaces, quotes or backslashes")
	}
	for _, s := range []struct{ flag, v string }{{"read-scope", f.ReadScope}, {"write-scope", f.WriteScope}} {
		if s.v != "" && !auth.ValidScope(s.v) {
			bad(s.flag, "a scope is 1 to 128 visible characters without spaces, quotes or backslashes (or empty: no scope needed)")
		}
	}
	if f.NamespaceClaim == "" || len(f.NamespaceClaim) > 128 || strings.ContainsAny(f.NamespaceClaim, " \t\"\\") {
		bad("namespace-claim", "must be a claim name: 1 to 128 characters without spaces, quotes or backslashes")
	}
	if f.NamespaceFromSubject && c.NamespaceStrategy != string(tenants.Token) {
		bad("namespace-from-subject", "only the token strategy uses it; add --namespace-strategy token")
	}
}

// authSetup is how serve --transport http authenticates its callers.
type authSetup struct {
	Auth       gateway.Authenticator   // nil: no authentication
	Routes     map[string]http.Handler // served without authentication (metadata), by path
	Mode       string                  // "none", "static", "jwt" or "oauth"
	Admin      gateway.Authenticator   // the admin API's; nil: no admin API
	WriteScope string                  // the scope remember and forget need; "" when Auth is nil
}

// authenticator returns the authentication of the configuration: static
// tokens (MEMGATE_TOKEN, --tokens-file) alone or beside JWT or OAuth
// introspection, or none. It reads the secrets from the environment and
// the files, so a bad token, key set or CA fails here, at start.
func (a *app) authenticator() (*authSetup, error) {
	f := &a.cfg.Auth
	getenv := a.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var scopes []string // the scopes there are: an empty name needs none
	for _, sc := range []string{f.ReadScope, f.WriteScope} {
		if sc != "" && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	setup := &authSetup{Mode: "none"}
	opts := auth.Options{ReadScope: f.ReadScope, WriteScope: f.WriteScope,
		RequireNamespace: a.cfg.NamespaceStrategy == string(tenants.Token) && !f.NamespaceFromSubject}

	token, adminToken := getenv(envStaticToken), getenv(envAdminToken)
	var static *auth.StaticTokens
	if token != "" || f.TokensFile != "" || adminToken != "" {
		if err := auth.CheckEnvTokens(token, adminToken); err != nil {
			return nil, usageError{err}
		}
		st, err := auth.NewStaticTokens(auth.StaticOptions{Token: token, File: f.TokensFile, AllScopes: scopes,
			AdminToken: adminToken, AdminScope: f.AdminScope, Logger: a.log})
		if err != nil {
			return nil, usageError{fmt.Errorf("--tokens-file: %w", err)}
		}
		static = st
		if token != "" || f.TokensFile != "" {
			opts.Static, setup.Mode = st, "static"
		}
	}

	var issuer, resource string
	switch {
	case f.jwt():
		v, err := auth.NewJWT(auth.JWTOptions{
			Issuer: f.JWTIssuer, Audience: f.JWTAudience, JWKSURL: f.JWTJWKSURL, JWKSFile: f.JWTJWKSFile,
			CAFile: f.JWTCAFile, Algorithms: f.JWTAlgorithms, ClockSkew: f.ClockSkew,
			NamespaceClaim: f.NamespaceClaim, Refresh: f.JWTJWKSRefresh, Logger: a.log,
		})
		if err != nil {
			return nil, usageError{fmt.Errorf("--jwt-*: %w", err)}
		}
		opts.Verifier, setup.Mode, issuer = v, "jwt", f.JWTIssuer
		if auth.CheckResource(f.JWTAudience) == nil {
			resource = f.JWTAudience
		}
	case f.oauth():
		credential := getenv(envIntrospectionToken)
		if credential == "" {
			return nil, usageError{errors.New("--oauth-introspection: set " + envIntrospectionToken + " to the credential memgate introspects with")}
		}
		in, err := auth.NewIntrospector(auth.IntrospectionOptions{
			Issuer: f.OAuthIssuer, Resource: f.OAuthResource, Endpoint: f.OAuthIntrospection,
			Credential: credential, ClientID: f.OAuthClientID, CAFile: f.OAuthCAFile,
			Timeout: f.IntrospectionTimeout, CacheTTL: f.IntrospectionCacheTTL, ClockSkew: f.ClockSkew,
			NamespaceClaim: f.NamespaceClaim, Logger: a.log,
		})
		if err != nil {
			return nil, usageError{fmt.Errorf("--oauth-*: %w", err)}
		}
		opts.Verifier, setup.Mode, issuer, resource = in, "oauth", f.OAuthIssuer, f.OAuthResource
	}
	// An admin API only where a credential can carry the admin scope: not
	// for MEMGATE_TOKEN alone, which never does.
	if adminToken != "" || f.TokensFile != "" || opts.Verifier != nil {
		defer func() {
			if setup == nil {
				return
			}
			// The admin API's authenticator: the same credentials, but the
			// admin scope instead of the read scope, and no namespace needed.
			adm := opts
			adm.Static, adm.ReadScope, adm.WriteScope, adm.RequireNamespace = static, f.AdminScope, "", false
			if authn, err := auth.New(adm); err == nil {
				setup.Admin = authn
			}
		}()
	}
	if setup.Mode == "none" {
		return setup, nil
	}
	if opts.Verifier != nil {
		if f.PublicURL != "" {
			resource = f.PublicURL
		}
		meta := &auth.Metadata{Resource: resource, Path: a.cfg.HTTP.Path, AuthorizationServers: []string{issuer}, Scopes: scopes}
		if _, err := url.Parse(issuer); err != nil || !strings.Contains(issuer, "://") {
			meta.AuthorizationServers = nil // an issuer that is no URL cannot be discovered
		}
		opts.Metadata, setup.Routes = meta, meta.Routes()
	}
	authn, err := auth.New(opts)
	if err != nil {
		return nil, usageError{err}
	}
	setup.Auth, setup.WriteScope = authn, f.WriteScope
	if f.NamespaceFromSubject {
		setup.Auth = subjectNamespaces{authn}
	}
	return setup, nil
}

// subjectNamespaces gives a principal whose token names no namespace the
// one derived from its subject (--namespace-from-subject), as its own and
// only namespace, as if its token had named it.
type subjectNamespaces struct{ next gateway.Authenticator }

func (s subjectNamespaces) Authenticate(r *http.Request) (*memgate.Principal, time.Time, error) {
	p, exp, err := s.next.Authenticate(r)
	if err != nil || p.Namespace != "" {
		return p, exp, err
	}
	ns := string(tenants.SubjectNamespace(p.Subject))
	p.Namespace = ns
	if len(p.Namespaces) == 0 {
		p.Namespaces = []string{ns}
	}
	return p, exp, nil
}
