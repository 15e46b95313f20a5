package auth

import (
	"net/http"
	"strings"
)

// RFC 6750 §3.1 error codes.
const (
	ErrInvalidRequest    = "invalid_request"
	ErrInvalidToken      = "invalid_token"
	ErrInsufficientScope = "insufficient_scope"
)

// A Refusal is a request the Authenticator does not admit, with how to
// answer it over HTTP. It satisfies the gateway's refusal interface.
type Refusal struct {
	status    int
	code      string // RFC 6750 error code; "" when there was no credential
	message   string // fixed text, safe to log and to send
	challenge string
}

// Error returns the fixed reason: never a token, claim or subject.
func (r *Refusal) Error() string {
	if r.code == "" {
		return "auth: " + r.message
	}
	return "auth: " + r.code + ": " + r.message
}

// Status is 401, 403 or 503.
func (r *Refusal) Status() int { return r.status }

// Challenge is the WWW-Authenticate value.
func (r *Refusal) Challenge() string { return r.challenge }

// Code is the RFC 6750 error code, "" when the request had no credential
// or the identity service failed.
func (r *Refusal) Code() string { return r.code }

// failure is what a verifier reports; the Authenticator adds the challenge.
type failure struct {
	status  int
	code    string
	message string
	scope   string // the scope a 403 asks for
}

func (f *failure) Error() string { return "auth: " + f.message }

// The failures the verifiers share. Their messages say what kind of problem
// it is and nothing about the token.
var (
	errNoCredential = &failure{http.StatusUnauthorized, "", "no bearer token", ""}
	errMalformed    = &failure{http.StatusUnauthorized, ErrInvalidRequest, "the Authorization header is not a single Bearer token", ""}
	errInQuery      = &failure{http.StatusUnauthorized, ErrInvalidRequest, "tokens are accepted only in the Authorization header", ""}
	errBadToken     = &failure{http.StatusUnauthorized, ErrInvalidToken, "the token is not valid", ""}
	errExpired      = &failure{http.StatusUnauthorized, ErrInvalidToken, "the token has expired", ""}
	errTooLarge     = &failure{http.StatusUnauthorized, ErrInvalidToken, "the token is too large", ""}
	errNoSubject    = &failure{http.StatusUnauthorized, ErrInvalidToken, "the token names no subject", ""}
	errBadNSClaim   = &failure{http.StatusForbidden, ErrInsufficientScope, "the token's namespace claim is not a list of valid namespace names", ""}
	errNoNamespace  = &failure{http.StatusForbidden, ErrInsufficientScope, "the token names no namespace", ""}
	errUnavailable  = &failure{http.StatusServiceUnavailable, "", "the identity service is unavailable", ""}
	errBusy         = &failure{http.StatusServiceUnavailable, "", "too many token checks at once", ""}
	errTokensFile   = &failure{http.StatusServiceUnavailable, "", "the tokens file does not read", ""}
)

// challenge builds a Bearer challenge. Parameters with empty values are
// left out; values never hold a quote or a backslash (they are fixed text,
// scope names and a URL that were checked at start).
func challenge(params ...string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	for i := 0; i+1 < len(params); i += 2 {
		if params[i+1] == "" {
			continue
		}
		b.WriteString(sep)
		b.WriteString(params[i])
		b.WriteString(`="`)
		b.WriteString(quoteSafe(params[i+1]))
		b.WriteString(`"`)
		sep = ", "
	}
	return b.String()
}

// quoteSafe drops what a quoted-string may not hold unescaped.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
