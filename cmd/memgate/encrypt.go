package main

// encryptFlags configure encryption at rest.
type encryptFlags struct{}

// validate reports the problems of the encryption flags through bad.
func (f *encryptFlags) validate(c *Config, bad func(flag, format string, args ...any)) {}
