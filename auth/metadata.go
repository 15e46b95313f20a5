package auth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPrefix starts the address of RFC 9728 protected resource
// metadata; the resource's path follows it.
const WellKnownPrefix = "/.well-known/oauth-protected-resource"

// Metadata is memgate's RFC 9728 protected resource metadata, and the
// address that challenges point clients to.
type Metadata struct {
	// Resource is the resource identifier: the absolute URL of the MCP
	// endpoint as clients reach it (https://memory.example.com/mcp). When
	// empty it is made per request from the request's Host and Path, which
	// suits a server reached directly (the gateway serves the document
	// behind its Host guard, so only an allowed host is ever stated, and
	// the document is then never cached); behind a proxy that rewrites
	// addresses, set it.
	Resource string
	// Path is the MCP path the gateway serves (default /mcp).
	Path string
	// AuthorizationServers are the issuers that give out tokens for it.
	AuthorizationServers []string
	// Scopes are the scopes it understands.
	Scopes []string
}

// CheckResource checks a public resource URL: absolute http(s), no query,
// no fragment, no user information.
func CheckResource(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return errString("must be an absolute http or https URL")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "\"\\ "):
		return errString("must have no user information, query or fragment")
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

func (m *Metadata) path() string {
	if m.Path == "" {
		return "/mcp"
	}
	return m.Path
}

// resource returns the resource identifier for a request.
func (m *Metadata) resource(r *http.Request) string {
	if m.Resource != "" {
		return m.Resource
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + m.path()
}

// URL returns the address of the metadata document for a request: the
// resource's origin, the well-known prefix, the resource's path.
func (m *Metadata) URL(r *http.Request) string {
	res := m.resource(r)
	u, err := url.Parse(res)
	if err != nil {
		return ""
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + WellKnownPrefix + p
}

// Routes returns the paths the document is served at, without
// authentication: the well-known prefix with the resource's path (RFC 9728
// §3.1) and, for clients that look there first, the prefix alone. When a
// public Resource has another path than Path, both paths are served.
func (m *Metadata) Routes() map[string]http.Handler {
	routes := map[string]http.Handler{
		WellKnownPrefix: m,
		WellKnownPrefix + strings.TrimSuffix(m.path(), "/"): m,
	}
	if m.Resource != "" {
		if u, err := url.Parse(m.Resource); err == nil && u.Path != "" && u.Path != "/" {
			routes[WellKnownPrefix+strings.TrimSuffix(u.Path, "/")] = m
		}
	}
	return routes
}

// ServeHTTP answers GET and HEAD with the document.
func (m *Metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers,omitempty"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name,omitempty"`
	}{
		Resource:               m.resource(r),
		AuthorizationServers:   m.AuthorizationServers,
		ScopesSupported:        m.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "memgate",
	}
	b, err := json.Marshal(doc)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if m.Resource != "" {
		w.Header().Set("Cache-Control", "public, max-age=300")
	} else {
		// Made from the request's Host (which the gateway has checked): no
		// cache may hand one host's document to a client of another.
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Vary", "Host")
	}
	if r.Method == http.MethodGet {
		w.Write(b)
	}
}
