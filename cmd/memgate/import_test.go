package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importLines is n memory lines of an export, after its header.
func importLines(n int) *strings.Builder {
	var b strings.Builder
	b.WriteString(`{"memgate_export":1}` + "\n")
	for i := range n {
		b.WriteString(`{"id":"m` + itoa(i) + `","text":"memory number ` + itoa(i) + `"}` + "\n")
	}
	return &b
}

func TestImportErrorNamesLineFieldAndCommitted(t *testing.T) {
	dd := store(t)
	// 1000 memories are one committed batch; the bad line comes after it.
	b := importLines(1000)
	b.WriteString(`{"id":"bad","text":"a memory","tags":"not a list"}` + "\n")
	r := mg(t, env{}, b.String(), args(dd, "import", "-")...)
	r.fails(t, 1, "invalid_argument: line 1002:")
	for _, want := range []string{"tags", "1000 memories were imported before it"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr %q, want %q", r.stderr, want)
		}
	}
	if st := mg(t, env{}, "", args(dd, "stats")...).ok(t); st["count"] != 1000.0 {
		t.Fatalf("stats: %v", st)
	}
	// A bad line in the first batch: nothing was committed, and it says so.
	r = mg(t, env{}, `{"id":"x","text":"t","title":5}`+"\n", args(store(t), "import", "-")...)
	r.fails(t, 1, "line 1:")
	if !strings.Contains(r.stderr, "title") || !strings.Contains(r.stderr, "0 memories were imported before it") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestImportReadsStandardInputWithoutAFile(t *testing.T) {
	dd := store(t)
	rep := mg(t, env{}, importLines(3).String(), args(dd, "import")...).ok(t)
	if rep["imported"] != 3.0 || rep["lines"] != 4.0 {
		t.Fatalf("import from stdin: %v", rep)
	}
	// A terminal is not a file of memories: it says how to give one.
	tty, err := os.Open("/dev/tty")
	if err != nil {
		t.Skip("no terminal:", err)
	}
	defer tty.Close()
	if !isTerminal(tty) {
		t.Skip("/dev/tty is not a terminal here")
	}
	r := runWithStdin(t, tty, args(dd, "import")...)
	r.fails(t, 2, "give a FILE, or - to read standard input")
}

func TestImportSkipsAByteOrderMark(t *testing.T) {
	dd := store(t)
	file := filepath.Join(t.TempDir(), "bom.jsonl")
	if err := os.WriteFile(file, []byte("\ufeff"+importLines(2).String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep := mg(t, env{}, "", args(dd, "import", file)...).ok(t); rep["imported"] != 2.0 {
		t.Fatalf("import: %v", rep)
	}
	// A mark anywhere else is the line's own bytes, and not JSON.
	mg(t, env{}, `{"memgate_export":1}`+"\n\ufeff"+`{"id":"a","text":"t"}`+"\n", args(dd, "import", "-")...).
		fails(t, 1, "line 2:")
}

func TestImportRefusesAFolder(t *testing.T) {
	dd := store(t)
	mg(t, env{}, "", args(dd, "import", t.TempDir())...).fails(t, 1, "not a file")
}

// runWithStdin runs the command with stdin as its standard input.
func runWithStdin(t *testing.T, stdin *os.File, args ...string) result {
	t.Helper()
	var stdout, stderr strings.Builder
	err := run(t.Context(), args, env{}.get, stdin, &stdout, &stderr)
	return result{code: exitCode(err), stdout: stdout.String(), stderr: stderr.String()}
}
