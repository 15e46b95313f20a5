package main

// httpFlags configure serve --transport http.
type httpFlags struct{}

// validate reports the problems of the HTTP flags through bad.
func (f *httpFlags) validate(c *Config, bad func(flag, format string, args ...any)) {}
