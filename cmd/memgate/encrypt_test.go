package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/storage"
)

// Key derivation at its real cost would make each command take a tenth of
// a second; the tests' stores record a cheap one.
func init() { kdfCost = storage.KDFParams{Time: 1, Memory: 64, Threads: 1} }

const (
	testPassphrase = "Pa55-phrase-never-shown"
	newPassphrase  = "An0ther-phrase-never-shown"
	plainWord      = "Brontosaurize"
)

// noWordOnDisk fails if the word (or its lowercase form) is in any byte of
// any file under dir.
func noWordOnDisk(t *testing.T, dir, word string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(word))) {
			t.Errorf("%s holds the word in plaintext", filepath.Base(path))
		}
		return nil
	})
}

func noPassphrase(t *testing.T, r result) {
	t.Helper()
	for _, p := range []string{testPassphrase, newPassphrase} {
		if strings.Contains(r.stdout+r.stderr, p) {
			t.Fatalf("the passphrase is in the output: stdout %q stderr %q", r.stdout, r.stderr)
		}
	}
}

func TestEncryptedStoreCommands(t *testing.T) {
	dir := t.TempDir()
	e := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase, "MEMGATE_LOG": "debug"}
	r := mg(t, e, "", "remember", "--encrypt", "--id", plainWord, "--title", plainWord, "--tag", strings.ToLower(plainWord),
		"--meta", plainWord+"="+plainWord, "The "+plainWord+"d garden of "+plainWord+"s")
	noPassphrase(t, r)
	if r.code != 0 {
		t.Fatalf("remember: %d %q", r.code, r.stderr)
	}
	r = mg(t, e, "", "search", "--encrypt", "--tag", strings.ToLower(plainWord), "--filter", plainWord+"="+plainWord, strings.ToLower(plainWord))
	noPassphrase(t, r)
	if !strings.Contains(r.stdout, `"id":"`+plainWord+`"`) {
		t.Fatalf("search: %q %q", r.stdout, r.stderr)
	}
	// export yields plaintext to a caller with the passphrase; backup
	// stays encrypted.
	r = mg(t, e, "", "export", "--encrypt")
	if r.code != 0 || !strings.Contains(r.stdout, plainWord+"d garden") {
		t.Fatalf("export: %d %q", r.code, r.stderr)
	}
	backup := filepath.Join(dir, "copy.db")
	if r = mg(t, e, "", "backup", "--encrypt", backup); r.code != 0 {
		t.Fatalf("backup: %q", r.stderr)
	}
	noWordOnDisk(t, dir, plainWord)
	s, err := storage.Open(backup, storage.Options{})
	if err == nil {
		s.Close()
		t.Fatal("the backup opens without the passphrase")
	}
	enc, _ := storage.NewEncryption(testPassphrase)
	if s, err = storage.Open(backup, storage.Options{Encryption: enc, Binding: "default"}); err != nil {
		t.Fatalf("the backup with the passphrase: %v", err)
	}
	s.Close()
}

func TestEncryptRefusals(t *testing.T) {
	dir := t.TempDir()
	base := env{"MEMGATE_DATA_DIR": dir}
	with := func(kv ...string) env {
		e := env{}
		for k, v := range base {
			e[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			e[kv[i]] = kv[i+1]
		}
		return e
	}
	mg(t, with("MEMGATE_PASSPHRASE", testPassphrase), "", "remember", "--encrypt", "--id", "a", "alpha").ok(t)
	plainDir := []string{"--data-dir", t.TempDir()}
	mg(t, env{}, "", args(plainDir, "remember", "--id", "a", "alpha")...).ok(t)
	cases := []struct {
		name string
		e    env
		args []string
		code int
		want string
	}{
		{"a missing variable refuses to start", base, []string{"serve", "--encrypt"}, 2, "--encrypt: the passphrase variable MEMGATE_PASSPHRASE is unset or empty"},
		{"an empty variable refuses to start", with("MEMGATE_PASSPHRASE", ""), []string{"get", "a", "--encrypt"}, 2, "unset or empty"},
		{"a short passphrase is refused", with("MEMGATE_PASSPHRASE", "short"), []string{"get", "a", "--encrypt"}, 2, "shorter than 8 characters"},
		{"the variable can be another", with("MY_PASS", "short"), []string{"get", "a", "--encrypt", "--passphrase-env", "MY_PASS"}, 2, "the passphrase in MY_PASS"},
		{"a variable name must be one", base, []string{"get", "a", "--encrypt", "--passphrase-env", "not a name"}, 2, "--passphrase-env: must be the name"},
		{"a wrong passphrase fails", with("MEMGATE_PASSPHRASE", "a wrong passphrase"), []string{"get", "a", "--encrypt"}, 1, "unavailable: the passphrase does not open this store"},
		{"a wrong passphrase fails serve at start", with("MEMGATE_PASSPHRASE", "a wrong passphrase"), []string{"serve", "--encrypt"}, 1, "the passphrase does not open this store"},
		{"an encrypted store needs --encrypt", with("MEMGATE_PASSPHRASE", testPassphrase), []string{"get", "a"}, 1, "the store is encrypted"},
		{"a plain store refuses --encrypt", with("MEMGATE_PASSPHRASE", testPassphrase), args(plainDir, "get", "a", "--encrypt"), 1, "the store is not encrypted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mg(t, c.e, "", c.args...)
			noPassphrase(t, r)
			if strings.Contains(r.stderr, "short\n") || strings.Contains(r.stderr, "a wrong passphrase\n") {
				t.Fatalf("the value is in the error: %q", r.stderr)
			}
			r.fails(t, c.code, c.want)
		})
	}
}

func TestRekeyCommand(t *testing.T) {
	dir := t.TempDir()
	old := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase}
	for _, ns := range []string{"alpha", "beta"} {
		mg(t, old, "", "remember", "--encrypt", "--namespace", ns, "--id", "k", plainWord+" in "+ns).ok(t)
	}
	both := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase, "MEMGATE_NEW_PASSPHRASE": newPassphrase}
	r := mg(t, env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase}, "", "rekey")
	noPassphrase(t, r)
	r.fails(t, 2, "--new-passphrase-env: the passphrase variable MEMGATE_NEW_PASSPHRASE is unset or empty")

	// As if an earlier run had stopped after the first store.
	enc, _ := storage.NewEncryption(testPassphrase)
	to, _ := storage.NewEncryption(newPassphrase)
	to.KDF = kdfCost
	if err := storage.Rekey(t.Context(), filepath.Join(dir, "stores", "alpha", storage.FileName), storage.Options{Encryption: enc, Binding: "alpha"}, to); err != nil {
		t.Fatal(err)
	}
	r = mg(t, both, "", "rekey")
	noPassphrase(t, r)
	if m := r.ok(t); m["rekeyed"] != 1.0 || m["unchanged"] != 1.0 {
		t.Fatalf("rekey: %v", m)
	}
	newEnv := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": newPassphrase}
	for _, ns := range []string{"alpha", "beta"} {
		m := mg(t, newEnv, "", "get", "k", "--encrypt", "--namespace", ns).ok(t)
		if dig(m, "memory", "text") != plainWord+" in "+ns {
			t.Fatalf("%s after rekey: %v", ns, m)
		}
		mg(t, old, "", "get", "k", "--encrypt", "--namespace", ns).fails(t, 1, "the passphrase does not open this store")
	}
	noWordOnDisk(t, dir, plainWord)
	// A store neither passphrase opens stops the rekey.
	r = mg(t, env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": "yet another passphrase", "MEMGATE_NEW_PASSPHRASE": newPassphrase + "2"}, "", "rekey")
	r.fails(t, 1, "the passphrase does not open this store")
}

func TestRekeyFromPlain(t *testing.T) {
	dir := t.TempDir()
	mg(t, env{"MEMGATE_DATA_DIR": dir}, "", "remember", "--id", "k", plainWord+" kept plain").ok(t)
	e := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_NEW_PASSPHRASE": newPassphrase}
	for _, want := range []float64{1, 0} { // the second run finds it done
		r := mg(t, e, "", "rekey", "--from-plain")
		noPassphrase(t, r)
		if m := r.ok(t); m["rekeyed"] != want || m["unchanged"] != 1-want {
			t.Fatalf("rekey --from-plain: %v", m)
		}
	}
	m := mg(t, env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": newPassphrase}, "", "get", "k", "--encrypt").ok(t)
	if dig(m, "memory", "text") != plainWord+" kept plain" {
		t.Fatalf("after: %v", m)
	}
	noWordOnDisk(t, dir, plainWord)
}

// copyFile copies the file at src to dst, creating dst's folder.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A store file copied into another tenant's folder does not serve there;
// rekey --from-namespace moves it on purpose.
func TestEncryptedStoreMovesOnlyByRekey(t *testing.T) {
	dir := t.TempDir()
	e := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase}
	mg(t, e, "", "remember", "--encrypt", "--namespace", "zoe", "--id", "k", "zoe's "+plainWord).ok(t)
	mg(t, e, "", "remember", "--encrypt", "--namespace", "bob", "--id", "b", "bob's own").ok(t)
	if fi, err := os.Stat(filepath.Join(dir, saltFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("salt file: %v, %v", fi, err)
	}
	// bob's store replaced by a copy of zoe's.
	copyFile(t, filepath.Join(dir, "stores", "zoe", storage.FileName), filepath.Join(dir, "stores", "bob", storage.FileName))
	r := mg(t, e, "", "get", "k", "--encrypt", "--namespace", "bob")
	r.fails(t, 1, "the store belongs to another namespace")
	if strings.Contains(r.stderr, "zoe") {
		t.Fatalf("the error names the namespace: %q", r.stderr)
	}
	// A whole-folder rekey refuses it before changing any store, and says so.
	both := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase, "MEMGATE_NEW_PASSPHRASE": newPassphrase}
	mg(t, both, "", "rekey").fails(t, 1, "the store belongs to another namespace")

	mg(t, e, "", "rekey", "--namespace", "bob", "--from-namespace", "nobody").fails(t, 1, "the store belongs to another namespace")
	for _, want := range []map[string]any{{"rekeyed": 1.0, "unchanged": 0.0}, {"rekeyed": 0.0, "unchanged": 1.0}} {
		r := mg(t, e, "", "rekey", "--namespace", "bob", "--from-namespace", "zoe")
		noPassphrase(t, r)
		if m := r.ok(t); m["rekeyed"] != want["rekeyed"] || m["unchanged"] != want["unchanged"] {
			t.Fatalf("move: %v, want %v", m, want)
		}
	}
	for _, ns := range []string{"zoe", "bob"} {
		m := mg(t, e, "", "get", "k", "--encrypt", "--namespace", ns).ok(t)
		if dig(m, "memory", "text") != "zoe's "+plainWord {
			t.Fatalf("%s: %v", ns, m)
		}
	}
	mg(t, e, "", "rekey", "--namespace", "carol", "--from-namespace", "zoe").fails(t, 1, "no store")
	noWordOnDisk(t, dir, plainWord)
}
