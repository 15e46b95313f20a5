package check

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The image the check builds, and its stand-in builder base.
const (
	imageName    = "localhost/memgate:check"
	imageVersion = "v0.0.0-check"
)

// repoRoot is the repository's root folder, the build's context.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// imageConfig is what the check reads of the built image's configuration.
type imageConfig struct {
	User         string
	Entrypoint   []string
	Cmd          []string
	Env          []string
	Volumes      map[string]struct{}
	ExposedPorts map[string]struct{}
	StopSignal   string
	Labels       map[string]string
	Healthcheck  *struct{ Test []string }
}

// TestImage builds the Dockerfile with buildah from a local stand-in of the
// Go image, then runs the image as a container engine would: its entrypoint
// and command, its environment and user, a volume on /data.
func TestImage(t *testing.T) {
	b := needBuildah(t)
	root := repoRoot(t)
	// Last, after the containers are gone: the images that earlier builds
	// left untagged, so that the storage does not grow with every change.
	t.Cleanup(func() { b.out("rmi", "--prune") })
	standin := "localhost/memgate-go-standin:" + runtime.Version()
	script := exec.Command(filepath.Join(root, "deploy", "check", "standin.sh"), standin)
	script.Env = append(os.Environ(), "BUILDAH=buildah "+strings.Join(b.flags, " "))
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("stand-in Go image: %v: %s", err, out)
	}

	commit := "unknown"
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	start := time.Now()
	build := b.command("bud", "--isolation", "chroot", "--pull=never", "--format", "docker", "--layers",
		"--build-arg", "GO_IMAGE="+standin, "--build-arg", "TARGETARCH="+runtime.GOARCH, "--build-arg", "VERSION="+imageVersion, "--build-arg", "COMMIT="+commit,
		"-t", imageName, "-f", filepath.Join(root, "Dockerfile"), root)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("buildah bud: %v\n%s", err, tail(out, 40))
	}
	t.Logf("figure: image built in %v", time.Since(start).Round(100*time.Millisecond))
	t.Logf("figure: image size %s", b.must(t, "images", "--noheading", "--format", "{{.Size}}", imageName))

	var inspected struct {
		Docker struct {
			Config imageConfig `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(b.must(t, "inspect", "--type", "image", imageName)), &inspected); err != nil {
		t.Fatal(err)
	}
	cfg := inspected.Docker.Config
	t.Run("configuration", func(t *testing.T) { checkConfig(t, cfg, commit) })
	t.Run("version is stamped", func(t *testing.T) {
		c := newContainer(t, b, cfg, t.TempDir())
		out, _ := c.run(t, nil, "/memgate", "version")
		if !strings.Contains(out, "memgate "+imageVersion+", commit "+commit) {
			t.Fatalf("version %q, want %s and commit %s", out, imageVersion, commit)
		}
	})
	t.Run("refuses to start without an auth mode", func(t *testing.T) {
		c := newContainer(t, b, cfg, volume(t))
		_, stderr, code := c.serveOnce(t, nil)
		lines := memgateLines(stderr)
		want := "memgate: --bind: serving other machines needs an auth mode (MEMGATE_TOKEN, --tokens-file, JWT or OAuth)"
		if code != 2 || len(lines) != 1 || lines[0] != want {
			t.Fatalf("exit %d, memgate's lines %q; want status 2 and %q", code, lines, want)
		}
	})
	t.Run("serves, keeps writes across a restart, stops on SIGTERM", func(t *testing.T) {
		checkServe(t, b, cfg)
	})
	t.Run("serves with the environment of the compose file", func(t *testing.T) {
		token := randomToken(t)
		s := newContainer(t, b, cfg, volume(t)).serve(t, composeEnv(t, token))
		// "memgate" is the name the compose file's proxy sends.
		if status, res := mcpCall(t, s.base, token, "memgate", "stats", map[string]any{}); status != http.StatusOK {
			t.Errorf("stats: HTTP %d %v", status, res)
		}
		if code := s.stop(t); code != 0 {
			t.Errorf("after SIGTERM: exit %d; stderr %s", code, s.stderr())
		}
	})
}

func checkConfig(t *testing.T, cfg imageConfig, commit string) {
	if cfg.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532 (numeric: runAsNonRoot needs a uid it can check)", cfg.User)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/memgate"}) || !slices.Equal(cfg.Cmd, []string{"serve"}) {
		t.Errorf("Entrypoint %q Cmd %q, want [/memgate] [serve]", cfg.Entrypoint, cfg.Cmd)
	}
	if _, ok := cfg.Volumes["/data"]; !ok {
		t.Errorf("Volumes %v, want /data", cfg.Volumes)
	}
	if _, ok := cfg.ExposedPorts["8765/tcp"]; !ok {
		t.Errorf("ExposedPorts %v, want 8765/tcp", cfg.ExposedPorts)
	}
	if cfg.Healthcheck == nil || !slices.Equal(cfg.Healthcheck.Test, []string{"CMD", "/memgate", "healthcheck"}) {
		t.Errorf("Healthcheck %+v, want CMD /memgate healthcheck (no shell)", cfg.Healthcheck)
	}
	if cfg.StopSignal != "SIGTERM" {
		t.Errorf("StopSignal %q", cfg.StopSignal)
	}
	for _, kv := range []string{"MEMGATE_TRANSPORT=http", "MEMGATE_BIND=0.0.0.0:8765", "MEMGATE_ALLOW_REMOTE=true", "MEMGATE_DATA_DIR=/data"} {
		if !slices.Contains(cfg.Env, kv) {
			t.Errorf("Env %q lacks %s", cfg.Env, kv)
		}
	}
	for _, kv := range cfg.Env {
		name := strings.SplitN(kv, "=", 2)[0]
		if strings.Contains(name, "TOKEN") || strings.Contains(name, "PASSPHRASE") || strings.Contains(name, "KEY") {
			t.Errorf("the image sets %s: secrets never belong in an image", name)
		}
	}
	if cfg.Labels["org.opencontainers.image.version"] != imageVersion || cfg.Labels["org.opencontainers.image.revision"] != commit {
		t.Errorf("labels %v", cfg.Labels)
	}
}

// checkServe runs the image's serve twice on one volume, with a token.
func checkServe(t *testing.T, b *buildah, cfg imageConfig) {
	volume := volume(t)
	token := randomToken(t)
	env := []string{"MEMGATE_TOKEN=" + token}

	first := newContainer(t, b, cfg, volume)
	s := first.serve(t, env)
	t.Logf("figure: cold start of the container to /ready: %v", s.ready.Round(time.Millisecond))
	if got := get(t, s.base+"/health"); got != "ok\n" {
		t.Errorf("/health answered %q", got)
	}
	if uid := processUID(t, s.pid); uid != 65532 {
		t.Errorf("memgate runs as uid %d, want 65532", uid)
	}
	if status, _ := mcpCall(t, s.base, "", "", "stats", map[string]any{}); status != http.StatusUnauthorized {
		t.Errorf("a call without the token: HTTP %d, want 401", status)
	}
	if status, _ := mcpCall(t, s.base, token, "memgate.memgate.svc", "stats", map[string]any{}); status != http.StatusForbidden {
		t.Errorf("a Service name without --allow-host: HTTP %d, want 403", status)
	}
	status, res := mcpCall(t, s.base, token, "", "remember", map[string]any{"id": "deploy-check", "text": "The container keeps this across restarts."})
	if status != http.StatusOK || dig(res, "result", "isError") == true {
		t.Fatalf("remember: HTTP %d %v", status, res)
	}
	// The image's HEALTHCHECK command, in the container, at its MEMGATE_BIND.
	probe := newContainer(t, b, cfg, t.TempDir())
	if out, code := probe.run(t, []string{"MEMGATE_BIND=0.0.0.0:" + s.port}, cfg.Healthcheck.Test[1:]...); code != 0 {
		t.Errorf("healthcheck in the container: exit %d: %s", code, out)
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("after SIGTERM: exit %d, want 0; stderr %s", code, s.stderr())
	}
	first.onlyImageFiles(t)

	// A new container on the same volume, reached by a Service name it is told.
	second := newContainer(t, b, cfg, volume)
	s = second.serve(t, append(env, "MEMGATE_ALLOW_HOST=memgate.memgate.svc"))
	status, res = mcpCall(t, s.base, token, "memgate.memgate.svc", "get", map[string]any{"id": "deploy-check"})
	if got := dig(res, "result", "structuredContent", "memory", "text"); status != http.StatusOK || got != "The container keeps this across restarts." {
		t.Errorf("get after the restart: HTTP %d %v", status, res)
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("after SIGTERM: exit %d, want 0; stderr %s", code, s.stderr())
	}
	if strings.Contains(s.stderr(), token) {
		t.Error("the log holds the token")
	}
}

// volume returns a folder for /data as a fresh volume is: a fresh volume
// takes the owner of the image's /data (a folder of the host is the
// operator's to hand to 65532).
func volume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chown(dir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	return dir
}

// container is a working container of the image, removed at the end of
// the test, with volume bound on /data.
type container struct {
	b      *buildah
	cfg    imageConfig
	name   string
	volume string
}

func newContainer(t *testing.T, b *buildah, cfg imageConfig, volume string) *container {
	t.Helper()
	name := b.must(t, "from", "--pull=never", imageName)
	t.Cleanup(func() { b.out("rm", name) })
	// buildah run gives a VOLUME of the image a copy of its own, kept with
	// the working container, over any -v on the same path (a RUN step's
	// view of a volume): without the VOLUME, -v binds the folder as an
	// engine binds a volume.
	b.must(t, "config", "--volume", "/data-", name)
	return &container{b: b, cfg: cfg, name: name, volume: volume}
}

// runCommand is buildah run of argv in the container, with env besides the
// image's.
func (c *container) runCommand(env []string, argv ...string) *exec.Cmd {
	args := []string{"run", "--isolation", "chroot", "-v", c.volume + ":/data"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	return c.b.command(append(append(args, c.name, "--"), argv...)...)
}

// run runs argv to its end and returns its output and exit status.
func (c *container) run(t *testing.T, env []string, argv ...string) (string, int) {
	t.Helper()
	out, err := c.runCommand(env, argv...).CombinedOutput()
	return string(out), exitStatus(t, err)
}

// serveOnce runs the image's entrypoint and command, expecting it to end
// by itself (a refusal to start).
func (c *container) serveOnce(t *testing.T, env []string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := c.runCommand(env, append(c.cfg.Entrypoint, c.cfg.Cmd...)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return o.String(), e.String(), exitStatus(t, err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve did not end by itself within 30 s")
	}
	return
}

// served is the image's serve running in a container.
type served struct {
	cmd    *exec.Cmd
	done   chan error
	errBuf *syncBuffer
	ended  bool   // stop saw it exit
	pid    int    // memgate's own process, as the container's PID 1 would be
	port   string // on every interface of the host (chroot isolation shares its network)
	base   string // http://127.0.0.1:port
	ready  time.Duration
}

// serve starts the image's entrypoint and command on a free port and
// waits until /ready answers 200.
func (c *container) serve(t *testing.T, env []string) *served {
	t.Helper()
	port := freePort(t)
	s := &served{done: make(chan error, 1), errBuf: &syncBuffer{}, port: port, base: "http://127.0.0.1:" + port}
	s.cmd = c.runCommand(append([]string{"MEMGATE_BIND=0.0.0.0:" + port}, env...), append(c.cfg.Entrypoint, c.cfg.Cmd...)...)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, s.errBuf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if !s.ended {
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	s.ready = waitReady(t, s.base, s.done, s.errBuf)
	s.pid = findProcess(t, s.cmd.Process.Pid, "/memgate")
	return s
}

// stop sends SIGTERM to memgate, as a container engine does to the
// container's first process, and returns the exit status, which buildah
// run passes on.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.ended = true
		return exitStatus(t, err)
	case <-time.After(20 * time.Second): // the default --shutdown-grace (15s) and some
		t.Fatalf("memgate did not exit within 20 s of SIGTERM; stderr %s", s.errBuf)
	}
	return -1
}

func (s *served) stderr() string { return s.errBuf.String() }

// onlyImageFiles checks that the runs wrote nothing in the container's own
// file system: all their data went to the volume, so a read-only root file
// system serves as well. What buildah itself puts there (mount points,
// /etc/hosts and the like) is allowed.
func (c *container) onlyImageFiles(t *testing.T) {
	t.Helper()
	mnt := c.b.must(t, "mount", c.name)
	defer c.b.out("umount", c.name)
	allowed := map[string]bool{
		"/memgate": true, "/data": true, "/tmp": true, "/etc": true, "/etc/passwd": true, "/etc/group": true,
		"/etc/ssl": true, "/etc/ssl/certs": true, "/etc/ssl/certs/ca-certificates.crt": true,
		// buildah run's own
		"/etc/hosts": true, "/etc/hostname": true, "/etc/resolv.conf": true,
		"/proc": true, "/sys": true, "/dev": true, "/run": true,
	}
	err := filepath.WalkDir(mnt, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(path, mnt), "/")
		if rel == "/" {
			return nil
		}
		if !allowed[rel] {
			t.Errorf("the container's file system holds %s, which the image does not", rel)
		}
		if d.IsDir() && (rel == "/proc" || rel == "/sys" || rel == "/dev" || rel == "/run") {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// findProcess returns the process below parent whose argv[0] is name.
func findProcess(t *testing.T, parent int, name string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		children := map[int][]int{}
		argv0 := map[int]string{}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces and parentheses.
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(fields) < 2 {
				continue
			}
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], pid)
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			argv0[pid] = string(bytes.SplitN(cmdline, []byte{0}, 2)[0])
		}
		queue := []int{parent}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if argv0[p] == name {
				return p
			}
			queue = append(queue, children[p]...)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no process %s below %d", name, parent)
	return 0
}

// processUID returns the real uid of a process.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	t.Fatal("no Uid line")
	return -1
}

// mcpCall calls a tool over the stateless revision, as an editor would:
// one POST, with the token (when not empty) and Host (when not empty).
func mcpCall(t *testing.T, base, token, host, tool string, args map[string]any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "deploy-check", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}},
	})
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

func dig(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// memgateLines are the lines of stderr that memgate wrote (buildah adds
// its own about the exit status).
func memgateLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "memgate") {
			lines = append(lines, l)
		}
	}
	return lines
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a buffer that a process's output goroutine writes while
// the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
