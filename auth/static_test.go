package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var allScopes = []string{"memory:read", "memory:write"}

func digest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

func TestStaticTokenLength(t *testing.T) {
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{strings.Repeat("a", 15), false},
		{strings.Repeat("a", 16), true},
		{strings.Repeat("a", MaxTokenBytes), true},
		{strings.Repeat("a", MaxTokenBytes+1), false},
		{"abcdefghijklmnop qrs", false},
		{"abcdefghijklmnop\"q", false},
		{"abcdefghijklmnop==", true},
		{"abcdefghijklmnop=x", false},
	} {
		_, err := NewStaticTokens(StaticOptions{Token: tc.token, AllScopes: allScopes})
		if (err == nil) != tc.ok {
			t.Errorf("token of %d characters: %v, want ok=%v", len(tc.token), err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), tc.token) {
			t.Errorf("the error repeats the token: %v", err)
		}
	}
}

func staticAuth(t *testing.T, o StaticOptions) *Authenticator {
	t.Helper()
	o.AllScopes = allScopes
	st, err := NewStaticTokens(o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Static: st, ReadScope: "memory:read", WriteScope: "memory:write"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestStaticAuthenticate(t *testing.T) {
	const token = "0123456789abcdef-static"
	a := staticAuth(t, StaticOptions{Token: token})
	query := bearer("Bearer " + token)
	query.URL.RawQuery = "access_token=" + token
	two := bearer("Bearer " + token)
	two.Header.Add("Authorization", "Bearer "+token)
	cases := []struct {
		name   string
		r      *http.Request
		status int
		code   string // the error attribute; "-" for none
	}{
		{"the right token passes", bearer("Bearer " + token), 200, ""},
		{"the scheme in lower case passes", bearer("bearer " + token), 200, ""},
		{"a wrong token is invalid_token", bearer("Bearer " + token + "x"), 401, ErrInvalidToken},
		{"a token one character short is invalid_token", bearer("Bearer " + token[:len(token)-1]), 401, ErrInvalidToken},
		{"no header has no error attribute", bearer(""), 401, "-"},
		{"another scheme has no error attribute", bearer("Basic dXNlcjpwYXNz"), 401, "-"},
		{"Bearer without a token is invalid_request", bearer("Bearer"), 401, ErrInvalidRequest},
		{"Bearer and spaces is invalid_request", bearer("Bearer   "), 401, ErrInvalidRequest},
		{"a token with a comma is invalid_request", bearer("Bearer " + token + ",x"), 401, ErrInvalidRequest},
		{"two tokens are invalid_request", bearer("Bearer " + token + " " + token), 401, ErrInvalidRequest},
		{"two headers are invalid_request", two, 401, ErrInvalidRequest},
		{"a token in the query string is refused", query, 401, ErrInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, exp, err := a.Authenticate(tc.r)
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
			if tc.status == 200 {
				if p.Subject != StaticSubject || !p.HasScope("memory:write") || len(p.Namespaces) != 0 || !exp.IsZero() {
					t.Fatalf("principal %+v, expiry %v", p, exp)
				}
				return
			}
			ch := err.(*Refusal).Challenge()
			if !strings.HasPrefix(ch, "Bearer ") || strings.Contains(ch, token) || strings.Contains(err.Error(), token) {
				t.Fatalf("challenge %q", ch)
			}
			if tc.code == "-" {
				if strings.Contains(ch, "error=") {
					t.Fatalf("challenge %q has an error attribute", ch)
				}
			} else if !strings.Contains(ch, `error="`+tc.code+`"`) {
				t.Fatalf("challenge %q lacks error=%q", ch, tc.code)
			}
		})
	}
}

func writeTokens(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokensFileErrors(t *testing.T) {
	d := digest("a-token-of-enough-length")
	line := func(s string) string { return fmt.Sprintf(s, d) }
	cases := []struct{ name, content, want string }{
		{"not JSON", `{"sha256":`, "line 1"},
		{"an unknown field", line(`{"sha256":"%s","subject":"a","admin":true}`), "line 1"},
		{"two values on a line", line(`{"sha256":"%s","subject":"a"} {}`), "not a JSON object"},
		{"a field name in other case", line(`{"sha256":"%s","subject":"a","namespaces":["x"],"NAMESPACES":null}`), "names are lower case"},
		{"a field in other case alone", line(`{"sha256":"%s","Subject":"a"}`), "names are lower case"},
		{"a field given twice", line(`{"sha256":"%s","subject":"a","namespaces":["x"],"namespaces":["x","y"]}`), "given twice"},
		{"namespaces null", line(`{"sha256":"%s","subject":"a","namespaces":null}`), "namespaces is null"},
		{"scopes null", line(`{"sha256":"%s","subject":"a","scopes":null}`), "scopes is null"},
		{"a short digest", `{"sha256":"abcd","subject":"a"}`, "64 hex"},
		{"a digest that is not hex", `{"sha256":"` + strings.Repeat("z", 64) + `","subject":"a"}`, "64 hex"},
		{"no subject", line(`{"sha256":"%s"}`), "subject"},
		{"a subject with a bar", line(`{"sha256":"%s","subject":"a|b"}`), "subject"},
		{"a subject too long", line(`{"sha256":"%s","subject":"` + strings.Repeat("s", 129) + `"}`), "subject"},
		{"an empty namespace list", line(`{"sha256":"%s","subject":"a","namespaces":[]}`), "namespaces is empty"},
		{"an invalid namespace", line(`{"sha256":"%s","subject":"a","namespaces":["Team A"]}`), "namespaces"},
		{"a namespace outside namespaces", line(`{"sha256":"%s","subject":"a","namespaces":["x"],"namespace":"y"}`), "one of namespaces"},
		{"a scope with a quote", line(`{"sha256":"%s","subject":"a","scopes":["a\"b"]}`), "scopes"},
		{"the same digest twice", line(`{"sha256":"%[1]s","subject":"a"}`) + "\n" + line(`{"sha256":"%[1]s","subject":"b"}`), "line 2: the same sha256 as line 1"},
		{"an error on a later line", "# comment\n\n" + line(`{"sha256":"%s","subject":"a"}`) + "\n{}", "line 4"},
		{"a line too long", strings.Repeat(" ", maxTokensFileLine+1), "longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.jsonl")
			os.WriteFile(path, []byte(tc.content), 0o600)
			_, err := NewStaticTokens(StaticOptions{File: path, AllScopes: allScopes})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), d) || strings.Contains(err.Error(), path) {
				t.Fatalf("the error repeats the file's content or path: %v", err)
			}
		})
	}
	if _, err := NewStaticTokens(StaticOptions{File: "/nonexistent/tokens", AllScopes: allScopes}); err == nil {
		t.Fatal("a missing tokens file is accepted")
	}
}

func TestTokensFilePrincipals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	writeTokens(t, path,
		"# team tokens",
		fmt.Sprintf(`{"sha256":"%s","subject":"ci","namespaces":["team-a","team-b"],"namespace":"team-b","scopes":["memory:read"]}`, digest("token-ci-0123456789")),
		fmt.Sprintf(`{"sha256":"%s","subject":"alice@example.com","namespace":"alice"}`, strings.ToUpper(digest("token-alice-0123456789"))),
		fmt.Sprintf(`{"sha256":"%s","subject":"writer","scopes":["memory:write"]}`, digest("token-writer-0123456789")),
	)
	a := staticAuth(t, StaticOptions{File: path})
	p, _, err := a.Authenticate(bearer("Bearer token-ci-0123456789"))
	if err != nil || p.Subject != "static:ci" || p.Namespace != "team-b" || strings.Join(p.Namespaces, ",") != "team-a,team-b" || p.HasScope("memory:write") {
		t.Fatalf("ci: %+v, %v", p, err)
	}
	p, _, err = a.Authenticate(bearer("Bearer token-alice-0123456789"))
	if err != nil || p.Subject != "static:alice@example.com" || p.Namespace != "alice" || len(p.Namespaces) != 1 || !p.HasScope("memory:write") {
		t.Fatalf("alice: %+v, %v", p, err)
	}
	_, _, err = a.Authenticate(bearer("Bearer token-writer-0123456789"))
	if statusOf(err) != 403 || !strings.Contains(err.(*Refusal).Challenge(), `error="insufficient_scope", error_description="the token lacks the scope memory:read", scope="memory:read"`) {
		t.Fatalf("a token without the read scope: %v %q", err, err.(*Refusal).Challenge())
	}
}

func TestTokensFileRevocation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	lineA := fmt.Sprintf(`{"sha256":"%s","subject":"a"}`, digest("token-a-0123456789"))
	lineB := fmt.Sprintf(`{"sha256":"%s","subject":"b"}`, digest("token-b-0123456789"))
	writeTokens(t, path, lineA, lineB)
	st, err := NewStaticTokens(StaticOptions{Token: "env-token-0123456789", File: path, AllScopes: allScopes})
	if err != nil {
		t.Fatal(err)
	}
	st.reloadGap = 0
	a, _ := New(Options{Static: st, ReadScope: "memory:read"})
	check := func(token string, want int) {
		t.Helper()
		if _, _, err := a.Authenticate(bearer("Bearer " + token)); statusOf(err) != want {
			t.Fatalf("status %d, want %d", statusOf(err), want)
		}
	}
	check("token-a-0123456789", 200)
	check("token-b-0123456789", 200)
	writeTokens(t, path, lineB) // one line removed
	bump(t, path)
	check("token-a-0123456789", 401)
	check("token-b-0123456789", 200)
	os.WriteFile(path, []byte("{broken"), 0o600) // a typo in an edit
	bump(t, path)
	check("token-b-0123456789", 503)
	check("env-token-0123456789", 200) // MEMGATE_TOKEN does not depend on the file
	writeTokens(t, path, lineA, lineB)
	bump(t, path)
	check("token-a-0123456789", 200)
}

// bump moves the file's time on, so a reload sees a change even on a file
// system with coarse timestamps.
func bump(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	next := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(path, next, next); err != nil {
		t.Fatal(err)
	}
}

// FuzzTokensFile: a tokens file either is refused or yields principals
// whose subjects and namespaces are valid.
func FuzzTokensFile(f *testing.F) {
	d := digest("seed-token-0123456789")
	for _, s := range []string{
		`{"sha256":"` + d + `","subject":"a"}`,
		`{"sha256":"` + d + `","subject":"a","namespaces":["x","y"],"namespace":"y","scopes":["memory:read"]}`,
		"# c\n\n{}", `{"sha256":"` + d + `","subject":"a","Subject":"b"}`,
		`{"sha256":"` + d + `","subject":"a","namespaces":["x"],"NAMESPACES":null}`,
		`{"sha256":"` + d + `","subject":"a","scopes":[],"scopes":["memory:read"]}`, `[]`, `{"sha256":null}`, "\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := parseTokensFile(strings.NewReader(s), allScopes)
		if err != nil {
			return
		}
		// Every line accepted names each field exactly, at most once.
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(line))
			if _, err := dec.Token(); err != nil {
				t.Fatalf("accepted a line that is not JSON: %q", line)
			}
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				key := tok.(string)
				if seen[key] || !slices.Contains([]string{"sha256", "subject", "namespaces", "namespace", "scopes"}, key) {
					t.Fatalf("accepted a line with the key %q twice or in other case: %q", key, line)
				}
				seen[key] = true
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, e := range entries {
			p := e.principal
			if !strings.HasPrefix(p.Subject, "static:") || !validSubject(strings.TrimPrefix(p.Subject, "static:")) {
				t.Fatalf("subject %q", p.Subject)
			}
			if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, p.Namespace) {
				t.Fatalf("own namespace %q outside %v", p.Namespace, p.Namespaces)
			}
		}
	})
}
