package tenants

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

func TestResolve(t *testing.T) {
	limited := &memgate.Principal{Subject: "alice", Namespaces: []string{"team-a", "default"}}
	claim := &memgate.Principal{Subject: "bob", Namespace: "bobs"}
	cases := []struct {
		name string
		r    Resolver
		p    *memgate.Principal
		arg  string
		want memgate.Namespace
		code memgate.Code
	}{
		{"fixed uses default when unset", Resolver{Strategy: Fixed}, nil, "", "default", ""},
		{"fixed uses the configured namespace", Resolver{Strategy: Fixed, Default: "work"}, nil, "", "work", ""},
		{"an argument needs --namespace-arg", Resolver{Strategy: Fixed}, nil, "other", "", memgate.CodeInvalidArgument},
		{"an allowed argument wins", Resolver{Strategy: Fixed, AllowArg: true}, nil, "other", "other", ""},
		{"a malformed argument is refused", Resolver{Strategy: Fixed, AllowArg: true}, nil, "../etc", "", memgate.CodeInvalidArgument},
		{"an argument outside the token's namespaces is forbidden", Resolver{Strategy: Fixed, AllowArg: true}, limited, "team-b", "", memgate.CodeForbidden},
		{"an argument inside the token's namespaces passes", Resolver{Strategy: Fixed, AllowArg: true}, limited, "team-a", "team-a", ""},
		{"the fixed namespace must be allowed too", Resolver{Strategy: Fixed, Default: "work"}, limited, "", "", memgate.CodeForbidden},
		{"token strategy takes the claim", Resolver{Strategy: Token}, claim, "", "bobs", ""},
		{"token strategy without a principal is forbidden", Resolver{Strategy: Token}, nil, "", "", memgate.CodeForbidden},
		{"token strategy without a claim is forbidden", Resolver{Strategy: Token}, &memgate.Principal{Subject: "x"}, "", "", memgate.CodeForbidden},
		{"token strategy with a malformed claim is forbidden", Resolver{Strategy: Token}, &memgate.Principal{Namespace: "Bad Name"}, "", "", memgate.CodeForbidden},
		{"token strategy derives from the subject when asked", Resolver{Strategy: Token, FromSubject: true}, &memgate.Principal{Subject: "carol"}, "", SubjectNamespace("carol"), ""},
		{"a derived namespace admits no other argument", Resolver{Strategy: Token, FromSubject: true, AllowArg: true}, &memgate.Principal{Subject: "carol"}, "dave", "", memgate.CodeForbidden},
		{"a derived namespace admits itself as the argument", Resolver{Strategy: Token, FromSubject: true, AllowArg: true}, &memgate.Principal{Subject: "carol"}, string(SubjectNamespace("carol")), SubjectNamespace("carol"), ""},
		{"a claimed namespace admits no other argument", Resolver{Strategy: Token, AllowArg: true}, claim, "other", "", memgate.CodeForbidden},
		{"a namespace list admits its members as arguments", Resolver{Strategy: Token, AllowArg: true}, &memgate.Principal{Subject: "e", Namespace: "a", Namespaces: []string{"a", "b"}}, "b", "b", ""},
		{"a namespace list admits nothing else", Resolver{Strategy: Token, AllowArg: true}, &memgate.Principal{Subject: "e", Namespace: "a", Namespaces: []string{"a", "b"}}, "c", "", memgate.CodeForbidden},
		{"token strategy needs a principal even with an argument", Resolver{Strategy: Token, AllowArg: true}, nil, "x", "", memgate.CodeForbidden},
		{"project strategy uses its computed namespace", Resolver{Strategy: Project, Default: "proj-0123abcd"}, nil, "", "proj-0123abcd", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Resolve(tc.p, tc.arg)
			if tc.code != "" {
				if memgate.ErrorCode(err) != tc.code {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSubjectNamespaceIsStableAndValid(t *testing.T) {
	a, b := SubjectNamespace("user-1"), SubjectNamespace("user-2")
	if a != SubjectNamespace("user-1") || a == b {
		t.Fatalf("derivation must be stable and distinct: %s %s", a, b)
	}
	if _, err := memgate.ParseNamespace("ns", string(a)); err != nil || strings.Contains(string(a), "user") {
		t.Fatalf("derived namespace %q: %v", a, err)
	}
}

func TestIssuerSubjectNamespace(t *testing.T) {
	a := IssuerSubjectNamespace("https://one.example.com/", "alice")
	b := IssuerSubjectNamespace("https://two.example.com/", "alice")
	if a == b || a != SubjectNamespace("https://one.example.com/|alice") {
		t.Fatalf("%s %s", a, b)
	}
}

func TestProjectNamespacesOfSameNamedFoldersDiffer(t *testing.T) {
	base := t.TempDir()
	one := filepath.Join(base, "a", "My Project")
	two := filepath.Join(base, "b", "My Project")
	for _, d := range []string{one, two} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	n1, err1 := ProjectNamespace(one)
	n2, err2 := ProjectNamespace(two)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	re := regexp.MustCompile(`^my-project-[0-9a-f]{8}$`)
	if !re.MatchString(string(n1)) || !re.MatchString(string(n2)) || n1 == n2 {
		t.Fatalf("namespaces %q and %q", n1, n2)
	}
}

func TestProjectNamespaceOfHostileFolderNames(t *testing.T) {
	for _, name := range []string{"..", "Ünïcödé", strings.Repeat("x", 300), "a\x00b", "ＡＢＣ", "-", "con", "a b/c"} {
		ns, err := ProjectNamespace(filepath.Join("/tmp", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := memgate.ParseNamespace("ns", string(ns)); err != nil {
			t.Fatalf("folder %q gave invalid namespace %q", name, ns)
		}
	}
}

// FuzzNamespace: a namespace either is refused or is a plain folder name
// that stays inside the stores folder; sanitising always yields valid bytes.
func FuzzNamespace(f *testing.F) {
	for _, s := range []string{"default", "..", "../x", "/", "a\x00", strings.Repeat("a", 65), "ａ", "A", "a/b", ".", "-", "_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ns, err := memgate.ParseNamespace("namespace", s); err == nil {
			stores := "/data/stores"
			p := filepath.Join(stores, string(ns))
			if filepath.Dir(p) != stores || ns == "." || ns == ".." || strings.ContainsAny(string(ns), "/\\.\x00") {
				t.Fatalf("namespace %q escapes or is not plain: %s", ns, p)
			}
		}
		out := memgate.SanitizeNamespace(s, memgate.MaxNamespaceLen)
		if len(out) > memgate.MaxNamespaceLen || !utf8.ValidString(out) {
			t.Fatalf("sanitised %q to %q", s, out)
		}
		if out != "" {
			if _, err := memgate.ParseNamespace("ns", out); err != nil {
				t.Fatalf("sanitised %q to invalid %q", s, out)
			}
		}
		ns, err := ProjectNamespace(filepath.Join("/tmp", s))
		if err == nil {
			if _, err := memgate.ParseNamespace("ns", string(ns)); err != nil {
				t.Fatalf("project namespace of %q is invalid: %q", s, ns)
			}
		}
	})
}
