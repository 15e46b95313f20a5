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
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
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
	postgres := func(set ...string) []string {
		return append([]string{"--set", "storage.backend=postgres", "--set", "storage.postgres.existingSecret=memgate-postgres"}, set...)
	}
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"two replicas of a bbolt store", []string{"--set", "replicaCount=2"}, "'/replicaCount': maximum: got 2, want 1"},
		{"a backend that does not exist", []string{"--set", "storage.backend=mysql"}, "/storage/backend"},
		{"PostgreSQL without the Secret of its DSN", []string{"--set", "storage.backend=postgres"}, "'/storage/postgres/existingSecret': minLength: got 0, want 1"},
		{"a DSN without its key", postgres("--set", "storage.postgres.dsnKey="), "'/storage/postgres/dsnKey': minLength"},
		{"an autoscaler of a bbolt store", []string{"--set", "autoscaling.enabled=true"}, "'/autoscaling/enabled': value must be false"},
		{"an autoscaler whose minimum is above its maximum", postgres("--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=5", "--set", "autoscaling.maxReplicas=3"), "minReplicas 5 is above maxReplicas 3"},
		{"an autoscaler on a CPU the pod does not request", postgres("--set", "autoscaling.enabled=true", "--set", "resources.requests=null"), "needs resources.requests.cpu"},
		{"a network policy that keeps the replicas from PostgreSQL", postgres("--set", "networkPolicy.enabled=true"), "list PostgreSQL"},
		{"a migration that does not exist", postgres("--set", "storage.postgres.migrate=always"), "/storage/postgres/migrate"},
		{"the DSN among the flags", []string{"--set", "serve.flags.postgres-dsn=postgres://u:p@db/m"}, "invalid propertyName 'postgres-dsn'"},
		{"the store among the flags", []string{"--set", "serve.flags.store=postgres"}, "serve.flags.store: the chart sets it itself"},
		{"both budgets", []string{"--set", "podDisruptionBudget.minAvailable=1", "--set", "podDisruptionBudget.maxUnavailable=1"}, "not both"},
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
		{"a literal DSN, in the replicas and the migration", []string{"-f", filepath.Join(chartDir(t), "ci", "postgres-values.yaml"),
			"--set", "serve.extraEnv[0].name=MEMGATE_POSTGRES_DSN", "--set", "serve.extraEnv[0].value=postgres://u:p@db/m"}, "MEMGATE_POSTGRES_DSN is not from a Secret"},
		{"a budget that blocks every drain", []string{"-f", filepath.Join(chartDir(t), "ci", "postgres-clientip-values.yaml"),
			"--set", "podDisruptionBudget.minAvailable=3"}, "minAvailable 3 of 3 replicas allows no eviction"},
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

// TestChartPostgres: storage.backend postgres renders a Deployment of
// replicas serving one database instead of the StatefulSet: the DSN from
// its Secret, no volume claim (the cache in an emptyDir), an autoscaler,
// a disruption budget, and the schema's migration where it was asked for.
func TestChartPostgres(t *testing.T) {
	ci := filepath.Join(chartDir(t), "ci")
	renderPolicy := func(t *testing.T, args ...string) []runtime.Object {
		t.Helper()
		out, err := render(t, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		objs := decodeAll(t, out)
		checkPolicy(t, objs)
		return objs
	}
	settings := func(t *testing.T, objs []runtime.Object) map[string]string {
		t.Helper()
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == release {
				return cm.Data
			}
		}
		t.Fatalf("no ConfigMap %s", release)
		return nil
	}
	dsn := func(t *testing.T, c corev1.Container) *corev1.SecretKeySelector {
		t.Helper()
		for _, e := range c.Env {
			if e.Name == "MEMGATE_POSTGRES_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return e.ValueFrom.SecretKeyRef
			}
		}
		t.Fatalf("container %s has no MEMGATE_POSTGRES_DSN from a Secret", c.Name)
		return nil
	}
	budget := func(t *testing.T, objs []runtime.Object) string {
		t.Helper()
		var found []string
		for _, o := range objs {
			if pdb, ok := o.(*policyv1.PodDisruptionBudget); ok {
				if pdb.Spec.MaxUnavailable != nil {
					found = append(found, "maxUnavailable "+pdb.Spec.MaxUnavailable.String())
				}
				if pdb.Spec.MinAvailable != nil {
					found = append(found, "minAvailable "+pdb.Spec.MinAvailable.String())
				}
			}
		}
		return strings.Join(found, ", ")
	}

	t.Run("autoscaled", func(t *testing.T) {
		objs := renderPolicy(t, "-f", filepath.Join(ci, "postgres-values.yaml"))
		if n := count[*appsv1.StatefulSet](objs); n != 0 {
			t.Errorf("%d StatefulSets beside the Deployment", n)
		}
		d := only[*appsv1.Deployment](t, objs)
		if d.Spec.Replicas != nil {
			t.Errorf("replicas %d: the autoscaler decides", *d.Spec.Replicas)
		}
		if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
			t.Errorf("rolling update %+v: a rollout should start a replica before it stops one", ru)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if ref := dsn(t, c); ref.Name != "memgate-postgres" || ref.Key != "dsn" {
			t.Errorf("the DSN comes from %s/%s, want memgate-postgres/dsn", ref.Name, ref.Key)
		}
		data := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" })
		if data < 0 || d.Spec.Template.Spec.Volumes[data].EmptyDir == nil {
			t.Fatalf("the data folder is not an emptyDir: %+v", d.Spec.Template.Spec.Volumes)
		}
		if limit := d.Spec.Template.Spec.Volumes[data].EmptyDir.SizeLimit; limit == nil || limit.String() != "1Gi" {
			t.Errorf("the cache's sizeLimit is %v, want 1Gi", limit)
		}
		cm := settings(t, objs)
		if cm["MEMGATE_STORE"] != "postgres" || cm["MEMGATE_REPLICA_STALENESS"] != "1s" {
			t.Errorf("store %q, replica staleness %q; want postgres, 1s", cm["MEMGATE_STORE"], cm["MEMGATE_REPLICA_STALENESS"])
		}
		if _, ok := cm["MEMGATE_MIGRATE"]; ok {
			t.Errorf("MEMGATE_MIGRATE set while the Job migrates")
		}

		h := only[*autoscalingv2.HorizontalPodAutoscaler](t, objs)
		if *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 10 || h.Spec.ScaleTargetRef.Name != d.Name {
			t.Errorf("autoscaler of %s from %d to %d, want %s from 2 to 10", h.Spec.ScaleTargetRef.Name, *h.Spec.MinReplicas, h.Spec.MaxReplicas, d.Name)
		}
		if m := h.Spec.Metrics; len(m) != 1 || m[0].Resource == nil || m[0].Resource.Name != corev1.ResourceCPU ||
			m[0].Resource.Target.AverageUtilization == nil || *m[0].Resource.Target.AverageUtilization != 70 {
			t.Errorf("autoscaler metrics %+v, want CPU at 70%%", m)
		}
		if b := h.Spec.Behavior; b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds != 300 {
			t.Errorf("autoscaler behavior %+v, want the values file's scale-down window", b)
		}
		if got := budget(t, objs); got != "maxUnavailable 1" {
			t.Errorf("disruption budget %q, want maxUnavailable 1", got)
		}

		job := only[*batchv1.Job](t, objs)
		if ref := dsn(t, job.Spec.Template.Spec.Containers[0]); ref.Name != "memgate-postgres" || ref.Key != "owner-dsn" {
			t.Errorf("the migration's DSN comes from %s/%s, want memgate-postgres/owner-dsn", ref.Name, ref.Key)
		}
		if job.Spec.Template.Spec.ServiceAccountName != "" {
			t.Errorf("the migration runs as %s, which is not there yet at install", job.Spec.Template.Spec.ServiceAccountName)
		}
		if n := count[*corev1.Service](objs); n != 1 {
			t.Errorf("%d Services, want 1 (no headless one without a StatefulSet)", n)
		}
	})

	t.Run("fixed replicas, affinity by client address, migrated by the replicas", func(t *testing.T) {
		objs := renderPolicy(t, "-f", filepath.Join(ci, "postgres-clientip-values.yaml"))
		d := only[*appsv1.Deployment](t, objs)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			t.Errorf("replicas %v, want 3", d.Spec.Replicas)
		}
		if ref := dsn(t, d.Spec.Template.Spec.Containers[0]); ref.Name != "memgate-db" || ref.Key != "url" {
			t.Errorf("the DSN comes from %s/%s, want memgate-db/url", ref.Name, ref.Key)
		}
		if n := count[*autoscalingv2.HorizontalPodAutoscaler](objs) + count[*batchv1.Job](objs); n != 0 {
			t.Errorf("%d autoscalers and Jobs, want none", n)
		}
		cm := settings(t, objs)
		if cm["MEMGATE_MIGRATE"] != "true" || cm["MEMGATE_REPLICA_STALENESS"] != "500ms" {
			t.Errorf("migrate %q, replica staleness %q; want true, 500ms", cm["MEMGATE_MIGRATE"], cm["MEMGATE_REPLICA_STALENESS"])
		}
		svc := only[*corev1.Service](t, objs)
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Spec.SessionAffinityConfig == nil ||
			*svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 3600 {
			t.Errorf("Service affinity %s %+v, want ClientIP for 3600 s", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
		}
		if got := budget(t, objs); got != "maxUnavailable 1" {
			t.Errorf("disruption budget %q, want maxUnavailable 1", got)
		}
	})

	for _, tc := range []struct {
		name   string
		set    []string
		budget string
		job    bool
		check  func(t *testing.T, objs []runtime.Object)
	}{
		{"one replica: no budget", []string{"--set", "autoscaling.enabled=false", "--set", "replicaCount=1"}, "", true, nil},
		{"a budget turned off", []string{"--set", "podDisruptionBudget.enabled=false"}, "", true, nil},
		{"a budget of its own", []string{"--set", "podDisruptionBudget.minAvailable=50%"}, "minAvailable 50%", true, nil},
		{"migrated by hand", []string{"--set", "storage.postgres.migrate=off"}, "maxUnavailable 1", false, func(t *testing.T, objs []runtime.Object) {
			if _, ok := settings(t, objs)["MEMGATE_MIGRATE"]; ok {
				t.Errorf("MEMGATE_MIGRATE set with migrate off")
			}
		}},
		{"a service account of one's own", []string{"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=db-client"}, "maxUnavailable 1", true,
			func(t *testing.T, objs []runtime.Object) {
				if sa := only[*batchv1.Job](t, objs).Spec.Template.Spec.ServiceAccountName; sa != "db-client" {
					t.Errorf("the migration runs as %q, want db-client", sa)
				}
			}},
		{"a load balancer that keeps the client's address", []string{"--set", "service.type=LoadBalancer", "--set", "service.externalTrafficPolicy=Local",
			"--set", "service.sessionAffinity=ClientIP"}, "maxUnavailable 1", true, func(t *testing.T, objs []runtime.Object) {
			if svc := only[*corev1.Service](t, objs); svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
				t.Errorf("externalTrafficPolicy %q, want Local", svc.Spec.ExternalTrafficPolicy)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderPolicy(t, append([]string{"-f", filepath.Join(ci, "postgres-values.yaml")}, tc.set...)...)
			if got := budget(t, objs); got != tc.budget {
				t.Errorf("disruption budget %q, want %q", got, tc.budget)
			}
			if n := count[*batchv1.Job](objs); (n == 1) != tc.job {
				t.Errorf("%d migration Jobs, want one: %v", n, tc.job)
			}
			if tc.check != nil {
				tc.check(t, objs)
			}
		})
	}

	t.Run("a change of the settings rolls the replicas", func(t *testing.T) {
		checksum := func(set ...string) string {
			objs := renderPolicy(t, append([]string{"-f", filepath.Join(ci, "postgres-values.yaml")}, set...)...)
			return only[*appsv1.Deployment](t, objs).Spec.Template.Annotations["checksum/config"]
		}
		if a, b := checksum(), checksum("--set", "storage.postgres.replicaStaleness=2s"); a == "" || a == b {
			t.Errorf("checksum/config %q, then %q after a change of the replica staleness", a, b)
		}
	})
}

// count is how many objects of type T a rendering holds.
func count[T runtime.Object](objs []runtime.Object) int {
	n := 0
	for _, o := range objs {
		if _, ok := o.(T); ok {
			n++
		}
	}
	return n
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
		case *appsv1.DaemonSet, *appsv1.ReplicaSet:
			t.Errorf("a %T: memgate runs as a StatefulSet (bbolt) or a Deployment (PostgreSQL)", o)
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
	// The workload: a StatefulSet of one pod with its volume (bbolt), or a
	// Deployment of replicas sharing a database (PostgreSQL); never both.
	var (
		template corev1.PodTemplateSpec
		claims   []corev1.PersistentVolumeClaim
		deploy   *appsv1.Deployment
		kinds    []string
	)
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			kinds = append(kinds, "StatefulSet "+o.Name)
			if o.Spec.Replicas == nil || *o.Spec.Replicas != 1 {
				t.Errorf("StatefulSet replicas %v, want 1 (one writer per bbolt store)", o.Spec.Replicas)
			}
			template, claims = o.Spec.Template, o.Spec.VolumeClaimTemplates
		case *appsv1.Deployment:
			kinds = append(kinds, "Deployment "+o.Name)
			template, deploy = o.Spec.Template, o
		}
	}
	if len(kinds) != 1 {
		t.Fatalf("workloads %q, want one StatefulSet or one Deployment", kinds)
	}
	pod := template.Spec
	checkPodSecurity(t, kinds[0], pod)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token; memgate never calls the API")
	}
	if template.Annotations["checksum/config"] == "" {
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
			claim := slices.ContainsFunc(claims, func(p corev1.PersistentVolumeClaim) bool { return p.Name == m.Name })
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
	checkSecretEnv(t, c)
	for _, e := range c.Env {
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
		if !selects(svc.Spec.Selector, template.Labels) {
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
		case *batchv1.Job:
			checkJob(t, o, objs)
		case *policyv1.PodDisruptionBudget:
			if !selects(o.Spec.Selector.MatchLabels, template.Labels) {
				t.Errorf("PodDisruptionBudget %s does not select the pod", o.Name)
			}
			if deploy != nil {
				checkBudget(t, o, deploy)
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			if deploy == nil {
				t.Errorf("HorizontalPodAutoscaler %s of a bbolt store: it has one writer process", o.Name)
			} else {
				checkAutoscaler(t, o, deploy)
			}
		case *networkingv1.NetworkPolicy:
			if !selects(o.Spec.PodSelector.MatchLabels, template.Labels) {
				t.Errorf("NetworkPolicy %s does not select the pod", o.Name)
			}
		case *monitoringv1.ServiceMonitor:
			if settings["MEMGATE_METRICS"] != "true" {
				t.Errorf("a ServiceMonitor, and memgate serves no /metrics")
			}
		}
	}
	if store := settings["MEMGATE_STORE"]; deploy == nil && store != "" && store != "bbolt" {
		t.Errorf("a StatefulSet of one pod serving store %q", store)
	} else if deploy != nil {
		checkPostgres(t, deploy, objs, settings)
	}
	shutdown, err := time.ParseDuration(settings["MEMGATE_SHUTDOWN_GRACE"])
	if grace := pod.TerminationGracePeriodSeconds; err != nil || grace == nil || time.Duration(*grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %v does not cover --shutdown-grace %q (%v)", grace, settings["MEMGATE_SHUTDOWN_GRACE"], err)
	}
}

// checkSecretEnv: a variable that holds a secret comes from a Secret.
func checkSecretEnv(t reporter, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		if slices.Contains(secretVars, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s is not from a Secret", e.Name)
		}
	}
}

// checkPostgres: a Deployment serves only a PostgreSQL store, whose DSN
// comes from a Secret; its replicas keep no volume of their own.
func checkPostgres(t reporter, d *appsv1.Deployment, objs []runtime.Object, settings map[string]string) {
	t.Helper()
	if settings["MEMGATE_STORE"] != "postgres" {
		t.Errorf("Deployment %s with store %q: a bbolt store has one writer process (a StatefulSet of one pod)", d.Name, settings["MEMGATE_STORE"])
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "MEMGATE_POSTGRES_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}) {
		t.Errorf("Deployment %s: no MEMGATE_POSTGRES_DSN from a Secret", d.Name)
	}
	if _, err := time.ParseDuration(settings["MEMGATE_REPLICA_STALENESS"]); err != nil {
		t.Errorf("MEMGATE_REPLICA_STALENESS %q: %v", settings["MEMGATE_REPLICA_STALENESS"], err)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("Deployment %s mounts claim %s: replicas of a PostgreSQL store keep only a cache", d.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	for _, o := range objs {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok {
			t.Errorf("PersistentVolumeClaim %s beside a Deployment", pvc.Name)
		}
	}
}

// checkAutoscaler: it scales the Deployment, which leaves its replicas to
// it, within bounds that make sense, on a CPU the pod requests.
func checkAutoscaler(t reporter, h *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment) {
	t.Helper()
	if ref := h.Spec.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("HorizontalPodAutoscaler %s scales %+v, not Deployment %s", h.Name, ref, d.Name)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment %s sets replicas %d beside an autoscaler: every helm upgrade would undo its scaling", d.Name, *d.Spec.Replicas)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
		t.Errorf("HorizontalPodAutoscaler %s: minReplicas %v, maxReplicas %d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	if len(h.Spec.Metrics) == 0 {
		t.Errorf("HorizontalPodAutoscaler %s has no metric", h.Name)
	}
	for _, m := range h.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.Type == autoscalingv2.UtilizationMetricType {
			if _, ok := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; !ok {
				t.Errorf("HorizontalPodAutoscaler %s targets CPU utilization, and the pod requests no CPU", h.Name)
			}
		}
	}
}

// checkBudget: the budget of a Deployment lets a drain evict a replica.
func checkBudget(t reporter, pdb *policyv1.PodDisruptionBudget, d *appsv1.Deployment) {
	t.Helper()
	if mu := pdb.Spec.MaxUnavailable; mu != nil && mu.Type == intstr.Int && mu.IntVal < 1 {
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %d allows no eviction", pdb.Name, mu.IntVal)
	}
	if ma := pdb.Spec.MinAvailable; ma != nil && ma.Type == intstr.Int && d.Spec.Replicas != nil && ma.IntVal >= *d.Spec.Replicas {
		t.Errorf("PodDisruptionBudget %s: minAvailable %d of %d replicas allows no eviction", pdb.Name, ma.IntVal, *d.Spec.Replicas)
	}
}

// checkJob: a Job (the schema's migration) runs with the pod's security,
// its DSN from a Secret, outside the server's selectors, as a Helm hook
// before install and upgrade.
func checkJob(t reporter, j *batchv1.Job, objs []runtime.Object) {
	t.Helper()
	pod := j.Spec.Template.Spec
	checkPodSecurity(t, "Job "+j.Name, pod)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("Job %s mounts a service account token; memgate never calls the API", j.Name)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job %s: restartPolicy %q, want Never (its backoffLimit counts the attempts)", j.Name, pod.RestartPolicy)
	}
	labels := j.Spec.Template.Labels
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			if selects(o.Spec.Selector.MatchLabels, labels) {
				t.Errorf("Deployment %s selects the pod of Job %s", o.Name, j.Name)
			}
		case *appsv1.StatefulSet:
			if selects(o.Spec.Selector.MatchLabels, labels) {
				t.Errorf("StatefulSet %s selects the pod of Job %s", o.Name, j.Name)
			}
		case *corev1.Service:
			if selects(o.Spec.Selector, labels) {
				t.Errorf("Service %s selects the pod of Job %s", o.Name, j.Name)
			}
		case *policyv1.PodDisruptionBudget:
			if selects(o.Spec.Selector.MatchLabels, labels) {
				t.Errorf("PodDisruptionBudget %s counts the pod of Job %s", o.Name, j.Name)
			}
		}
	}
	for _, c := range pod.Containers {
		checkSecretEnv(t, c)
		if !slices.Equal(c.Args, []string{"migrate"}) {
			t.Errorf("Job %s runs %q, want migrate", j.Name, c.Args)
			continue
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "MEMGATE_POSTGRES_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}) {
			t.Errorf("Job %s: no MEMGATE_POSTGRES_DSN from a Secret", j.Name)
		}
		hooks := strings.Split(j.Annotations["helm.sh/hook"], ",")
		if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
			t.Errorf("Job %s runs at hooks %q, want pre-install and pre-upgrade", j.Name, hooks)
		}
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
				Storage struct {
					Backend  string `json:"backend"`
					Postgres struct {
						ExistingSecret string `json:"existingSecret"`
						DSNKey         string `json:"dsnKey"`
						Migrate        string `json:"migrate"`
					} `json:"postgres"`
				} `json:"storage"`
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
			if pg := values.Storage.Postgres; values.Storage.Backend == "postgres" {
				// Where the DSN comes from, who applies the schema, and
				// how the session revisions are routed.
				want = append(want, "PostgreSQL database of the DSN in the Secret\n"+pg.ExistingSecret, "2026-07-28 revision may go to any replica",
					"routed back to it", "docs/SCALING.md")
				switch pg.Migrate {
				case "", "hook":
					want = append(want, "The Job memgate-migrate applied the database schema")
				case "serve":
					want = append(want, "(--migrate)", "kubectl -n memgate create secret generic "+pg.ExistingSecret)
				}
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
	t.Run("replicas without affinity are warned about", func(t *testing.T) {
		notes := renderNotes(t, filepath.Join(chartDir(t), "ci", "postgres-clientip-values.yaml"), "--set", "service.sessionAffinity=None")
		if !strings.Contains(notes, "WARNING: several replicas") {
			t.Errorf("no warning:\n%s", notes)
		}
	})
	t.Run("an ingress without TLS is warned about", func(t *testing.T) {
		notes := renderNotes(t, filepath.Join(chartDir(t), "ci", "default-values.yaml"),
			"--set", "ingress.enabled=true", "--set", "ingress.hosts[0]=memory.example.com")
		if !strings.Contains(notes, "WARNING: the ingress has no tls") {
			t.Errorf("no warning:\n%s", notes)
		}
	})
}
