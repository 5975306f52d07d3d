package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
)

// k8sDir is deploy/k8s, from e2e/.
const k8sDir = "../deploy/k8s"

// longRequestsCall is a service whose service.Ports serve LongRequests:
// its HTTP requests in flight get service.LongRequestGrace on shutdown,
// others httpx.DefaultShutdownGrace.
var longRequestsCall = regexp.MustCompile(`LongRequests:\s*true`)

// measuredPeak is the most resident memory a service may reach under load
// by the benchmarks (docs/benchmarks.md "The whole pipeline": every
// service under 150 MB); memory limits
// must be above it.
var measuredPeak = resource.MustParse("150Mi")

// k8sService is what the manifests must hold for one service.
type k8sService struct {
	name    string
	port    int32
	addrVar string // the listen address setting, ":<port>"
	// rpcBound is how long the rpc server's stop may wait for a request
	// in flight that the manifests must let finish.
	rpcBound time.Duration
	// localNodePort is where the local overlay publishes a service people
	// reach from outside the cluster (the API, platform ingress, the
	// console) on every node; 0 for one that stays inside it.
	localNodePort int32
}

var k8sServices = []k8sService{
	{name: "gateway", port: 8080, addrVar: "GATEWAY_ADDR", rpcBound: rpc.StopGrace, localNodePort: 30080},
	{name: "messaging", port: 8081, addrVar: "MESSAGING_ADDR", rpcBound: rpc.StopGrace, localNodePort: 30081},
	{name: "webhook-dispatcher", port: 8082, addrVar: "DISPATCHER_ADDR", rpcBound: rpc.StopGrace},
	// A synchronous run may take the whole LongHandlerTimeout.
	{name: "flow-runner", port: 8083, addrVar: "FLOW_RUNNER_ADDR", rpcBound: rpc.LongHandlerTimeout},
	{name: "console", port: 8084, addrVar: "CONSOLE_ADDR", rpcBound: rpc.StopGrace, localNodePort: 30084},
}

// The shutdown steps (pkg/service App) a service's wiring registers, read
// from its sources so that a worker added later counts: its rpc server (one
// when its service.Ports have endpoints), the workers and consumers
// registered at the top level of its wiring (one that is registered on an
// error path only never runs beside the others), and the connections it
// opens.
var (
	rpcServerCall  = regexp.MustCompile(`Endpoints:\s*\[\]service\.Endpoint\{`)
	workerCall     = regexp.MustCompile(`(?m)^\tsvc\.(Go|OnStop)\(`)
	connectionCall = regexp.MustCompile(`service\.(Postgres|Redis|NATS)\(`)
)

// shutdownBound is s's longest shutdown, every step at its bound, from
// SIGTERM to exit: HTTP requests in flight, each rpc server's wait (and its
// step's second, App.Close), each worker (service.StepGrace) and each
// connection's close (service.CloseGrace).
func (s k8sService) shutdownBound(t *testing.T) time.Duration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "services", s.name, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var rpcs, workers, conns int
	httpBound := httpx.DefaultShutdownGrace
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rpcs += len(rpcServerCall.FindAll(src, -1))
		workers += len(workerCall.FindAll(src, -1))
		conns += len(connectionCall.FindAll(src, -1))
		if longRequestsCall.Match(src) {
			httpBound = service.LongRequestGrace
		}
	}
	if conns == 0 {
		t.Fatalf("%s: no connections found in its sources; has its wiring moved?", s.name)
	}
	return httpBound + time.Duration(rpcs)*(s.rpcBound+time.Second) +
		time.Duration(workers)*service.StepGrace + time.Duration(conns)*service.CloseGrace
}

// rendered is one kustomization built and decoded into typed objects.
type rendered struct {
	namespaces   []corev1.Namespace
	deployments  []appsv1.Deployment
	statefulSets []appsv1.StatefulSet
	services     []corev1.Service
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	pdbs         []policyv1.PodDisruptionBudget
	configMaps   map[string]corev1.ConfigMap
	secrets      map[string]corev1.Secret
	jobs         []batchv1.Job
}

// kustomizing serializes kustomize builds: kyaml keeps its OpenAPI schema
// in package globals, initialised lazily without a lock, so two builds at
// once (parallel tests) are a data race (kubernetes-sigs/kustomize#5805).
var kustomizing sync.Mutex

// renderK8s builds dir (under deploy/k8s) with the kustomize API, as
// `kubectl apply -k` would, and decodes every object strictly into its
// Kubernetes type: an unknown kind or field fails the test.
func renderK8s(t *testing.T, dir string) rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	kustomizing.Lock()
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(k8sDir, dir))
	kustomizing.Unlock()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := rendered{configMaps: map[string]corev1.ConfigMap{}, secrets: map[string]corev1.Secret{}}
	for _, res := range resources.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", res.CurId(), err)
		}
		kind := res.GetKind()
		var decodeErr error
		switch kind {
		case "Namespace":
			decodeErr = decodeInto(doc, &r.namespaces)
		case "Deployment":
			decodeErr = decodeInto(doc, &r.deployments)
		case "StatefulSet":
			decodeErr = decodeInto(doc, &r.statefulSets)
		case "Service":
			decodeErr = decodeInto(doc, &r.services)
		case "HorizontalPodAutoscaler":
			decodeErr = decodeInto(doc, &r.hpas)
		case "PodDisruptionBudget":
			decodeErr = decodeInto(doc, &r.pdbs)
		case "Job":
			decodeErr = decodeInto(doc, &r.jobs)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if decodeErr = yaml.UnmarshalStrict(doc, &cm); decodeErr == nil {
				r.configMaps[cm.Name] = cm
			}
		case "Secret":
			var s corev1.Secret
			if decodeErr = yaml.UnmarshalStrict(doc, &s); decodeErr == nil {
				r.secrets[s.Name] = s
			}
		default:
			decodeErr = fmt.Errorf("kind %s is not one this test knows", kind)
		}
		if decodeErr != nil {
			t.Errorf("%s %s: %v", kind, res.GetName(), decodeErr)
		}
	}
	return r
}

// decodeInto decodes doc strictly into a new T and appends it to list.
func decodeInto[T any](doc []byte, list *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

func (r rendered) deployment(name string) *appsv1.Deployment { return byName(r.deployments, name) }

// byName returns the object of list called name; nil if none.
func byName[T any, P interface {
	*T
	GetName() string
}](list []T, name string) *T {
	for i := range list {
		if P(&list[i]).GetName() == name {
			return &list[i]
		}
	}
	return nil
}

// hpaFor returns the autoscaler whose target is the Deployment name.
func (r rendered) hpaFor(name string) *autoscalingv2.HorizontalPodAutoscaler {
	for i := range r.hpas {
		if ref := r.hpas[i].Spec.ScaleTargetRef; ref.Kind == "Deployment" && ref.Name == name {
			return &r.hpas[i]
		}
	}
	return nil
}

// minReplicas is the fewest pods d runs: its autoscaler's minimum, or its
// replicas (1 when unset).
func (r rendered) minReplicas(d appsv1.Deployment) int32 {
	if h := r.hpaFor(d.Name); h != nil && h.Spec.MinReplicas != nil {
		return *h.Spec.MinReplicas
	}
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

// workload is what runs pods: a Deployment or a StatefulSet.
type workload struct {
	kind     string
	meta     metav1.ObjectMeta
	selector *metav1.LabelSelector
	template corev1.PodTemplateSpec
	replicas int32 // the fewest pods it runs
}

func (w workload) String() string { return w.kind + " " + w.meta.Name }

// workloads lists every Deployment and StatefulSet of the rendering.
func (r rendered) workloads() []workload {
	var ws []workload
	for _, d := range r.deployments {
		ws = append(ws, workload{"Deployment", d.ObjectMeta, d.Spec.Selector, d.Spec.Template, r.minReplicas(d)})
	}
	for _, s := range r.statefulSets {
		n := int32(1)
		if s.Spec.Replicas != nil {
			n = *s.Spec.Replicas
		}
		ws = append(ws, workload{"StatefulSet", s.ObjectMeta, s.Spec.Selector, s.Spec.Template, n})
	}
	return ws
}

func TestK8sBase(t *testing.T) {
	t.Parallel()
	r := renderK8s(t, "base")
	checkK8sRendering(t, r)
	for _, s := range k8sServices {
		d := r.deployment(s.name)
		if d == nil {
			continue // checkK8sRendering said so
		}
		// Horizontally scaled: at least two pods, so a budget and spread.
		if r.minReplicas(*d) < 2 {
			t.Errorf("%s runs %d pods at the least, want 2 or more", s.name, r.minReplicas(*d))
		}
	}
	// How a service is reached from outside depends on the cluster: the
	// base leaves every one inside it, and an overlay exposes them.
	for _, s := range r.services {
		if s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("base Service %s is %s, want ClusterIP (exposing it is an overlay's)", s.Name, s.Spec.Type)
		}
	}
	for _, name := range []string{"webhook-dispatcher", "flow-runner"} {
		if r.hpaFor(name) == nil {
			t.Errorf("no HorizontalPodAutoscaler for %s", name)
		}
	}
	// The base's Secrets hold placeholders, never values.
	for name, s := range r.secrets {
		for key, v := range s.Data {
			if !strings.Contains(string(v), "CHANGE-ME") {
				t.Errorf("base Secret %s: %s = %q is not a placeholder (CHANGE-ME)", name, key, v)
			}
		}
	}
	checkParleyctlOverrides(t, r)
}

func TestK8sLocalOverlay(t *testing.T) {
	t.Parallel()
	r := renderK8s(t, "overlays/local")
	checkK8sRendering(t, r)
	for _, s := range k8sServices {
		d := r.deployment(s.name)
		if d == nil {
			continue
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("local %s replicas = %v, want 1", s.name, d.Spec.Replicas)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "parley-"+s.name+":local" {
			t.Errorf("local %s image = %q, want parley-%s:local", s.name, img, s.name)
		}
		checkLocalNodePort(t, r, s)
	}
	if len(r.hpas) != 0 {
		t.Errorf("local overlay keeps %d autoscalers, want none", len(r.hpas))
	}
	for name, s := range r.secrets {
		for key, v := range s.Data {
			if strings.Contains(string(v), "CHANGE-ME") {
				t.Errorf("local Secret %s: %s is still the base's placeholder", name, key)
			}
		}
	}
	// PostgreSQL, Redis and a NATS cluster run in the overlay, under the
	// names the local settings give.
	for _, name := range []string{"postgres", "redis"} {
		if r.deployment(name) == nil {
			t.Errorf("local overlay has no %s Deployment", name)
		}
	}
	checkLocalNATS(t, r)
	for _, j := range r.jobs {
		checkPodEnv(t, r, "Job "+j.Name, j.Spec.Template.Spec, "parleyctl")
		checkNATSCreds(t, r, "Job "+j.Name, j.Spec.Template.Spec)
	}
	if len(r.jobs) != 1 || r.jobs[0].Spec.Template.Spec.Containers[0].Image != "parley-parleyctl:local" {
		t.Errorf("local overlay should have the one parleyctl-demo Job with parley-parleyctl:local, got %d Jobs", len(r.jobs))
	}
}

func (r rendered) configMapNames() []string {
	names := make([]string, 0, len(r.configMaps))
	for n := range r.configMaps {
		names = append(names, n)
	}
	return names
}

// generatedName finds the generated name (base-<hash>) of base among names.
func generatedName(t *testing.T, names []string, base string) string {
	t.Helper()
	hashed := regexp.MustCompile("^" + regexp.QuoteMeta(base) + "-[a-z0-9]{10}$")
	for _, n := range names {
		if n == base || hashed.MatchString(n) {
			return n
		}
	}
	t.Fatalf("no %s among %v", base, names)
	return ""
}

// checkK8sRendering holds what every rendering must: the five services
// each as a Deployment and a Service that fit together, with probes,
// resources, a grace period that covers their shutdown, a hardened security
// context, settings that exist and that they read, and NATS credentials
// mounted where NATS_CREDS points; autoscalers and disruption budgets that
// reach what they name.
func checkK8sRendering(t *testing.T, r rendered) {
	t.Helper()
	if len(r.namespaces) != 1 || r.namespaces[0].Name != "parley" {
		t.Errorf("namespaces = %d, want the one named parley", len(r.namespaces))
	}
	checkLabelsAndNamespace(t, r)
	for _, s := range k8sServices {
		d := r.deployment(s.name)
		if d == nil {
			t.Errorf("no Deployment %s", s.name)
			continue
		}
		checkServiceDeployment(t, r, s, *d)
	}
	for _, w := range r.workloads() {
		checkPodEnv(t, r, w.String(), w.template.Spec, w.meta.Name)
		for _, c := range w.template.Spec.Containers {
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
				t.Errorf("%s container %s: requests (cpu, memory) and a memory limit are all needed", w, c.Name)
			}
		}
		sel, err := metav1LabelSelector(w.selector)
		if err != nil || !sel.Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s: its selector does not select its own pods (%v)", w, err)
		}
	}
	checkServices(t, r)
	checkHPAs(t, r)
	checkPDBs(t, r)
}

// checkLabelsAndNamespace: every object in the parley namespace, every
// object and pod labelled part-of parley, and every workload named.
func checkLabelsAndNamespace(t *testing.T, r rendered) {
	t.Helper()
	type object struct {
		kind, name, namespace string
		labels                map[string]string
	}
	var objects []object
	for _, w := range r.workloads() {
		objects = append(objects, object{w.kind, w.meta.Name, w.meta.Namespace, w.meta.Labels},
			object{"pod of " + w.kind, w.meta.Name, w.meta.Namespace, w.template.Labels})
	}
	for _, s := range r.services {
		objects = append(objects, object{"Service", s.Name, s.Namespace, s.Labels})
	}
	for _, h := range r.hpas {
		objects = append(objects, object{"HorizontalPodAutoscaler", h.Name, h.Namespace, h.Labels})
	}
	for _, p := range r.pdbs {
		objects = append(objects, object{"PodDisruptionBudget", p.Name, p.Namespace, p.Labels})
	}
	for _, c := range r.configMaps {
		objects = append(objects, object{"ConfigMap", c.Name, c.Namespace, c.Labels})
	}
	for _, s := range r.secrets {
		objects = append(objects, object{"Secret", s.Name, s.Namespace, s.Labels})
	}
	for _, j := range r.jobs {
		objects = append(objects, object{"Job", j.Name, j.Namespace, j.Labels},
			object{"pod of Job", j.Name, j.Namespace, j.Spec.Template.Labels})
	}
	for _, o := range objects {
		if o.namespace != "parley" {
			t.Errorf("%s %s is in namespace %q, want parley", o.kind, o.name, o.namespace)
		}
		if o.labels["app.kubernetes.io/part-of"] != "parley" {
			t.Errorf("%s %s lacks app.kubernetes.io/part-of: parley", o.kind, o.name)
		}
		isWorkload := o.kind != "ConfigMap" && o.kind != "Secret"
		if isWorkload && o.labels["app.kubernetes.io/name"] == "" {
			t.Errorf("%s %s lacks app.kubernetes.io/name", o.kind, o.name)
		}
	}
}

// checkServiceDeployment holds what one of Parley's services needs.
func checkServiceDeployment(t *testing.T, r rendered, s k8sService, d appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Errorf("%s: %d containers, want 1", s.name, len(pod.Containers))
		return
	}
	c := pod.Containers[0]
	if !strings.HasPrefix(c.Image, "parley-"+s.name+":") || strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("%s image = %q, want parley-%s:<a version> (the kustomize images entry sets it)", s.name, c.Image, s.name)
	}

	// The port the service listens on is the one the container declares.
	if !hasPort(c, intstr.FromInt32(s.port)) || !hasPort(c, intstr.FromString("http")) || portNumber(c, intstr.FromString("http")) != s.port {
		t.Errorf("%s: container ports %v, want http: %d", s.name, c.Ports, s.port)
	}
	if addr := envValue(c, s.addrVar); addr != fmt.Sprintf(":%d", s.port) {
		t.Errorf("%s: %s = %q, want \":%d\" (the declared port, all interfaces)", s.name, s.addrVar, addr, s.port)
	}

	// Probes: alive on /healthz, ready on /readyz, on its http port.
	checkProbes(t, s.name, c, intstr.FromString("http"), probePaths{startup: "/healthz", readiness: "/readyz", liveness: "/healthz"})

	// Resources: requests, and limits above what the benchmarks measured.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[name], c.Resources.Limits[name]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: %s request %s, limit %s: want both, the request at most the limit", s.name, name, req.String(), lim.String())
		}
	}
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.Cmp(measuredPeak) < 0 {
		t.Errorf("%s: memory limit %s is under the %s the benchmarks allow for", s.name, lim.String(), measuredPeak.String())
	}

	// The grace period covers the preStop pause and the whole shutdown.
	var pause time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("%s: no preStop sleep before SIGTERM", s.name)
	} else {
		pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	bound := s.shutdownBound(t)
	grace := 30 * time.Second // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if grace < pause+bound {
		t.Errorf("%s: terminationGracePeriodSeconds = %s, want at least %s (preStop %s + shutdown %s)",
			s.name, grace, pause+bound, pause, bound)
	}

	// Non-root (the distroless :nonroot user), read-only, no capabilities,
	// no escalation.
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532:
		t.Errorf("%s: the pod must run as non-root user 65532, the images' user", s.name)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: the pod has no RuntimeDefault seccomp profile", s.name)
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: the container may escalate privileges", s.name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: the root filesystem is writable", s.name)
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Errorf("%s: capabilities %v, want all dropped and none added", s.name, sc.Capabilities)
	}

	checkNATSCreds(t, r, s.name, pod)
}

// probePaths are the paths a container's HTTP probes must ask.
type probePaths struct{ startup, readiness, liveness string }

// checkProbes: c has an HTTP startup, readiness and liveness probe, each on
// its path of want and on port, one that c declares.
func checkProbes(t *testing.T, what string, c corev1.Container, port intstr.IntOrString, want probePaths) {
	t.Helper()
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, want.startup}, {"readiness", c.ReadinessProbe, want.readiness}, {"liveness", c.LivenessProbe, want.liveness}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("%s: no HTTP %s probe", what, p.kind)
		case p.probe.HTTPGet.Path != p.path:
			t.Errorf("%s: %s probe on %s, want %s", what, p.kind, p.probe.HTTPGet.Path, p.path)
		case portNumber(c, port) == 0 || portNumber(c, p.probe.HTTPGet.Port) != portNumber(c, port):
			t.Errorf("%s: %s probe on port %s, want %s (a port the container declares)", what, p.kind, p.probe.HTTPGet.Port.String(), port.String())
		}
	}
}

// checkNATSCreds: NATS_CREDS names a file inside a mounted Secret that has
// it, and no other way to authenticate to NATS is set beside it.
func checkNATSCreds(t *testing.T, r rendered, what string, pod corev1.PodSpec) {
	t.Helper()
	c := pod.Containers[0]
	creds := envValue(c, "NATS_CREDS")
	if creds == "" {
		t.Errorf("%s: NATS_CREDS is not set", what)
		return
	}
	for _, other := range []string{"NATS_USER", "NATS_PASSWORD", "NATS_TOKEN"} {
		if hasEnv(c, other) {
			t.Errorf("%s: %s beside NATS_CREDS (the service refuses more than one way)", what, other)
		}
	}
	dir, file := path.Split(creds)
	v := volumeAt(pod, c, dir)
	switch {
	case v == nil:
		t.Errorf("%s: nothing is mounted at %s, where NATS_CREDS %s points", what, dir, creds)
	case v.Secret == nil:
		t.Errorf("%s: NATS_CREDS %s is mounted from volume %s, which is not a Secret", what, creds, v.Name)
	default:
		key := keyFor(v.Secret.Items, file)
		s, ok := r.secrets[v.Secret.SecretName]
		if !ok {
			t.Errorf("%s: NATS_CREDS is mounted from Secret %s, which is not in the rendering", what, v.Secret.SecretName)
		} else if len(s.Data[key]) == 0 {
			t.Errorf("%s: Secret %s has no %s for NATS_CREDS %s", what, s.Name, key, creds)
		}
	}
}

// volumeAt returns the pod's volume that container c mounts at dir; nil if
// none.
func volumeAt(pod corev1.PodSpec, c corev1.Container, dir string) *corev1.Volume {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				return &pod.Volumes[i]
			}
		}
	}
	return nil
}

// keyFor is the key of a ConfigMap or Secret volume that appears as file:
// the one items maps to it, else file itself.
func keyFor(items []corev1.KeyToPath, file string) string {
	for _, item := range items {
		if item.Path == file {
			return item.Key
		}
	}
	return file
}

// checkPodEnv: every variable taken from a ConfigMap or Secret names one in
// the rendering, and a key it has; and every variable set is one the
// program reads (a misspelt name is silently ignored otherwise).
func checkPodEnv(t *testing.T, r rendered, what string, pod corev1.PodSpec, program string) {
	t.Helper()
	reads := settingsRead(t, program)
	for _, c := range pod.Containers {
		var set []string
		for _, e := range c.Env {
			set = append(set, e.Name)
			if e.ValueFrom == nil {
				continue
			}
			switch ref := e.ValueFrom; {
			case ref.SecretKeyRef != nil:
				s, ok := r.secrets[ref.SecretKeyRef.Name]
				if !ok {
					t.Errorf("%s: %s from Secret %s, which is not in the rendering", what, e.Name, ref.SecretKeyRef.Name)
				} else if _, ok := s.Data[ref.SecretKeyRef.Key]; !ok {
					t.Errorf("%s: %s from Secret %s key %s, which it does not have", what, e.Name, s.Name, ref.SecretKeyRef.Key)
				}
			case ref.ConfigMapKeyRef != nil:
				m, ok := r.configMaps[ref.ConfigMapKeyRef.Name]
				if !ok {
					t.Errorf("%s: %s from ConfigMap %s, which is not in the rendering", what, e.Name, ref.ConfigMapKeyRef.Name)
				} else if _, ok := m.Data[ref.ConfigMapKeyRef.Key]; !ok {
					t.Errorf("%s: %s from ConfigMap %s key %s, which it does not have", what, e.Name, m.Name, ref.ConfigMapKeyRef.Key)
				}
			}
		}
		for _, from := range c.EnvFrom {
			switch {
			case from.ConfigMapRef != nil:
				m, ok := r.configMaps[from.ConfigMapRef.Name]
				if !ok {
					t.Errorf("%s: settings from ConfigMap %s, which is not in the rendering", what, from.ConfigMapRef.Name)
				}
				for k := range m.Data {
					set = append(set, k)
				}
			case from.SecretRef != nil:
				s, ok := r.secrets[from.SecretRef.Name]
				if !ok {
					t.Errorf("%s: settings from Secret %s, which is not in the rendering", what, from.SecretRef.Name)
				}
				for k := range s.Data {
					set = append(set, k)
				}
			}
		}
		if reads == nil {
			continue // not one of Parley's programs
		}
		for _, name := range set {
			if !reads[name] {
				t.Errorf("%s: %s is set, but %s does not read it", what, name, program)
			}
		}
	}
}

// settingVar finds the variables a program reads: its config's env tags,
// and logging's os.Getenv calls.
var settingVar = regexp.MustCompile(`env:"([A-Z0-9_]+)"|os\.Getenv\("([A-Z0-9_]+)"\)`)

// sharedSettings are the settings structs of pkg/ a service's config may
// embed, and the file declaring each: a service reads their variables
// only when its config embeds them.
var sharedSettings = map[string]string{
	"httpx.Proxying": "pkg/httpx/client.go",
}

// settingsRead returns the environment variables program (a directory of
// services/) reads, from the sources of its config, the shared one, the
// settings of pkg/ it embeds (sharedSettings) and logging; nil for a
// program that is not Parley's.
func settingsRead(t *testing.T, program string) map[string]bool {
	t.Helper()
	own := filepath.Join("..", "services", program, "internal", "config", "config.go")
	if _, err := os.Stat(own); err != nil {
		return nil
	}
	shared, err := filepath.Glob(filepath.Join("..", "pkg", "logging", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{own, filepath.Join("..", "pkg", "config", "config.go")}, shared...)
	ownSrc, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	for embedded, file := range sharedSettings {
		if bytes.Contains(ownSrc, []byte("\t"+embedded+"\n")) {
			files = append(files, filepath.Join("..", file))
		}
	}
	reads := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range settingVar.FindAllStringSubmatch(string(src), -1) {
			reads[m[1]+m[2]] = true
		}
	}
	return reads
}

// checkServices: every Service selects the pods of a Deployment or a
// StatefulSet, on ports their container declares.
func checkServices(t *testing.T, r rendered) {
	t.Helper()
	for _, s := range r.services {
		target, ok := r.selected(t, s)
		if !ok {
			continue
		}
		for _, p := range s.Spec.Ports {
			if !hasPort(target.template.Spec.Containers[0], p.TargetPort) {
				t.Errorf("Service %s port %s: target %s is not a port of %s", s.Name, p.Name, p.TargetPort.String(), target)
			}
		}
	}
	for _, svc := range k8sServices {
		found := false
		for _, s := range r.services {
			found = found || s.Name == svc.name
		}
		if !found {
			t.Errorf("no Service %s", svc.name)
		}
	}
}

// checkHPAs: every autoscaler targets an existing Deployment that leaves
// its replica count to it and requests the CPU its utilization is a share
// of.
func checkHPAs(t *testing.T, r rendered) {
	t.Helper()
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		d := r.deployment(ref.Name)
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || d == nil {
			t.Errorf("HorizontalPodAutoscaler %s targets %s %s %s, which is not a Deployment here", h.Name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		if d.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas, which every apply would reset under its autoscaler", d.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas <= *h.Spec.MinReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: min %v, max %d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		cpu := false
		for _, m := range h.Spec.Metrics {
			cpu = cpu || (m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU)
		}
		if !cpu {
			t.Errorf("HorizontalPodAutoscaler %s does not scale on CPU", h.Name)
		}
	}
}

// checkPDBs: every budget selects an existing workload's pods, and every
// workload that runs more than one pod has one.
func checkPDBs(t *testing.T, r rendered) {
	t.Helper()
	covered := map[string]bool{}
	for _, p := range r.pdbs {
		sel, err := metav1LabelSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", p.Name, err)
			continue
		}
		selects := false
		for _, w := range r.workloads() {
			if sel.Matches(labels.Set(w.template.Labels)) {
				covered[w.String()], selects = true, true
			}
		}
		if !selects {
			t.Errorf("PodDisruptionBudget %s selects no workload's pods", p.Name)
		}
	}
	for _, w := range r.workloads() {
		if w.replicas > 1 && !covered[w.String()] {
			t.Errorf("%s runs %d pods and has no PodDisruptionBudget", w, w.replicas)
		}
		if w.replicas == 1 && covered[w.String()] {
			t.Errorf("%s runs one pod under a PodDisruptionBudget, which would only block draining its node", w)
		}
	}
}

// selected returns the workload whose pods Service s selects; t fails when
// s selects nothing, or pods no workload runs.
func (r rendered) selected(t *testing.T, s corev1.Service) (workload, bool) {
	t.Helper()
	if len(s.Spec.Selector) == 0 {
		t.Errorf("Service %s selects nothing", s.Name)
		return workload{}, false
	}
	for _, w := range r.workloads() {
		if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
			return w, true
		}
	}
	t.Errorf("Service %s selects %v, which no workload's pods carry", s.Name, s.Spec.Selector)
	return workload{}, false
}

// checkLocalNodePort: in the local overlay, a service people reach from
// outside is a NodePort Service on s.localNodePort, forwarding to its http
// port; the others stay ClusterIP.
func checkLocalNodePort(t *testing.T, r rendered, s k8sService) {
	t.Helper()
	for _, svc := range r.services {
		if svc.Name != s.name {
			continue
		}
		if s.localNodePort == 0 {
			if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("local Service %s is %s, want ClusterIP: it serves the cluster only", svc.Name, svc.Spec.Type)
			}
			return
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) != 1 ||
			svc.Spec.Ports[0].NodePort != s.localNodePort || svc.Spec.Ports[0].Port != s.port {
			t.Errorf("local Service %s: type %s, ports %+v; want NodePort %d to port %d", svc.Name, svc.Spec.Type, svc.Spec.Ports, s.localNodePort, s.port)
		}
		return
	}
	// A missing Service is checkServices' to report.
}

// checkParleyctlOverrides: the pod overrides `kubectl run` is given for
// parleyctl (docs/operations.md "parleyctl in the cluster") decode into a
// Pod and mount the base's NATS
// credentials where NATS_CREDS points.
func checkParleyctlOverrides(t *testing.T, r rendered) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(k8sDir, "parleyctl-overrides.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(raw, &pod); err != nil {
		t.Fatalf("parleyctl-overrides.json: %v", err)
	}
	if !json.Valid(raw) {
		t.Fatal("parleyctl-overrides.json is not JSON")
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "parleyctl" {
		t.Fatal("parleyctl-overrides.json: want the one container parleyctl (kubectl run's name for it)")
	}
	checkPodEnv(t, r, "parleyctl-overrides.json", pod.Spec, "parleyctl")
	checkNATSCreds(t, r, "parleyctl-overrides.json", pod.Spec)
}

func metav1LabelSelector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return nil, fmt.Errorf("no selector")
	}
	return metav1.LabelSelectorAsSelector(sel)
}

func hasPort(c corev1.Container, port intstr.IntOrString) bool {
	return portNumber(c, port) != 0
}

// portNumber resolves port (a number or a name) against the container's
// declared ports; 0 when it declares no such port.
func portNumber(c corev1.Container, port intstr.IntOrString) int32 {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort
		}
	}
	return 0
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
