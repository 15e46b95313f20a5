package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/memgate/memgate/server/console"
)

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// Every answer carries the strict policy and sets no cookie; the page, its
// script and its style are served with their types; anything but GET and
// HEAD is refused.
func TestEveryAnswerIsUnderThePolicy(t *testing.T) {
	h := console.Handler()
	for _, c := range []struct {
		method, path string
		status       int
		typ          string
	}{
		{"GET", "/console/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/console/", 200, "text/html; charset=utf-8"},
		{"GET", "/console/console.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/console/console.css", 200, "text/css; charset=utf-8"},
		{"GET", "/console", 301, ""},
		{"GET", "/console/nothing-here", 404, ""},
		{"POST", "/console/", 405, ""},
	} {
		rec := get(t, h, c.method, c.path)
		if rec.Code != c.status {
			t.Errorf("%s %s: %d", c.method, c.path, rec.Code)
		}
		if c.typ != "" && rec.Header().Get("Content-Type") != c.typ {
			t.Errorf("%s %s: type %q", c.method, c.path, rec.Header().Get("Content-Type"))
		}
		if rec.Header().Get("Content-Security-Policy") != console.CSP || rec.Header().Get("X-Content-Type-Options") != "nosniff" ||
			rec.Header().Get("X-Frame-Options") != "DENY" || rec.Header().Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s: headers %v", c.method, c.path, rec.Header())
		}
		if rec.Header().Get("Set-Cookie") != "" {
			t.Errorf("%s %s sets a cookie", c.method, c.path)
		}
	}
	if loc := get(t, h, "GET", "/console").Header().Get("Location"); loc != "/console/" {
		t.Errorf("/console redirects to %q", loc)
	}
}

// The assets name nothing of another origin, run no inline script or
// style (which the policy would refuse), and keep the token out of every
// storage a page has.
func TestAssetsStayOnTheirOrigin(t *testing.T) {
	h := console.Handler()
	foreign := regexp.MustCompile(`(?i:(https?:)?//[a-z0-9.-]+\.[a-z]{2,})|@import|url\(`)
	for _, name := range []string{"", "console.js", "console.css"} {
		body := get(t, h, "GET", "/console/"+name).Body.String()
		if m := foreign.FindString(body); m != "" {
			t.Errorf("%q names %q", name, m)
		}
		for _, bad := range []string{"localStorage", "sessionStorage", "document.cookie", "indexedDB", "innerHTML", "outerHTML",
			"insertAdjacentHTML", "eval(", "new Function", " style=", "<style", "onclick="} {
			if strings.Contains(body, bad) {
				t.Errorf("%q uses %s", name, bad)
			}
		}
	}
	page := get(t, h, "GET", "/console/").Body.String()
	if strings.Count(page, "<script") != 1 || !strings.Contains(page, `<script type="module" src="console.js"></script>`) {
		t.Errorf("the page's scripts: %s", page)
	}
}

// The embedded folder holds the three files the page needs, no more.
func TestOnlyThePageIsEmbedded(t *testing.T) {
	var names []string
	fs.WalkDir(console.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if strings.Join(names, " ") != "console.css console.js index.html" {
		t.Fatalf("embedded: %v", names)
	}
}
