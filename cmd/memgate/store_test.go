package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/storage"
)

func TestFlagsBeforeAndAfterPositionals(t *testing.T) {
	dir := t.TempDir()
	mg(t, env{}, "", "remember", "--data-dir", dir, "--id", "one", "first text").ok(t)
	mg(t, env{}, "", "remember", "second text", "--id", "two", "--data-dir", dir).ok(t)
	mg(t, env{}, "", "remember", "--id", "three", "--data-dir", dir, "third text").ok(t)
	for _, a := range [][]string{
		{"get", "one", "--data-dir", dir},
		{"get", "--data-dir", dir, "two"},
		{"get", "--data-dir=" + dir, "three"},
	} {
		if m := mg(t, env{}, "", a...).ok(t); dig(m, "memory", "id") != a[idIndex(a)] {
			t.Fatalf("%v: %v", a, m)
		}
	}
	// invoke takes its tool the same way.
	for _, a := range [][]string{
		{"invoke", "get", "--data-dir", dir},
		{"invoke", "--data-dir", dir, "get"},
	} {
		if m := mg(t, env{}, `{"id":"one"}`, a...).ok(t); dig(m, "memory", "text") != "first text" {
			t.Fatalf("%v: %v", a, m)
		}
	}
}

// idIndex returns the index of the id among get's arguments.
func idIndex(a []string) int {
	for i, s := range a {
		if s == "one" || s == "two" || s == "three" {
			return i
		}
	}
	return 0
}

func TestRemember(t *testing.T) {
	dd := store(t)
	m := mg(t, env{}, "", args(dd, "remember", "Deploys happen on Tuesdays.", "--id", "deploy", "--title", "Deploy day",
		"--tag", "process", "--tag", "ops,team", "--meta", "source=chat", "--meta", "url=a=b")...).ok(t)
	mem := dig(m, "memory").(map[string]any)
	if m["created"] != true || mem["id"] != "deploy" || mem["text"] != "Deploys happen on Tuesdays." ||
		mem["title"] != "Deploy day" || strings.Join(toStrings(mem["tags"]), ",") != "process,ops,team" ||
		dig(mem, "metadata", "source") != "chat" || dig(mem, "metadata", "url") != "a=b" {
		t.Fatalf("remember: %v", m)
	}
	v := mem["version"].(float64)

	// From stdin, byte for byte.
	text := "  from stdin\nwith two lines\n"
	m = mg(t, env{}, text, args(dd, "remember", "--id", "stdin")...).ok(t)
	if dig(m, "memory", "text") != text {
		t.Fatalf("stdin text: %q", dig(m, "memory", "text"))
	}

	// Compare-and-set: the right version replaces, a stale one conflicts.
	mg(t, env{}, "", args(dd, "remember", "Deploys moved to Wednesdays.", "--id", "deploy",
		"--if-version", ftoa(v))...).ok(t)
	mg(t, env{}, "", args(dd, "remember", "stale", "--id", "deploy", "--if-version", ftoa(v))...).
		fails(t, 1, "version_conflict")
	mg(t, env{}, "", args(dd, "remember", "exists", "--id", "deploy", "--if-version", "0")...).
		fails(t, 1, "version_conflict")

	// Error paths, with their codes.
	mg(t, env{}, "", args(dd, "remember", "   ")...).fails(t, 1, "invalid_argument")
	mg(t, env{}, "", args(dd, "remember", "   ", "--allow-empty")...).ok(t)
	mg(t, env{}, "", args(dd, "remember", "key AKIAIOSFODNN7EXAMPLE here")...).fails(t, 1, "secret_detected")
	mg(t, env{}, "", args(dd, "remember", "x", "--meta", "novalue")...).fails(t, 2, "--meta")
	mg(t, env{}, "", args(dd, "remember", "x", "--tag", "bad tag")...).fails(t, 1, "invalid_argument")
}

func TestGetSearchListForgetStats(t *testing.T) {
	dd := store(t)
	mg(t, env{}, "", args(dd, "remember", "Ana prefers Helix as her editor.", "--id", "editor", "--tag", "ana",
		"--meta", "source=chat")...).ok(t)
	mg(t, env{}, "", args(dd, "remember", "The build runs on two cores.", "--id", "build", "--tag", "ci")...).ok(t)

	if m := mg(t, env{}, "", args(dd, "get", "editor")...).ok(t); dig(m, "memory", "text") != "Ana prefers Helix as her editor." {
		t.Fatalf("get: %v", m)
	}
	mg(t, env{}, "", args(dd, "get", "missing")...).fails(t, 1, "not_found: no memory has this id")

	hits := mg(t, env{}, "", args(dd, "search", "editors")...).ok(t)["hits"].([]any)
	if len(hits) != 1 || dig(hits[0], "id") != "editor" || dig(hits[0], "score") != 1.0 {
		t.Fatalf("search: %v", hits)
	}
	hits = mg(t, env{}, "", args(dd, "search", "--tag", "ci")...).ok(t)["hits"].([]any)
	if len(hits) != 1 || dig(hits[0], "id") != "build" {
		t.Fatalf("search by tag: %v", hits)
	}
	hits = mg(t, env{}, "", args(dd, "search", "--filter", "source=chat", "--tags-mode", "any", "--limit", "5",
		"--budget", "100")...).ok(t)["hits"].([]any)
	if len(hits) != 1 || dig(hits[0], "id") != "editor" {
		t.Fatalf("search by filter: %v", hits)
	}
	mg(t, env{}, "", args(dd, "search")...).fails(t, 1, "invalid_argument")
	mg(t, env{}, "", args(dd, "search", "x", "--tags-mode", "some")...).fails(t, 1, "invalid_argument")

	page := mg(t, env{}, "", args(dd, "list", "--limit", "1", "--order", "created_asc")...).ok(t)
	if ms := page["memories"].([]any); len(ms) != 1 || dig(ms[0], "id") != "editor" || page["next_cursor"] == nil {
		t.Fatalf("list page 1: %v", page)
	}
	page = mg(t, env{}, "", args(dd, "list", "--limit", "1", "--order", "created_asc",
		"--cursor", page["next_cursor"].(string))...).ok(t)
	if ms := page["memories"].([]any); len(ms) != 1 || dig(ms[0], "id") != "build" {
		t.Fatalf("list page 2: %v", page)
	}
	if ms := mg(t, env{}, "", args(dd, "list", "--tag", "ana")...).ok(t)["memories"].([]any); len(ms) != 1 {
		t.Fatalf("list by tag: %v", ms)
	}
	mg(t, env{}, "", args(dd, "list", "--order", "sideways")...).fails(t, 1, "invalid_argument")

	st := mg(t, env{}, "", args(dd, "stats")...).ok(t)
	if st["count"] != 2.0 || st["namespace"] != "default" || st["recall"] == nil {
		t.Fatalf("stats: %v", st)
	}

	mg(t, env{}, "", args(dd, "forget", "editor", "--if-version", "99")...).fails(t, 1, "version_conflict")
	if m := mg(t, env{}, "", args(dd, "forget", "editor")...).ok(t); m["forgotten"] != true || m["id"] != "editor" {
		t.Fatalf("forget: %v", m)
	}
	mg(t, env{}, "", args(dd, "forget", "editor")...).fails(t, 1, "not_found")
	mg(t, env{}, "", args(dd, "get", "editor")...).fails(t, 1, "not_found")
	if st := mg(t, env{}, "", args(dd, "stats")...).ok(t); st["count"] != 1.0 {
		t.Fatalf("stats after forget: %v", st)
	}
}

func TestExportImportBackup(t *testing.T) {
	dd := store(t)
	const n = 1203 // more than one page of the export tool
	var lines strings.Builder
	lines.WriteString(`{"memgate_export":1}` + "\n")
	for i := range n {
		lines.WriteString(`{"id":"m` + itoa(i) + `","text":"memory number ` + itoa(i) + `","tags":["bulk"]}` + "\n")
	}
	rep := mg(t, env{}, lines.String(), args(dd, "import", "-")...).ok(t)
	if rep["imported"] != float64(n) || rep["skipped"] != 0.0 || rep["namespace"] != "default" {
		t.Fatalf("import: %v", rep)
	}
	// Again: every id exists, so every line is skipped.
	if rep := mg(t, env{}, lines.String(), args(dd, "import", "-")...).ok(t); rep["skipped"] != float64(n) {
		t.Fatalf("import again: %v", rep)
	}
	mg(t, env{}, lines.String(), args(dd, "import", "-", "--on-conflict", "fail")...).fails(t, 1, "version_conflict: line 2:")
	mg(t, env{}, "", args(dd, "import", "-", "--on-conflict", "maybe")...).fails(t, 2, "--on-conflict")
	mg(t, env{}, "not json\n", args(dd, "import", "-")...).fails(t, 1, "invalid_argument")

	// Export to stdout: every page, one header.
	r := mg(t, env{}, "", args(dd, "export")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("export: %d %q", r.code, r.stderr)
	}
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(out) != n+1 || out[0] != `{"memgate_export":1}` || strings.Count(r.stdout, "memgate_export") != 1 {
		t.Fatalf("export: %d lines, first %q", len(out), out[0])
	}

	// Export to a file, then import it into another data folder.
	file := filepath.Join(t.TempDir(), "all.jsonl")
	if m := mg(t, env{}, "", args(dd, "export", "--out", file)...).ok(t); m["count"] != float64(n) {
		t.Fatalf("export --out: %v", m)
	}
	mg(t, env{}, "", args(dd, "export", "--out", filepath.Join(file, "not-a-folder", "x.jsonl"))...).fails(t, 1, "not a directory")
	other := store(t)
	if rep := mg(t, env{}, "", args(other, "import", file)...).ok(t); rep["imported"] != float64(n) {
		t.Fatalf("import of the export: %v", rep)
	}
	if st := mg(t, env{}, "", args(other, "stats")...).ok(t); st["count"] != float64(n) {
		t.Fatalf("stats after import: %v", st)
	}
	mg(t, env{}, "", args(dd, "import", filepath.Join(t.TempDir(), "absent.jsonl"))...).fails(t, 1, "no such file")

	// Backup: a store file that opens and holds every memory.
	bak := filepath.Join(t.TempDir(), "backup.db")
	if m := mg(t, env{}, "", args(dd, "backup", bak)...).ok(t); m["bytes"].(float64) <= 0 {
		t.Fatalf("backup: %v", m)
	}
	s, err := storage.Open(bak, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.Stats(t.Context()); err != nil || st.Count != n {
		t.Fatalf("backup holds %d memories (%v), want %d", st.Count, err, n)
	}
	mg(t, env{}, "", args(dd, "backup", filepath.Join(t.TempDir(), "no", "such", "dir", "b.db"))...).fails(t, 1, "no such folder; create it")
}

func TestStoreCommandsOnALockedStore(t *testing.T) {
	dir := t.TempDir()
	release := holdStore(t, filepath.Join(dir, "stores", "default", storage.FileName))
	defer release()
	mg(t, env{}, "", "stats", "--data-dir", dir).fails(t, 1, "store_locked")
	mg(t, env{}, "", "backup", filepath.Join(t.TempDir(), "b.db"), "--data-dir", dir).fails(t, 1, "store_locked")
	// Another namespace is another store, and free.
	mg(t, env{}, "", "stats", "--data-dir", dir, "--namespace", "other").ok(t)
}

// holdStore starts this test binary as another process that opens the
// store file at path and holds it until the returned function is called.
func holdStore(t *testing.T, path string) func() {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockEnv+"="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("the holding process said %q", line)
	}
	return func() { stdin.Close(); cmd.Wait() }
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func TestADamagedStoreFileSaysSoInOneLine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stores", "default", "memgate.db")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Repeat("not a store ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mg(t, env{}, "", "stats", "--data-dir", dir)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if r.code != 1 || !strings.HasPrefix(last, "memgate: unavailable: ") || !strings.Contains(last, "damaged") ||
		!strings.Contains(last, "backup") || strings.Contains(r.stderr, dir) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestAnUnusableDataFolderSaysSo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mg(t, env{}, "", "stats", "--data-dir", filepath.Join(file, "data"))
	if r.code != 1 || !strings.Contains(r.stderr, "memgate: unavailable: the data folder cannot be created") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCandidates(t *testing.T) {
	dd := store(t)
	m := mg(t, env{}, "", args(dd, "remember", "proposed by an agent", "--id", "idea", "--tag", "proposal", "--write-mode", "candidate")...).ok(t)
	if m["candidate"] != true || dig(m, "memory", "version") != 0.0 {
		t.Fatalf("remember in candidate mode: %v", m)
	}
	// The server's configuration, in the environment, reaches the commands
	// that take it; the others ignore it.
	mode := env{"MEMGATE_WRITE_MODE": "candidate"}
	mg(t, mode, "", args(dd, "remember", "another one", "--id", "other")...).ok(t)
	// Not a memory yet: get, search and stats do not see it; forget is not offered.
	mg(t, mode, "", args(dd, "get", "idea")...).fails(t, 1, "not_found")
	if hits := mg(t, mode, "", args(dd, "search", "proposed")...).ok(t)["hits"].([]any); len(hits) != 0 {
		t.Fatalf("search sees a candidate: %v", hits)
	}
	if st := mg(t, mode, "", args(dd, "stats")...).ok(t); st["count"] != 0.0 || st["write_mode"] != "candidate" {
		t.Fatalf("stats: %v", st)
	}
	mg(t, mode, "", args(dd, "forget", "idea")...).fails(t, 2, "not a tool")
	mg(t, env{}, "", args(dd, "forget", "idea", "--write-mode", "candidate")...).fails(t, 2, "not a tool")

	page := mg(t, env{}, "", args(dd, "candidates", "list", "--limit", "1")...).ok(t)
	if ms := page["memories"].([]any); len(ms) != 1 || page["next_cursor"] == nil {
		t.Fatalf("candidates list: %v", page)
	}
	if m := mg(t, env{}, "", args(dd, "candidates", "approve", "idea")...).ok(t); dig(m, "memory", "version").(float64) < 1 {
		t.Fatalf("approve: %v", m)
	}
	if m := mg(t, env{}, "", args(dd, "get", "idea")...).ok(t); dig(m, "memory", "text") != "proposed by an agent" {
		t.Fatalf("get after approve: %v", m)
	}
	if m := mg(t, env{}, "", args(dd, "candidates", "reject", "other")...).ok(t); m["rejected"] != true {
		t.Fatalf("reject: %v", m)
	}
	if ms := mg(t, env{}, "", args(dd, "candidates", "list")...).ok(t)["memories"].([]any); len(ms) != 0 {
		t.Fatalf("candidates left: %v", ms)
	}
	mg(t, env{}, "", args(dd, "candidates", "approve", "idea")...).fails(t, 1, "not_found: no candidate has this id")
	mg(t, env{}, "", args(dd, "candidates", "list", "--limit", "0")...).fails(t, 2, "--limit")
}

// A store only the command line touches is swept by its commands: what
// expired leaves the file and the quota, while a trash kept with a
// retention the command does not know stays.
func TestStoreCommandsSweepWhatExpired(t *testing.T) {
	dir := t.TempDir()
	mg(t, env{}, "", "remember", "--data-dir", dir, "a lasting memory").ok(t)
	mg(t, env{}, "", "remember", "--data-dir", dir, "--ttl-seconds", "1", "a fleeting memory of marmalade").ok(t)
	mg(t, env{}, "", "remember", "--data-dir", dir, "--id", "kept", "forgotten but kept").ok(t)
	mg(t, env{}, "", "forget", "--data-dir", dir, "--trash-retention", "1h", "kept").ok(t)
	time.Sleep(1100 * time.Millisecond)
	mg(t, env{}, "", "remember", "--data-dir", dir, "--max-memories", "2", "room for one more").ok(t)
	// Swept: nothing is left to expire (the freed pages of the file may
	// still hold old bytes until bbolt reuses them; the memory is gone).
	st, err := storage.Open(filepath.Join(dir, "stores", "default", "memgate.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if due, ok := st.NextDue(-1); ok {
		t.Fatalf("an expiry is still due at %v", due)
	}
	st.Close()
	list := mg(t, env{}, "", "trash", "list", "--data-dir", dir).ok(t)
	if ms, _ := list["memories"].([]any); len(ms) != 1 {
		t.Fatalf("the trash: %v", list)
	}
}

// /dev/null as standard input (docker exec without -i) is an empty file,
// not a terminal: the import reads it and imports nothing.
func TestImportReadsDevNull(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var out, errOut bytes.Buffer
	err = run(t.Context(), []string{"import", "--data-dir", t.TempDir()}, env{}.get, null, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), `"imported":0`) {
		t.Fatalf("%v %q %q", err, out.String(), errOut.String())
	}
}

// A copy never replaces a store: backup and export --out refuse a
// destination in the data folder's stores, one a process holds as its
// store, and one that is not a regular file (a device, a folder, a link to
// one), and leave it as it was.
func TestBackupAndExportRefuseAStoreAsTheirDestination(t *testing.T) {
	dd := store(t)
	dir := dd[1]
	mg(t, env{}, "", args(dd, "remember", "--id", "kept", "a memory to keep")...).ok(t)
	mg(t, env{}, "", args(dd, "remember", "--namespace", "other", "--id", "theirs", "another's")...).ok(t)
	live := filepath.Join(dir, "stores", "default", storage.FileName)
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{
		live,
		filepath.Join(dir, "stores", "other", storage.FileName),
		filepath.Join(dir, "stores", "default", "copy.db"),
		filepath.Join(dir, "stores", "new.db"),
	} {
		mg(t, env{}, "", args(dd, "backup", dest)...).fails(t, 2, "the data folder's stores")
		mg(t, env{}, "", args(dd, "export", "--out", dest)...).fails(t, 2, "the data folder's stores")
	}
	// Through a link to the stores folder, too.
	link := filepath.Join(t.TempDir(), "stores")
	if err := os.Symlink(filepath.Join(dir, "stores"), link); err != nil {
		t.Fatal(err)
	}
	mg(t, env{}, "", args(dd, "backup", filepath.Join(link, "default", storage.FileName))...).fails(t, 2, "the data folder's stores")

	// A store another process holds, outside this data folder.
	held := filepath.Join(t.TempDir(), "elsewhere", storage.FileName)
	release := holdStore(t, held)
	mg(t, env{}, "", args(dd, "backup", held)...).fails(t, 2, "a running process holds")
	release()

	// Not a regular file.
	mg(t, env{}, "", args(dd, "backup", "/dev/null")...).fails(t, 2, "not a regular file")
	mg(t, env{}, "", args(dd, "export", "--out", "/dev/null")...).fails(t, 2, "not a regular file")
	toDevice := filepath.Join(t.TempDir(), "null")
	if err := os.Symlink("/dev/null", toDevice); err != nil {
		t.Fatal(err)
	}
	mg(t, env{}, "", args(dd, "backup", toDevice)...).fails(t, 2, "not a regular file")
	mg(t, env{}, "", args(dd, "backup", t.TempDir())...).fails(t, 2, "not a regular file")
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v %v", fi, err)
	}

	after, err := os.ReadFile(live)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the live store's file changed (%v)", err)
	}
	if m := mg(t, env{}, "", args(dd, "get", "kept")...).ok(t); m["memory"] == nil {
		t.Fatalf("get after the refusals: %v", m)
	}
	// A regular file elsewhere, and a link to one, are replaced as before.
	out := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	mg(t, env{}, "", args(dd, "backup", out)...).ok(t)
}

// The folder a copy goes to is checked once and written through: a link
// in its path swapped, after the check, to the data folder's stores sends
// neither the copy nor its temporary file there. A link as the file's own
// name is refused, not replaced.
func TestBackupAndExportWriteIntoTheFolderTheyChecked(t *testing.T) {
	dd := store(t)
	dir := dd[1]
	mg(t, env{}, "", args(dd, "remember", "--id", "kept", "a memory to keep")...).ok(t)
	stores := filepath.Join(dir, "stores", "default")
	safe := t.TempDir()
	link := filepath.Join(t.TempDir(), "out")
	for _, cmd := range [][]string{{"backup"}, {"export", "--out"}} {
		os.Remove(link)
		if err := os.Symlink(safe, link); err != nil {
			t.Fatal(err)
		}
		outputChecked = func() {
			os.Remove(link)
			if err := os.Symlink(stores, link); err != nil {
				t.Error(err)
			}
		}
		mg(t, env{}, "", args(dd, append(cmd, filepath.Join(link, storage.FileName))...)...).ok(t)
		outputChecked = nil
		if _, err := os.Stat(filepath.Join(safe, storage.FileName)); err != nil {
			t.Errorf("%s: the copy is not in the folder checked: %v", cmd[0], err)
		}
		os.Remove(filepath.Join(safe, storage.FileName))
	}
	if ms := mg(t, env{}, "", args(dd, "list")...).ok(t)["memories"].([]any); len(ms) != 1 {
		t.Fatalf("the store holds %d memories", len(ms))
	}
	entries, _ := os.ReadDir(stores)
	for _, e := range entries {
		if e.Name() != storage.FileName {
			t.Errorf("the stores folder holds %s", e.Name())
		}
	}

	target := filepath.Join(t.TempDir(), "target.db")
	os.WriteFile(target, []byte("kept"), 0o600)
	named := filepath.Join(t.TempDir(), "latest.db")
	if err := os.Symlink(target, named); err != nil {
		t.Fatal(err)
	}
	mg(t, env{}, "", args(dd, "backup", named)...).fails(t, 2, "is a link")
	mg(t, env{}, "", args(dd, "export", "--out", named)...).fails(t, 2, "is a link")
	if fi, err := os.Lstat(named); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
}
