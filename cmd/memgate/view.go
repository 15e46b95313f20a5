package main

import (
	"github.com/memgate/memgate"
	"github.com/memgate/memgate/tenants"
)

// includeFlag: the namespaces search and get read besides the call's own.
type includeFlag struct {
	IncludeNamespace []string `name:"include-namespace" placeholder:"NAME" help:"Let search and get also read this namespace (repeatable, or comma-separated): search ranks its memories with the call's own, get looks there after the call's own namespace. Writes, list and export stay on the call's namespace; a token that may not use it does not read it."`
}

func (f *includeFlag) AfterApply(c *Config) error {
	c.includeFlag, c.taken = *f, c.taken|takesInclude
	return nil
}

func (f *includeFlag) validate(bad badFunc) {
	for _, ns := range f.IncludeNamespace {
		if _, err := memgate.ParseNamespace("include-namespace", ns); err != nil {
			bad("include-namespace", "must be 1 to %d characters of a-z, 0-9, _ and -", memgate.MaxNamespaceLen)
			return
		}
	}
}

// view is the server's Options.View of the configuration on resolver r:
// nil without --include-namespace.
func (c *Config) view(r *tenants.Resolver) func(*memgate.Principal, memgate.Namespace) []memgate.Namespace {
	if len(c.IncludeNamespace) == 0 {
		return nil
	}
	include := make([]memgate.Namespace, len(c.IncludeNamespace))
	for i, ns := range c.IncludeNamespace {
		include[i] = memgate.Namespace(ns)
	}
	return func(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace {
		return r.View(p, ns, include)
	}
}
