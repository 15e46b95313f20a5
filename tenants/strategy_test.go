package tenants

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
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

// collidingSums makes every project path hash share its first 32 bits, as
// two folders' hashes do once in a while, for the test's length.
func collidingSums(t *testing.T) {
	t.Helper()
	old := pathSum
	pathSum = func(b []byte) [32]byte {
		s := sha256.Sum256(b)
		copy(s[:4], []byte{0xea, 0x2e, 0x93, 0x25})
		return s
	}
	t.Cleanup(func() { pathSum = old })
}

func TestProjectNamespaceCollisionIsRefused(t *testing.T) {
	collidingSums(t)
	base := t.TempDir()
	mine, err := BindProject(filepath.Join(base, "one", "App"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := BindProject(filepath.Join(base, "two", "app!"))
	if err != nil {
		t.Fatal(err)
	}
	if mine.Namespace != "app-ea2e9325" || theirs.Namespace != mine.Namespace || mine.PathHash == theirs.PathHash ||
		len(mine.PathHash) != 64 {
		t.Fatalf("bindings %+v and %+v", mine, theirs)
	}
	dir := t.TempDir()
	ctx := context.Background()
	useStore := func(b ProjectBinding) error {
		p, err := NewPool(Options{Dir: dir, Project: &b, Store: storage.Options{NoSync: true}})
		if err != nil {
			return err
		}
		defer func() {
			if err := p.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		}()
		s, release, err := p.Lease(ctx, b.Namespace)
		if err != nil {
			return err
		}
		defer release()
		_, _, err = s.Put(ctx, memgate.Write{Text: "a memory of " + b.PathHash[:8]})
		return err
	}
	// The first folder's store records its path hash.
	if err := useStore(mine); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, "stores", string(mine.Namespace), ProjectFile))
	if err != nil || string(rec) != mine.PathHash+"\n" {
		t.Fatalf("record %q %v", rec, err)
	}
	// The other folder is refused at the pool's start, and says why.
	err = useStore(theirs)
	if memgate.ErrorCode(err) != memgate.CodeInvalidArgument || !strings.Contains(err.Error(), "another folder") {
		t.Fatalf("the colliding folder: %v, want invalid_argument", err)
	}
	if e := err.(*memgate.Error); strings.Contains(e.Message, base) || strings.Contains(e.Message, string(mine.Namespace)) {
		t.Fatalf("the message holds a path or the namespace: %q", e.Message)
	}
	// The first folder goes on as before.
	if err := useStore(mine); err != nil {
		t.Fatalf("the first folder again: %v", err)
	}
}

func TestProjectRecordIsCheckedWhenTheStoreOpens(t *testing.T) {
	collidingSums(t)
	base := t.TempDir()
	mine, _ := BindProject(filepath.Join(base, "a", "Proj"))
	theirs, _ := BindProject(filepath.Join(base, "b", "proj"))
	dir := t.TempDir()
	ctx := context.Background()
	// A pool that started before the other folder's store had its record
	// refuses the store once the record is there.
	p := newPool(t, Options{Dir: dir, Project: &theirs})
	other := newPool(t, Options{Dir: dir, Project: &mine})
	_, release, err := other.Lease(ctx, mine.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	release()
	closeSoon(t, other)
	if _, _, err := p.Lease(ctx, theirs.Namespace); memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
		t.Fatalf("lease of a store another folder recorded: %v", err)
	}
	// A store from before records (or under another strategy, bound to no
	// folder) is adopted by the first folder that opens it.
	legacy := newPool(t, Options{Dir: dir})
	_, release, err = legacy.Lease(ctx, "plain-ea2e9325")
	if err != nil {
		t.Fatal(err)
	}
	release()
	closeSoon(t, legacy)
	adopt := ProjectBinding{Namespace: "plain-ea2e9325", PathHash: mine.PathHash}
	q := newPool(t, Options{Dir: dir, Project: &adopt})
	_, release, err = q.Lease(ctx, adopt.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if rec, err := os.ReadFile(filepath.Join(dir, "stores", "plain-ea2e9325", ProjectFile)); err != nil || string(rec) != mine.PathHash+"\n" {
		t.Fatalf("adopted record %q %v", rec, err)
	}
}
