package auth

import (
	"net/http"
	"strings"
)

// MaxTokenBytes bounds a bearer token. A larger one is refused before any
// parsing, signature check or introspection.
const MaxTokenBytes = 8 << 10

// BearerToken returns the bearer token of r: the one Authorization header,
// scheme Bearer (in any case), then a token68. A request without the header,
// or with another scheme, has no credential; anything else that is not one
// well-formed token is a malformed request. A token in the query string is
// refused even when the header is right: it ends up in logs and histories.
func BearerToken(r *http.Request) (string, error) {
	if r.URL != nil && r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
		return "", errInQuery
	}
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errNoCredential
	case 1:
	default:
		return "", errMalformed
	}
	return ParseAuthorization(values[0])
}

// ParseAuthorization reads the value of an Authorization header.
func ParseAuthorization(h string) (string, error) {
	scheme, rest, found := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		if scheme == "" && found {
			return "", errMalformed // leading white space
		}
		return "", errNoCredential // another scheme is no bearer credential
	}
	token := strings.TrimLeft(rest, " ")
	switch {
	case token == "":
		return "", errMalformed
	case len(token) > MaxTokenBytes:
		return "", errTooLarge
	case !isToken68(token):
		return "", errMalformed
	}
	return token, nil
}

// isToken68 reports whether s is an RFC 7235 token68:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
