package gateway

import (
	"net/http"
	"time"

	"github.com/memgate/memgate"
)

// An Authenticator establishes who sends an HTTP request. The gateway calls
// it for every request to the MCP path, before any MCP processing.
//
// Authenticate returns the caller and when its credential expires (the zero
// time for never). It refuses a request with an error; when that error is a
// Refusal the gateway answers with its status and challenge, otherwise with
// 401 and a plain Bearer challenge. An Authenticator checks the read scope
// itself (it knows its scope names and its metadata address); the write
// scope is checked per tool, against Options.WriteScope.
type Authenticator interface {
	Authenticate(r *http.Request) (*memgate.Principal, time.Time, error)
}

// A Refusal is an authentication or authorization failure that says how to
// answer it over HTTP.
type Refusal interface {
	error
	// Status is 401 (no or bad credential), 403 (insufficient scope or a
	// namespace the credential may not use) or 503 (the identity service
	// failed or is overloaded).
	Status() int
	// Challenge is the WWW-Authenticate value, "" for none.
	Challenge() string
}
