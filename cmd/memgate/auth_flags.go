package main

// authFlags configure who may call serve --transport http.
type authFlags struct{}

// validate reports the problems of the authorization flags through bad.
func (f *authFlags) validate(c *Config, bad func(flag, format string, args ...any)) {}
