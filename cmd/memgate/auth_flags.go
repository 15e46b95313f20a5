package main

import (
	"net/http"

	"github.com/memgate/memgate/server"
)

// authFlags configure who may call serve --transport http.
type authFlags struct{}

// validate reports the problems of the authorization flags through bad.
func (f *authFlags) validate(c *Config, bad func(flag, format string, args ...any)) {}

// authSetup is how serve --transport http authenticates its callers.
type authSetup struct {
	Auth       server.Authenticator    // nil: no authentication
	Routes     map[string]http.Handler // served without authentication (metadata), by path
	Mode       string                  // "none", "static", "jwt" or "oauth"
	WriteScope string                  // the scope remember and forget need; "" when Auth is nil
}

// authenticator returns the authentication of the configuration.
func (a *app) authenticator() (*authSetup, error) {
	return &authSetup{Mode: "none"}, nil
}
