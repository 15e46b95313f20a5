package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// mixedFolder makes a data folder with two stores encrypted under
// testPassphrase (alpha, charlie) and a plain one between them (bravo).
func mixedFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	old := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase}
	for _, ns := range []string{"alpha", "charlie"} {
		mg(t, old, "", "remember", "--encrypt", "--namespace", ns, "--id", "k", plainWord+" in "+ns).ok(t)
	}
	mg(t, env{"MEMGATE_DATA_DIR": dir}, "", "remember", "--namespace", "bravo", "--id", "k", plainWord+" in bravo").ok(t)
	return dir
}

// storeBytes reads every store file of the folder.
func storeBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := storeFiles(dir)
	if err != nil || len(files) != 3 {
		t.Fatalf("store files: %v, %v", files, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		out[f.ns] = b
	}
	return out
}

func sameBytes(t *testing.T, dir string, before map[string][]byte) {
	t.Helper()
	for ns, b := range storeBytes(t, dir) {
		if !bytes.Equal(b, before[ns]) {
			t.Fatalf("store %s changed", ns)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "stores", "*", "*.rekey")); len(m) != 0 {
		t.Fatalf("left beside: %v", m)
	}
}

// counts checks the count line rekey printed.
func counts(t *testing.T, r result, rekeyed, unchanged float64) {
	t.Helper()
	m := decode(t, r.stdout)
	if m["rekeyed"] != rekeyed || m["unchanged"] != unchanged || len(m) != 2 {
		t.Fatalf("counts %v, want rekeyed %v unchanged %v", m, rekeyed, unchanged)
	}
}

// allUnder checks every store of the mixed folder serves under the new
// passphrase, and none under the old or plain.
func allUnder(t *testing.T, dir string) {
	t.Helper()
	newEnv := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": newPassphrase}
	for _, ns := range []string{"alpha", "bravo", "charlie"} {
		m := mg(t, newEnv, "", "get", "k", "--encrypt", "--namespace", ns).ok(t)
		if dig(m, "memory", "text") != plainWord+" in "+ns {
			t.Fatalf("%s after rekey: %v", ns, m)
		}
		mg(t, env{"MEMGATE_DATA_DIR": dir}, "", "get", "k", "--namespace", ns).fails(t, 1, "the store is encrypted")
	}
	noWordOnDisk(t, dir, plainWord)
}

// A plain store among encrypted ones: rekey refuses before changing any
// store, says what to run, and rekey --from-plain with both passphrases
// finishes.
func TestRekeyMixedFolder(t *testing.T) {
	dir := mixedFolder(t)
	before := storeBytes(t, dir)
	both := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase, "MEMGATE_NEW_PASSPHRASE": newPassphrase}

	r := mg(t, both, "", "rekey")
	noPassphrase(t, r)
	r.fails(t, 1, "namespace bravo: the store is not encrypted; encrypt it with memgate rekey --from-plain")
	counts(t, r, 0, 0)
	sameBytes(t, dir, before)

	// Without the current passphrase, --from-plain cannot re-key alpha.
	r = mg(t, env{"MEMGATE_DATA_DIR": dir, "MEMGATE_NEW_PASSPHRASE": newPassphrase}, "", "rekey", "--from-plain")
	noPassphrase(t, r)
	r.fails(t, 1, "namespace alpha: the store is encrypted; set its passphrase in --passphrase-env's variable")
	counts(t, r, 0, 0)
	sameBytes(t, dir, before)

	// A wrong current passphrase is refused the same way, naming the store.
	wrong := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": "yet another passphrase", "MEMGATE_NEW_PASSPHRASE": newPassphrase}
	r = mg(t, wrong, "", "rekey", "--from-plain")
	r.fails(t, 1, "namespace alpha: the passphrase does not open this store")
	counts(t, r, 0, 0)
	sameBytes(t, dir, before)

	for _, want := range [][2]float64{{3, 0}, {0, 3}} { // the second run finds it done
		r = mg(t, both, "", "rekey", "--from-plain")
		noPassphrase(t, r)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		counts(t, r, want[0], want[1])
	}
	allUnder(t, dir)
}

// A run that stops after its first store leaves a folder the same command
// finishes.
func TestRekeyResumesAfterCrash(t *testing.T) {
	dir := mixedFolder(t)
	both := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_PASSPHRASE": testPassphrase, "MEMGATE_NEW_PASSPHRASE": newPassphrase}
	crash := errors.New("crash")
	done := 0
	rekeyedStore = func() error {
		if done++; done == 1 {
			return crash
		}
		return nil
	}
	r := mg(t, both, "", "rekey", "--from-plain")
	rekeyedStore = nil
	if !errors.Is(r.err, crash) {
		t.Fatalf("err %v, want the crash", r.err)
	}
	counts(t, r, 1, 0)
	// The half-done folder is refused by a plain rekey as before, unchanged.
	before := storeBytes(t, dir)
	r = mg(t, both, "", "rekey")
	r.fails(t, 1, "namespace bravo: the store is not encrypted")
	counts(t, r, 0, 0)
	sameBytes(t, dir, before)

	r = mg(t, both, "", "rekey", "--from-plain")
	noPassphrase(t, r)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	counts(t, r, 2, 1)
	allUnder(t, dir)
}

// rekey takes no --store: under MEMGATE_STORE=postgres, as a deployment
// sets it, it refuses rather than report a folder with nothing to re-key.
func TestRekeyRefusesTheDatabaseOfTheEnvironment(t *testing.T) {
	e := env{"MEMGATE_STORE": "postgres", "MEMGATE_PASSPHRASE": "an old passphrase", "MEMGATE_NEW_PASSPHRASE": "a new passphrase"}
	mg(t, e, "", "rekey", "--data-dir", t.TempDir()).fails(t, 2, "rekey works on the bbolt stores of a data folder")
	for _, store := range []string{"Postgres", "pg", "postgres ", "sqlite"} {
		e["MEMGATE_STORE"] = store
		mg(t, e, "", "rekey", "--data-dir", t.TempDir()).fails(t, 2, "MEMGATE_STORE: must be bbolt or postgres")
	}
	e["MEMGATE_STORE"] = "bbolt"
	mg(t, e, "", "rekey", "--data-dir", t.TempDir()).ok(t)
}
