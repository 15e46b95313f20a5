// Package console serves the web console: one page and its script and
// style, embedded in the binary, for administrators to browse and curate
// memories through the admin API.
//
// The page holds the admin token in memory only and sends it as a bearer
// header; it sets no cookie and loads nothing from another origin, which
// the Content-Security-Policy of every answer enforces.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is where the console is served.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every answer: the page may run
// only its own script and style and talk only to its own origin.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// Assets returns the console's files: index.html, its script and style.
func Assets() fs.FS {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("console: " + err.Error()) // the embedded folder is always there
	}
	return root
}

// Handler serves the console's files under Prefix (the page at Prefix
// itself), GET and HEAD only.
func Handler() http.Handler {
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(Assets()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// A new binary's page must not be mixed with an old one's script.
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		files.ServeHTTP(w, r)
	})
}
