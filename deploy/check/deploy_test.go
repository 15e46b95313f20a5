package check

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// loadCompose loads deploy/compose/compose.yaml as docker compose does
// (the compose-spec schema, interpolation, env_file), with every profile,
// from a copy of the folder whose memgate.env is the example's with token.
func loadCompose(t *testing.T, token string) *types.Project {
	t.Helper()
	src := filepath.Join(repoRoot(t), "deploy", "compose")
	dir := t.TempDir()
	for _, name := range []string{"compose.yaml", "Caddyfile"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	example, err := os.ReadFile(filepath.Join(src, "memgate.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`(?m)^MEMGATE_TOKEN=.*$`).ReplaceAll(example, []byte("MEMGATE_TOKEN="+token))
	if err := os.WriteFile(filepath.Join(dir, "memgate.env"), env, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithProfiles([]string{"*"}),
		cli.WithEnv([]string{"MEMGATE_HOST=memory.example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker compose would refuse compose.yaml: %v", err)
	}
	return p
}

// TestCompose: the compose file is valid compose, runs the image as the
// chart does (read-only, uid 65532, no capabilities, its data on a named
// volume), and keeps its token in the env file.
func TestCompose(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plain map[string]any
	if err := yaml.Unmarshal(raw, &plain); err != nil {
		t.Fatal(err)
	}
	memgate, _ := dig(plain, "services", "memgate").(map[string]any)
	environment, _ := memgate["environment"].(map[string]any)
	for _, v := range secretVars {
		if _, ok := environment[v]; ok {
			t.Errorf("compose.yaml sets %s: secrets go in memgate.env", v)
		}
	}
	if ctx := dig(memgate, "build", "context"); ctx != "../.." {
		t.Errorf("build context %v, want ../.. (the repository's root, with its Dockerfile)", ctx)
	}
	if out, err := exec.Command("git", "-C", root, "check-ignore", "-q", "deploy/compose/memgate.env").CombinedOutput(); err != nil {
		t.Errorf("deploy/compose/memgate.env, which holds the token, is not ignored by git: %v %s", err, out)
	}

	p := loadCompose(t, "0123456789abcdef0123456789abcdef")
	m, ok := p.Services["memgate"]
	if !ok {
		t.Fatalf("no service memgate: %v", p.ServiceNames())
	}
	if !m.ReadOnly || m.User != "65532:65532" || !slices.Contains(m.CapDrop, "ALL") ||
		!slices.Contains(m.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("memgate: read_only %v, user %q, cap_drop %v, security_opt %v", m.ReadOnly, m.User, m.CapDrop, m.SecurityOpt)
	}
	if m.StopGracePeriod == nil || time.Duration(*m.StopGracePeriod) <= 15*time.Second {
		t.Errorf("stop_grace_period %v does not cover the 15 s of --shutdown-grace", m.StopGracePeriod)
	}
	if !slices.ContainsFunc(m.Volumes, func(v types.ServiceVolumeConfig) bool {
		_, named := p.Volumes[v.Source]
		return v.Type == types.VolumeTypeVolume && v.Target == "/data" && named
	}) {
		t.Errorf("volumes %+v: /data is not a named volume", m.Volumes)
	}
	for _, port := range m.Ports {
		if port.Target != 8765 || port.HostIP != "127.0.0.1" {
			t.Errorf("port %+v: the image listens on 8765, and only this host may reach it without TLS", port)
		}
	}
	if m.HealthCheck == nil || !slices.Equal(m.HealthCheck.Test, []string{"CMD", "/memgate", "healthcheck"}) {
		t.Errorf("healthcheck %+v", m.HealthCheck)
	}
	if tok := m.Environment["MEMGATE_TOKEN"]; tok == nil || *tok != "0123456789abcdef0123456789abcdef" {
		t.Error("MEMGATE_TOKEN does not come from memgate.env")
	}
	if hosts := m.Environment["MEMGATE_ALLOW_HOST"]; hosts == nil || !slices.Contains(strings.Split(*hosts, ","), "memory.example.com") {
		t.Errorf("MEMGATE_ALLOW_HOST %v lacks MEMGATE_HOST", hosts)
	}
	proxy, ok := p.Services["proxy"]
	if !ok || !slices.Contains(proxy.Profiles, "tls") {
		t.Fatalf("no proxy service in profile tls")
	}
	caddy, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "Caddyfile"))
	if err != nil || !strings.Contains(string(caddy), "reverse_proxy memgate:8765") {
		t.Errorf("the Caddyfile does not pass requests to memgate:8765 (%v)", err)
	}
}

// composeEnv is the environment the compose file gives memgate, with
// variables names in order.
func composeEnv(t *testing.T, token string) []string {
	t.Helper()
	var env []string
	for k, v := range loadCompose(t, token).Services["memgate"].Environment {
		if v != nil {
			env = append(env, k+"="+*v)
		}
	}
	slices.Sort(env)
	return env
}

// unit is a systemd unit file: its settings by section, in order.
type unit map[string][][2]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			u[section] = append(u[section], [2]string{k, v})
		}
	}
	return u
}

func (u unit) get(section, key string) []string {
	var vs []string
	for _, kv := range u[section] {
		if kv[0] == key {
			vs = append(vs, kv[1])
		}
	}
	return vs
}

// buildMemgate builds cmd/memgate of the repository into a temporary
// folder.
func buildMemgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/memgate")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSystemdUnit: systemd takes the unit (systemd-analyze verify), its
// sandbox is tight (systemd-analyze security), and memgate serves with
// the unit's environment and the example's env file, and stops on SIGTERM
// within the unit's TimeoutStopSec.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		missing(t, "systemd-analyze is not installed: make deploy-check installs it (apt-get install systemd)")
	}
	dir := filepath.Join(repoRoot(t), "deploy", "systemd")
	u := readUnit(t, filepath.Join(dir, "memgate.service"))
	exec0 := u.get("Service", "ExecStart")
	if len(exec0) != 1 || !strings.HasPrefix(exec0[0], "/usr/local/bin/memgate serve") {
		t.Fatalf("ExecStart %q", exec0)
	}
	bin := buildMemgate(t)

	// systemd-analyze checks that ExecStart's program exists: point it at
	// the one just built.
	data, err := os.ReadFile(filepath.Join(dir, "memgate.service"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "memgate.service")
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/memgate", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", tmp).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", tmp).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for memgate.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("exposure level %.1f; the unit's sandbox was at most 2.0", level)
	}
	t.Logf("figure: systemd-analyze security exposure %s", m[1])
	if got := u.get("Service", "EnvironmentFile"); !slices.Equal(got, []string{"/etc/memgate/memgate.env"}) {
		t.Errorf("EnvironmentFile %q", got)
	}

	// Run memgate as the unit would: its Environment= lines, then the
	// example env file (a token of the test's), on a free port and a
	// temporary state folder.
	var env []string
	for _, e := range u.get("Service", "Environment") {
		env = append(env, strings.Fields(e)...)
	}
	for _, v := range secretVars {
		for _, e := range env {
			if strings.HasPrefix(e, v+"=") {
				t.Errorf("the unit sets %s; secrets go in the env file", v)
			}
		}
	}
	token := randomToken(t)
	example, err := os.ReadFile(filepath.Join(dir, "memgate.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(example), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if strings.HasPrefix(line, "MEMGATE_TOKEN=") {
				line = "MEMGATE_TOKEN=" + token
			}
			env = append(env, line)
		}
	}
	port := freePort(t)
	env = append(env, "MEMGATE_BIND=0.0.0.0:"+port, "MEMGATE_DATA_DIR="+t.TempDir())
	cmd := exec.Command(bin, strings.Fields(exec0[0])[1:]...)
	cmd.Env = env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
	}()
	base := "http://127.0.0.1:" + port
	t.Logf("figure: memgate's own start to /ready, no container: %v", waitReady(t, base, done, stderr).Round(time.Millisecond))
	status, res := mcpCall(t, base, token, "memory.example.com", "stats", map[string]any{})
	if status != http.StatusOK || dig(res, "result", "structuredContent", "namespace") != "default" {
		t.Errorf("stats through the host of MEMGATE_ALLOW_HOST: HTTP %d %v", status, res)
	}
	stop, _ := time.ParseDuration(u.get("Service", "TimeoutStopSec")[0] + "s")
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v; stderr %s", err, stderr)
		}
	case <-time.After(stop):
		t.Errorf("memgate did not exit within TimeoutStopSec (%v) of SIGTERM", stop)
	}
}

// waitReady waits until base/ready answers 200, or the process ends.
func waitReady(t *testing.T, base string, done chan error, stderr *syncBuffer) time.Duration {
	t.Helper()
	start := time.Now()
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get(base + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("memgate ended before it was ready: %v; stderr %s", err, stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("not ready within 30 s; stderr %s", stderr)
		}
	}
}
