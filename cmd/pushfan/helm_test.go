package main

// The Helm chart (deploy/helm/pushfan), rendered by the helm that the
// Makefile pins (HELM, fetched and built by `go run` as the linters are),
// every object decoded strictly into the Kubernetes API types: a misspelt
// or misplaced field fails, as the API server would refuse it.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../deploy/helm/pushfan"

// makeVar reads `NAME ?= value` from the Makefile: the one place the helm
// version and the image's name are set.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s*\?=\s*(\S+)\s*$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("the Makefile sets no %s ?= ...", name)
	}
	return string(m[1])
}

// helm runs the pinned helm with args from the repository's root.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", makeVar(t, "HELM")}, args...)...)
	cmd.Dir = "../.."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// serviceMonitor is the Prometheus Operator's CRD, as far as the chart
// uses it (monitoring.coreos.com/v1): decoded strictly like the others.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			Authorization struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is the chart's objects by kind (and the ConfigMaps by name).
type rendered struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	configMaps map[string]*corev1.ConfigMap
	secret     *corev1.Secret
	pdb        *policyv1.PodDisruptionBudget
	job        *batchv1.Job
	monitor    *serviceMonitor
}

var yamlDocSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeStrict decodes every document of a rendered chart into its
// Kubernetes type, refusing unknown and duplicate fields.
func decodeStrict(t *testing.T, manifest string) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}}
	for _, doc := range yamlDocSep.Split(manifest, -1) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			r.deployment = &appsv1.Deployment{}
			obj = r.deployment
		case "v1 Service":
			r.service = &corev1.Service{}
			obj = r.service
		case "v1 ConfigMap":
			cm := &corev1.ConfigMap{}
			obj = cm
			defer func() { r.configMaps[cm.Name] = cm }()
		case "v1 Secret":
			r.secret = &corev1.Secret{}
			obj = r.secret
		case "policy/v1 PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			obj = r.pdb
		case "batch/v1 Job":
			r.job = &batchv1.Job{}
			obj = r.job
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.monitor = &serviceMonitor{}
			obj = r.monitor
		default:
			t.Fatalf("the chart renders a %s %s the test does not know:\n%s", meta.APIVersion, meta.Kind, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v in:\n%s", meta.Kind, err, doc)
		}
	}
	return r
}

// capacityResources reads the resource requests table of docs/CAPACITY.md.
func capacityResources(t *testing.T) map[string]resource.Quantity {
	t.Helper()
	raw, err := os.ReadFile("../../docs/CAPACITY.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]resource.Quantity{}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:requests|limits)\\.(?:cpu|memory))` \\| `([^`]+)` \\|").FindAllSubmatch(raw, -1) {
		out[string(m[1])] = resource.MustParse(string(m[2]))
	}
	if len(out) < 2 {
		t.Fatalf("docs/CAPACITY.md has no resource requests table (found %v)", out)
	}
	return out
}

func TestHelmChartRendersStrictKubernetesObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pinned helm (go run: minutes on a cold cache): make test runs it, make test-short does not")
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`secrets:
  mysqlDSN: "pushfan:secret@tcp(mariadb:3306)/pushfan?parseTime=true"
  adminTokens: admin-token
  metricsToken: metrics-token
  serviceAccountJSON: '{"type":"service_account"}'
serviceMonitor:
  enabled: true
config:
  yaml: |
    webhooks: []
`), 0o600); err != nil {
		t.Fatal(err)
	}
	chart, err := filepath.Abs(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	helm(t, "lint", "--strict", chart, "-f", values)
	r := decodeStrict(t, helm(t, "template", "pushfan", chart, "-f", values))
	// The defaults render too (no secrets given, no ServiceMonitor).
	decodeStrict(t, helm(t, "template", "pushfan", chart))

	if r.deployment == nil || r.service == nil || r.secret == nil || r.pdb == nil || r.job == nil || r.monitor == nil {
		t.Fatalf("missing objects: %+v", r)
	}
	image := makeVar(t, "IMAGE")
	pod := r.deployment.Spec.Template
	podLabels := pod.Labels
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("the Deployment runs %s, `make image` builds %s", c.Image, image)
	}
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("the Deployment's args are %v", c.Args)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("%s probe: %+v, want GET %s", name, p, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("startup", c.StartupProbe, "/healthz")
	checkSecurity(t, "the Deployment", pod.Spec, c)

	// The requests of docs/CAPACITY.md, and no CPU limit.
	for key, want := range capacityResources(t) {
		list := c.Resources.Requests
		if strings.HasPrefix(key, "limits.") {
			list = c.Resources.Limits
		}
		got, ok := list[corev1.ResourceName(key[strings.Index(key, ".")+1:])]
		if !ok || got.Cmp(want) != 0 {
			t.Errorf("resources %s: %v, docs/CAPACITY.md says %v", key, got.String(), want.String())
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit: throttling stalls checkpoints past the lease")
	}

	// The settings come from one ConfigMap (and the YAML from another),
	// the secrets from one Secret; none is set per container.
	envCM, yamlCM := r.configMaps["pushfan-env"], r.configMaps["pushfan-config"]
	if envCM == nil || yamlCM == nil {
		t.Fatalf("ConfigMaps: %v", r.configMaps)
	}
	if envCM.Data["PUSHFAN_RATE_LIMIT"] == "" || yamlCM.Data["pushfan.yaml"] != "webhooks: []\n" {
		t.Errorf("ConfigMaps' data: %v, %q", envCM.Data, yamlCM.Data["pushfan.yaml"])
	}
	var fromCM, fromSecret bool
	for _, e := range c.EnvFrom {
		fromCM = fromCM || e.ConfigMapRef != nil && e.ConfigMapRef.Name == envCM.Name
		fromSecret = fromSecret || e.SecretRef != nil && e.SecretRef.Name == r.secret.Name
	}
	if !fromCM || !fromSecret {
		t.Errorf("the container's envFrom: %+v", c.EnvFrom)
	}
	for _, e := range c.Env {
		if e.Name != "PUSHFAN_CONFIG" && e.Name != "GOOGLE_APPLICATION_CREDENTIALS" {
			t.Errorf("the container sets %s itself: every setting comes from the ConfigMap", e.Name)
		}
	}
	for _, key := range []string{"PUSHFAN_MYSQL_DSN", "PUSHFAN_ADMIN_TOKENS", "PUSHFAN_METRICS_TOKEN", "service-account.json"} {
		if r.secret.StringData[key] == "" {
			t.Errorf("the Secret has no %s", key)
		}
	}
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = m.MountPath
	}
	if mounted["config"] != "/etc/pushfan/pushfan.yaml" || mounted["service-account"] != "/etc/pushfan/secret" {
		t.Errorf("volume mounts: %v", mounted)
	}

	// The PDB and the Service select the pods; the Service's port is the container's.
	if !selects(r.pdb.Spec.Selector.MatchLabels, podLabels) || r.pdb.Spec.MaxUnavailable == nil {
		t.Errorf("the PDB: %+v, pods %v", r.pdb.Spec, podLabels)
	}
	if !selects(r.service.Spec.Selector, podLabels) || len(r.service.Spec.Ports) != 1 || r.service.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("the Service: %+v", r.service.Spec)
	}

	// The migration Job: a pre-upgrade hook running `migrate` from the same image.
	if !strings.Contains(r.job.Annotations["helm.sh/hook"], "pre-upgrade") {
		t.Errorf("the migration Job's hook: %q", r.job.Annotations["helm.sh/hook"])
	}
	jc := r.job.Spec.Template.Spec.Containers[0]
	if jc.Image != image || !slices.Equal(jc.Args, []string{"migrate"}) {
		t.Errorf("the migration Job runs %s %v", jc.Image, jc.Args)
	}
	checkSecurity(t, "the migration Job", r.job.Spec.Template.Spec, jc)

	// The ServiceMonitor scrapes /metrics with the metrics token.
	ep := r.monitor.Spec.Endpoints
	if len(ep) != 1 || ep[0].Path != "/metrics" || ep[0].Port != "http" || ep[0].Authorization.Credentials.Key != "PUSHFAN_METRICS_TOKEN" ||
		ep[0].Authorization.Credentials.Name != r.secret.Name || !selects(r.monitor.Spec.Selector.MatchLabels, r.service.Labels) {
		t.Errorf("the ServiceMonitor: %+v", r.monitor.Spec)
	}

	// The notes (rendered by a client-side dry run of an install) warn of
	// the shared budget and name the one place the settings come from.
	_, notes, ok := strings.Cut(helm(t, "install", "pushfan", chart, "-f", values, "--dry-run=client"), "NOTES:")
	if !ok {
		t.Fatal("helm install --dry-run=client printed no NOTES")
	}
	for _, want := range []string{"ONE RATE BUDGET PER APP, SHARED BY EVERY REPLICA", "PUSHFAN_RATE_LIMIT = " + envCM.Data["PUSHFAN_RATE_LIMIT"],
		"ONE place", "config.env", envCM.Name, yamlCM.Name} {
		if !strings.Contains(notes, want) {
			t.Errorf("the chart's notes do not say %q:\n%s", want, notes)
		}
	}
}

// checkSecurity asserts a non-root, read-only container.
func checkSecurity(t *testing.T, what string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	ps, cs := pod.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || cs == nil || cs.RunAsNonRoot == nil || !*cs.RunAsNonRoot ||
		cs.RunAsUser == nil || *cs.RunAsUser == 0 {
		t.Errorf("%s may run as root: pod %+v, container %+v", what, ps, cs)
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Errorf("%s: the root filesystem is writable or privileges can escalate: %+v", what, cs)
	}
}

// selects reports whether selector matches labels.
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
