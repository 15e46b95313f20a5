package auth

import (
	"slices"
	"strings"

	"github.com/memgate/memgate"
)

// DefaultNamespaceClaim is the claim that names a token's namespaces.
const DefaultNamespaceClaim = "memgate_namespace"

// maxClaimNamespaces bounds the namespaces one token may name.
const maxClaimNamespaces = 256

// issuerSubject is the Principal.Subject of a token from an identity
// service: the issuer, '|', the subject. One server trusts one issuer, but
// the issuer in the subject keeps principals of a changed configuration
// apart, and a static principal ("static", "static:NAME", never with '|')
// never equals one.
func issuerSubject(issuer, sub string) string { return issuer + "|" + sub }

// scopesOf returns the scopes of a token: the space-separated words of
// "scope" and "scp", or their elements when either is an array (Okta sends
// scp as an array, Entra ID as a string). ok is false when either claim has
// another shape.
func scopesOf(claims map[string]any) (scopes []string, ok bool) {
	for _, name := range []string{"scope", "scp"} {
		v, present := claims[name]
		if !present {
			continue
		}
		switch v := v.(type) {
		case string:
			scopes = append(scopes, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				s, isString := e.(string)
				if !isString {
					return nil, false
				}
				scopes = append(scopes, strings.Fields(s)...)
			}
		case []string:
			for _, s := range v {
				scopes = append(scopes, strings.Fields(s)...)
			}
		default:
			return nil, false
		}
	}
	slices.Sort(scopes)
	return slices.Compact(scopes), true
}

// namespacesOf reads the namespace claim: a string names one namespace, an
// array several (the first is the token's own, the one the token strategy
// uses). An absent claim returns nil and no error; a present one that is
// empty, not a string or an array of strings, or names an invalid
// namespace is refused, so that an identity service that sends "" or []
// for a user without a namespace never grants every namespace.
func namespacesOf(claims map[string]any, claim string) ([]string, error) {
	v, present := claims[claim]
	if !present {
		return nil, nil
	}
	var names []string
	switch v := v.(type) {
	case string:
		names = []string{v}
	case []any:
		if len(v) > maxClaimNamespaces {
			return nil, errBadNSClaim
		}
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, errBadNSClaim
			}
			names = append(names, s)
		}
	case []string:
		names = v
	default:
		return nil, errBadNSClaim
	}
	if len(names) == 0 || len(names) > maxClaimNamespaces {
		return nil, errBadNSClaim
	}
	for _, n := range names {
		if _, err := memgate.ParseNamespace("namespace", n); err != nil {
			return nil, errBadNSClaim
		}
	}
	return names, nil
}

// principalOf makes the principal of a verified token's claims.
func principalOf(issuer, sub string, claims map[string]any, nsClaim string) (*memgate.Principal, error) {
	if sub == "" {
		return nil, errNoSubject
	}
	scopes, ok := scopesOf(claims)
	if !ok {
		return nil, errBadToken
	}
	names, err := namespacesOf(claims, nsClaim)
	if err != nil {
		return nil, err
	}
	p := &memgate.Principal{Subject: issuerSubject(issuer, sub), Scopes: scopes, Namespaces: names}
	if len(names) > 0 {
		p.Namespace = names[0]
	}
	return p, nil
}
