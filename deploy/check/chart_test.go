package check

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden renderings and deploy/kubernetes from the chart")

// The chart is rendered as for a cluster of this version, with the
// Prometheus operator's ServiceMonitor known.
const (
	kubeVersion = "1.32.0"
	release     = "memgate"
	namespace   = "memgate"
)

// secretVars are the variables that hold secrets: they come from Secrets
// by reference, never from a ConfigMap or a literal value.
var secretVars = []string{"MEMGATE_TOKEN", "MEMGATE_OAUTH_INTROSPECTION_TOKEN", "MEMGATE_PASSPHRASE",
	"MEMGATE_NEW_PASSPHRASE", "MEMGATE_ADMIN_TOKEN", "MEMGATE_EMBEDDER_KEY", "MEMGATE_POSTGRES_DSN"}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm runs the helm of this module's tool line (go tool -n builds it
// once and keeps it in the build cache) and returns its output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helmOnce.Do(func() {
		out, err := exec.Command("go", "tool", "-n", "helm").Output()
		if err != nil {
			helmErr = fmt.Errorf("go tool -n helm: %v", err)
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmPath, args...)
	// Nothing of the machine's helm set-up (repositories, plugins).
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("helm %s: %v", args[0], err)
	}
	return stdout.String(), nil
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "charts", "memgate") }

// render is helm template of the chart with the values files and --set
// arguments given.
func render(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace,
		"--kube-version", kubeVersion, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, extra...)
	return helm(t, args...)
}

// TestChart lints and renders the chart for every values file under ci/,
// decodes each rendering strictly into the Kubernetes types, holds it to
// the policy, and compares it with its golden file.
func TestChart(t *testing.T) {
	dir := chartDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("values files under ci/: %v %v", files, err)
	}
	if out, err := helm(t, "lint", "--strict", "--kube-version", kubeVersion, dir); err != nil {
		t.Fatalf("lint with the defaults: %v\n%s", err, out)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		t.Run(name, func(t *testing.T) {
			if out, err := helm(t, "lint", "--strict", "--kube-version", kubeVersion, "-f", f, dir); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			out, err := render(t, "-f", f)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			checkPolicy(t, decodeAll(t, out))
			golden(t, filepath.Join("testdata", name+".yaml"), out)
		})
	}
}

// TestChartRefuses: what the schema and validate.yaml stop at render time.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"two replicas of a bbolt store", []string{"--set", "replicaCount=2"}, "'/replicaCount': maximum: got 2, want 1"},
		{"a backend that does not exist", []string{"--set", "storage.backend=postgres"}, "/storage/backend"},
		{"a token among the flags", []string{"--set", "serve.flags.token=abcdefghijklmnopqrstuvwxyz"}, "invalid propertyName 'token'"},
		{"a passphrase among the flags", []string{"--set", "serve.flags.passphrase=x"}, "invalid propertyName 'passphrase'"},
		{"a flag the chart owns", []string{"--set", "serve.flags.bind=127.0.0.1:1"}, "serve.flags.bind: the chart sets it itself"},
		{"an unknown value", []string{"--set", "replicacount=1"}, "additional properties 'replicacount' not allowed"},
		{"an unknown auth mode", []string{"--set", "auth.mode=basic"}, "/auth/mode"},
		{"JWT without its issuer", []string{"--set", "auth.mode=jwt", "--set", "auth.jwt.audience=a", "--set", "auth.jwt.jwksURL=https://id.example.com/jwks"}, "issuer"},
		{"JWT without keys", []string{"--set", "auth.mode=jwt", "--set", "auth.jwt.issuer=https://id.example.com/", "--set", "auth.jwt.audience=a"}, "give jwksURL"},
		{"a JWKS over http", []string{"--set", "auth.mode=jwt", "--set", "auth.jwt.issuer=i", "--set", "auth.jwt.audience=a", "--set", "auth.jwt.jwksURL=http://id.example.com/jwks"}, "/auth/jwt/jwksURL"},
		{"introspection without a resource", []string{"--set", "auth.mode=oauth", "--set", "auth.oauth.issuer=https://id.example.com", "--set", "auth.oauth.introspectionURL=https://id.example.com/i"}, "auth.oauth.resource"},
		{"a namespace from the subject without the token strategy", []string{"--set", "serve.namespaceFromSubject=true"}, "needs serve.namespaceStrategy token"},
		{"a ServiceMonitor without metrics", []string{"--set", "serviceMonitor.enabled=true"}, "needs serve.metrics"},
		{"a grace period of nothing", []string{"--set", "serve.shutdownGraceSeconds=0"}, "shutdownGraceSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.set...)
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("the error does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestPolicyCatches: each check of the policy fails on a rendering that
// breaks it (values a user could set).
func TestPolicyCatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"a misspelt field", []string{"--set", "securityContext.runAsNonRot=true"}, `unknown field "spec.template.spec.containers[0].securityContext.runAsNonRot"`},
		{"a writable root file system", []string{"--set", "securityContext.readOnlyRootFilesystem=false"}, "root file system writable"},
		{"privilege escalation", []string{"--set", "securityContext.allowPrivilegeEscalation=true"}, "privilege escalation allowed"},
		{"a capability kept", []string{"--set", "securityContext.capabilities.drop=null", "--set", "securityContext.capabilities.add[0]=NET_ADMIN"}, "want drop ALL"},
		{"root", []string{"--set", "podSecurityContext.runAsUser=0"}, "runAsUser 65532"},
		{"no seccomp profile", []string{"--set", "podSecurityContext.seccompProfile=null"}, "seccomp RuntimeDefault"},
		{"a liveness probe on the readiness path", []string{"--set", "livenessProbe.httpGet.path=/ready"}, "liveness probe on /ready"},
		{"no readiness probe", []string{"--set", "readinessProbe=null"}, "no readiness probe"},
		{"a probe on another port", []string{"--set", "readinessProbe.httpGet.port=9999"}, "readiness probe on /ready port 9999"},
		{"a grace period shorter than the drain", []string{"--set", "terminationGracePeriodSeconds=5"}, "does not cover --shutdown-grace"},
		{"a literal token", []string{"--set", "serve.extraEnv[0].name=MEMGATE_ADMIN_TOKEN", "--set", "serve.extraEnv[0].value=abcdefghijklmnop"}, "MEMGATE_ADMIN_TOKEN is not from a Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.set...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			problems := new(recorder).check(func(r reporter) { checkPolicy(r, decodeAll(r, out)) })
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("the policy did not say %q; it said %q", tc.want, problems)
			}
		})
	}
}

// TestChartRollsOnAChange: the pod template carries a checksum of the
// settings, so that helm upgrade with another setting restarts the pod.
func TestChartRollsOnAChange(t *testing.T) {
	checksum := func(set ...string) string {
		out, err := render(t, set...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		sts := only[*appsv1.StatefulSet](t, decodeAll(t, out))
		return sts.Spec.Template.Annotations["checksum/config"]
	}
	a, b := checksum(), checksum("--set", "serve.maxStores=64")
	if a == "" || a == b {
		t.Fatalf("checksum/config %q, then %q after a change of serve.maxStores", a, b)
	}
	if c := checksum(); c != a {
		t.Fatalf("checksum/config changes by itself: %q, then %q", a, c)
	}
}

// TestChartServiceMonitorNeedsItsCRD: no ServiceMonitor where the cluster
// does not know the kind (helm install would fail on it).
func TestChartServiceMonitorNeedsItsCRD(t *testing.T) {
	out, err := helm(t, "template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion,
		"-f", filepath.Join(chartDir(t), "ci", "team-tokens-values.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, o := range decodeAll(t, out) {
		if _, ok := o.(*monitoringv1.ServiceMonitor); ok {
			t.Fatal("a ServiceMonitor without monitoring.coreos.com/v1 in the cluster")
		}
	}
}

// TestPlainManifests: deploy/kubernetes/memgate.yaml is the chart rendered
// with deploy/kubernetes/values.yaml, for people without helm; it is held
// to the same policy, and must not fall behind the chart.
func TestPlainManifests(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "kubernetes")
	out, err := render(t, "-f", filepath.Join(dir, "values.yaml"), "--skip-tests")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	header := "# memgate for Kubernetes without helm: charts/memgate rendered with values.yaml\n" +
		"# (release memgate, namespace memgate). Do not edit: change the chart, then\n" +
		"# cd deploy/check && go test -run TestPlainManifests -update\n" +
		"# First: kubectl create namespace memgate; kubectl -n memgate create secret generic\n" +
		"# memgate-auth --from-literal=token=\"$(openssl rand -hex 32)\" (docs/DEPLOY.md).\n"
	out = header + out
	checkPolicy(t, decodeAll(t, out))
	golden(t, filepath.Join(dir, "memgate.yaml"), out)
}

// reporter is what the policy checks report to: a *testing.T, or a
// recorder that collects what they find in a rendering meant to break them.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// recorder is a reporter that keeps the problems; Fatalf ends the check
// with a panic that check recovers.
type recorder struct{ problems []string }

type fatal struct{}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, a ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.Errorf(format, a...)
	panic(fatal{})
}

// check runs f with a recorder and returns what it found.
func (r *recorder) check(f func(reporter)) (problems []string) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		problems = r.problems
	}()
	f(r)
	return
}

// golden compares got with the file at path, or writes it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs from the rendering (go test -update rewrites it):\n%s", path, firstDiff(string(want), got))
	}
}

// firstDiff shows where two texts part, with a little context.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return ""
}

var (
	decoderOnce sync.Once
	decoder     runtime.Decoder
)

// decodeAll decodes every document of a rendering strictly into its
// Kubernetes type: an unknown or misspelt field, a duplicate key or a
// wrong type fails the test.
func decodeAll(t reporter, rendered string) []runtime.Object {
	t.Helper()
	decoderOnce.Do(func() {
		s := runtime.NewScheme()
		if err := scheme.AddToScheme(s); err != nil {
			panic(err)
		}
		if err := monitoringv1.AddToScheme(s); err != nil {
			panic(err)
		}
		decoder = serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	})
	var objs []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("strict decoding: %v\n%s", err, doc)
		}
		if gvk.Kind == "" {
			t.Fatalf("a document without a kind:\n%s", doc)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatalf("the rendering holds no object")
	}
	return objs
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// only returns the one object of type T, failing if there is not exactly one.
func only[T runtime.Object](t reporter, objs []runtime.Object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of %T, want 1", len(found), zero)
	}
	return found[0]
}

// checkPolicy holds a rendering to what every memgate deployment must be.
func checkPolicy(t reporter, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Secret:
			t.Errorf("the chart renders Secret %s: secrets are only referred to", o.Name)
		case *appsv1.Deployment, *appsv1.DaemonSet, *appsv1.ReplicaSet:
			t.Errorf("a %T: a bbolt store is served by one StatefulSet", o)
		case *corev1.ConfigMap:
			for k, v := range o.Data {
				if slices.Contains(secretVars, k) {
					t.Errorf("ConfigMap %s holds %s, a secret", o.Name, k)
				}
				if strings.Contains(v, "PRIVATE KEY") {
					t.Errorf("ConfigMap %s key %s holds a private key", o.Name, k)
				}
			}
		}
	}
	sts := only[*appsv1.StatefulSet](t, objs)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas %v, want 1 (one writer per bbolt store)", sts.Spec.Replicas)
	}
	pod := sts.Spec.Template.Spec
	checkPodSecurity(t, "StatefulSet "+sts.Name, pod)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token; memgate never calls the API")
	}
	if sts.Spec.Template.Annotations["checksum/config"] == "" {
		t.Errorf("no checksum/config annotation on the pod template")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	port := containerPort(t, c, "http")

	// Data on /data, from the claim template or an emptyDir.
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/data" {
			mounted = true
			claim := slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == m.Name })
			empty := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.EmptyDir != nil })
			if !claim && !empty {
				t.Errorf("/data is volume %s, neither a claim template nor an emptyDir", m.Name)
			}
		} else if !m.ReadOnly {
			t.Errorf("%s is mounted writable; only /data is", m.MountPath)
		}
	}
	if !mounted {
		t.Errorf("nothing is mounted on /data")
	}

	// Probes: alive on /health, ready on /ready, at the container's port.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/health"}, {"readiness", c.ReadinessProbe, "/ready"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || resolvePort(t, c, p.probe.HTTPGet.Port) != port {
			t.Errorf("%s probe on %s port %v, want %s on %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, port)
		}
	}

	// Settings: where a secret comes from, what the server listens on.
	settings := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Errorf("envFrom %+v: only the settings ConfigMap", from)
			continue
		}
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == from.ConfigMapRef.Name {
				for k, v := range cm.Data {
					settings[k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		if slices.Contains(secretVars, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s is not from a Secret", e.Name)
		}
		settings[e.Name] = e.Value
	}
	if want := fmt.Sprintf("0.0.0.0:%d", port); settings["MEMGATE_BIND"] != want || settings["MEMGATE_ALLOW_REMOTE"] != "true" ||
		settings["MEMGATE_TRANSPORT"] != "http" || settings["MEMGATE_DATA_DIR"] != "/data" {
		t.Errorf("bind %q allow-remote %q transport %q data-dir %q; want %s, true, http, /data", settings["MEMGATE_BIND"],
			settings["MEMGATE_ALLOW_REMOTE"], settings["MEMGATE_TRANSPORT"], settings["MEMGATE_DATA_DIR"], want)
	}
	authModes := 0
	for _, k := range []string{"MEMGATE_TOKEN", "MEMGATE_TOKENS_FILE", "MEMGATE_JWT_ISSUER", "MEMGATE_OAUTH_ISSUER"} {
		if _, ok := settings[k]; ok {
			authModes++
		}
	}
	if authModes != 1 {
		t.Errorf("%d auth modes; serving other machines needs exactly one", authModes)
	}
	allowed := strings.Split(settings["MEMGATE_ALLOW_HOST"], ",")

	// The Service reaches the container's port, and its names are allowed.
	var services int
	for _, o := range objs {
		svc, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		services++
		if !selects(svc.Spec.Selector, sts.Spec.Template.Labels) {
			t.Errorf("Service %s does not select the pod", svc.Name)
		}
		for _, p := range svc.Spec.Ports {
			if resolvePort(t, c, p.TargetPort) != port {
				t.Errorf("Service %s port %s reaches %v, not the container's %d", svc.Name, p.Name, p.TargetPort.String(), port)
			}
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			for _, h := range []string{svc.Name, svc.Name + "." + namespace + ".svc"} {
				if !slices.Contains(allowed, h) {
					t.Errorf("--allow-host %q lacks %s: in-cluster clients would get 403", allowed, h)
				}
			}
		}
	}
	if services == 0 {
		t.Errorf("no Service")
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *networkingv1.Ingress:
			checkIngress(t, o, objs, allowed, settings["MEMGATE_PATH"])
		case *corev1.Pod: // helm test
			checkPodSecurity(t, "Pod "+o.Name, o.Spec)
			for _, o2 := range objs {
				if svc, ok := o2.(*corev1.Service); ok && selects(svc.Spec.Selector, o.Labels) {
					t.Errorf("Service %s selects the test pod %s", svc.Name, o.Name)
				}
			}
		case *policyv1.PodDisruptionBudget:
			if !selects(o.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) {
				t.Errorf("PodDisruptionBudget %s does not select the pod", o.Name)
			}
		case *networkingv1.NetworkPolicy:
			if !selects(o.Spec.PodSelector.MatchLabels, sts.Spec.Template.Labels) {
				t.Errorf("NetworkPolicy %s does not select the pod", o.Name)
			}
		case *monitoringv1.ServiceMonitor:
			if settings["MEMGATE_METRICS"] != "true" {
				t.Errorf("a ServiceMonitor, and memgate serves no /metrics")
			}
		}
	}
	shutdown, err := time.ParseDuration(settings["MEMGATE_SHUTDOWN_GRACE"])
	if grace := pod.TerminationGracePeriodSeconds; err != nil || grace == nil || time.Duration(*grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %v does not cover --shutdown-grace %q (%v)", grace, settings["MEMGATE_SHUTDOWN_GRACE"], err)
	}
}

// checkPodSecurity: non-root as 65532, seccomp RuntimeDefault, and each
// container read-only, without privilege escalation or capabilities.
func checkPodSecurity(t reporter, what string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", what, psc)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: container %s has no securityContext", what, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: container %s: root file system writable", what, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: container %s: privilege escalation allowed", what, c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("%s: container %s: privileged", what, c.Name)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: container %s: capabilities %+v, want drop ALL and none added", what, c.Name, sc.Capabilities)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Errorf("%s: container %s: runAsNonRoot not set", what, c.Name)
		case sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("%s: container %s: seccomp %s", what, c.Name, sc.SeccompProfile.Type)
		}
	}
}

// checkIngress: it routes the MCP path (and its OAuth metadata) to the
// Service, nothing else, and its hosts are allowed.
func checkIngress(t reporter, ing *networkingv1.Ingress, objs []runtime.Object, allowed []string, mcpPath string) {
	t.Helper()
	if len(ing.Spec.TLS) == 0 {
		t.Logf("Ingress %s without tls (NOTES.txt warns)", ing.Name)
	}
	for _, rule := range ing.Spec.Rules {
		if !slices.Contains(allowed, rule.Host) {
			t.Errorf("ingress host %s is not in --allow-host %q: its requests would get 403", rule.Host, allowed)
		}
		for _, p := range rule.HTTP.Paths {
			if p.Path != mcpPath && !strings.HasPrefix(p.Path, "/.well-known/oauth-protected-resource") {
				t.Errorf("ingress routes %s: only the MCP path and its metadata are public (/metrics is not)", p.Path)
			}
			svc := p.Backend.Service
			found := false
			for _, o := range objs {
				if s, ok := o.(*corev1.Service); ok && s.Name == svc.Name {
					found = slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool {
						return sp.Port == svc.Port.Number || (svc.Port.Name != "" && sp.Name == svc.Port.Name)
					})
				}
			}
			if !found {
				t.Errorf("ingress path %s goes to %s port %+v, which no Service has", p.Path, svc.Name, svc.Port)
			}
		}
	}
}

func containerPort(t reporter, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// resolvePort is the container port a probe or Service port names.
func resolvePort(t reporter, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// selects reports whether a selector matches labels (and is not empty).
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// renderNotes renders the chart's NOTES.txt (which helm template leaves
// out) for a values file: a copy of the chart holds it as a template of
// its own.
func renderNotes(t *testing.T, values string, set ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memgate")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := "{{- define \"check.notes\" -}}\n" + string(notes) + "\n{{- end }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "_check_notes.tpl"), []byte(wrapped), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := "notes: {{ include \"check.notes\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "check-notes.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", release, dir, "--namespace", namespace, "--kube-version", kubeVersion,
		"-f", values, "--show-only", "templates/check-notes.yaml"}, set...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v struct{ Notes string }
	if err := yaml.Unmarshal([]byte(out), &v); err != nil || v.Notes == "" {
		t.Fatalf("notes: %v\n%s", err, out)
	}
	return v.Notes
}

// TestChartNotes: what helm install prints tells how to make the Secret it
// waits for and how to connect an editor, for every values file.
func TestChartNotes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		t.Run(name, func(t *testing.T) {
			notes := renderNotes(t, f)
			var values struct {
				Auth struct {
					Mode string `json:"mode"`
				} `json:"auth"`
				Encryption struct {
					Enabled bool `json:"enabled"`
				} `json:"encryption"`
			}
			data, _ := os.ReadFile(f)
			if err := yaml.Unmarshal(data, &values); err != nil {
				t.Fatal(err)
			}
			mode := values.Auth.Mode
			if mode == "" {
				mode = "token"
			}
			want := []string{"helm test memgate -n memgate", "http://memgate.memgate.svc:8765/mcp", "--allow-host"}
			switch mode {
			case "token", "tokensFile":
				want = append(want, "kubectl -n memgate create secret generic", "claude mcp add --transport http memgate ",
					`--header "Authorization: Bearer $TOKEN"`)
			case "oauth":
				want = append(want, "--from-literal=introspection-token=", "/.well-known/oauth-protected-resource/mcp")
			case "jwt":
				want = append(want, "/.well-known/oauth-protected-resource/mcp")
			}
			if values.Encryption.Enabled {
				want = append(want, "--from-literal=passphrase=", "outside the cluster")
			}
			for _, w := range want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES.txt lacks %q:\n%s", w, notes)
				}
			}
			// Steps are numbered 1, 2, 3... in order.
			steps := regexp.MustCompile(`(?m)^(\d+)\. `).FindAllStringSubmatch(notes, -1)
			for i, s := range steps {
				if s[1] != strconv.Itoa(i+1) {
					t.Errorf("step %d is numbered %s:\n%s", i+1, s[1], notes)
				}
			}
			golden(t, filepath.Join("testdata", "notes", name+".txt"), notes)
		})
	}
	t.Run("an ingress without TLS is warned about", func(t *testing.T) {
		notes := renderNotes(t, filepath.Join(chartDir(t), "ci", "default-values.yaml"),
			"--set", "ingress.enabled=true", "--set", "ingress.hosts[0]=memory.example.com")
		if !strings.Contains(notes, "WARNING: the ingress has no tls") {
			t.Errorf("no warning:\n%s", notes)
		}
	})
}
