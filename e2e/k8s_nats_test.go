package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// The local overlay's NATS is three servers clustered with JetStream
// (deploy/k8s/overlays/local/nats.yaml and nats.conf): checkLocalNATS reads
// the rendering, TestK8sLocalNATSCluster runs it.

// localNATS is the local overlay's NATS StatefulSet, its server container,
// and the nats.conf that container is given, parsed by nats-server's own
// parser (the server library, of the 2.9 line the image runs).
type localNATS struct {
	set       appsv1.StatefulSet
	container corev1.Container
	conf      string
	opts      *natsserver.Options
}

// localNATSOf finds the local overlay's NATS in r and parses its nats.conf.
func localNATSOf(t *testing.T, r rendered) localNATS {
	t.Helper()
	var n localNATS
	i := slices.IndexFunc(r.statefulSets, func(s appsv1.StatefulSet) bool { return s.Name == "nats" })
	if i < 0 {
		t.Fatal("the local overlay has no nats StatefulSet")
	}
	n.set = r.statefulSets[i]
	pod := n.set.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("StatefulSet nats: %d containers, want the one nats-server", len(pod.Containers))
	}
	n.container = pod.Containers[0]

	confPath := argValue(n.container.Args, "-c", "--config")
	dir, file := path.Split(confPath)
	vol := volumeAt(pod, n.container, dir)
	if confPath == "" || vol == nil || vol.ConfigMap == nil {
		t.Fatalf("StatefulSet nats: args %v name no configuration file (-c) mounted from a ConfigMap", n.container.Args)
	}
	conf, ok := r.configMaps[vol.ConfigMap.Name].Data[keyFor(vol.ConfigMap.Items, file)]
	if !ok {
		t.Fatalf("StatefulSet nats: ConfigMap %s has no %s for -c %s", vol.ConfigMap.Name, file, confPath)
	}
	tmp := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(tmp, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := natsserver.ProcessConfigFile(tmp)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n.conf, n.opts = conf, opts
	return n
}

// servers is how many nats-server the StatefulSet runs.
func (n localNATS) servers() int {
	if n.set.Spec.Replicas == nil {
		return 1
	}
	return int(*n.set.Spec.Replicas)
}

// checkLocalNATS: the local overlay's NATS is a cluster of three servers,
// each reaching the others, with JetStream on a volume of its own, probed
// as a cluster member must be, leaving in lame duck mode, under a budget
// that keeps JetStream's quorum; and every service reaches the cluster and
// keeps three replicas of every stream.
func checkLocalNATS(t *testing.T, r rendered) {
	t.Helper()
	n := localNATSOf(t, r)
	set, c, o := n.set, n.container, n.opts
	servers := n.servers()

	// Three: a stream's three replicas, one on each server, two of them
	// its quorum.
	if servers != 3 {
		t.Errorf("StatefulSet nats runs %d servers, want 3", servers)
	}
	if set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet nats: podManagementPolicy %q, want Parallel: started one at a time, the first server would wait for ever for the second", set.Spec.PodManagementPolicy)
	}
	// Each server is named after its pod, stable across restarts, as
	// JetStream's cluster needs; the one nats.conf serves every pod.
	if name := argValue(c.Args, "-n", "--name"); name != "$(POD_NAME)" || !podNameIn(c, "POD_NAME") {
		t.Errorf("nats: --name %q, want $(POD_NAME) with POD_NAME the pod's metadata.name", name)
	}
	if o.ServerName != "" {
		t.Errorf("nats.conf names the server %q: every pod reads it, and each needs its own name", o.ServerName)
	}

	// nats.conf listens where the container's ports say.
	for _, p := range []struct {
		name string
		conf int
	}{{"client", o.Port}, {"cluster", o.Cluster.Port}, {"monitor", o.HTTPPort}} {
		if got := portNumber(c, intstr.FromString(p.name)); got == 0 || int(got) != p.conf {
			t.Errorf("nats: nats.conf's %s port is %d, the container's %d", p.name, p.conf, got)
		}
	}

	// Clustered: a route to each pod, by its name under the headless
	// Service, which names the pods before they are ready (they become
	// ready only once they have found one another).
	headless := r.service(set.Spec.ServiceName)
	switch {
	case headless == nil:
		t.Errorf("StatefulSet nats: no Service %q (its serviceName)", set.Spec.ServiceName)
	case headless.Spec.ClusterIP != corev1.ClusterIPNone:
		t.Errorf("Service %s: clusterIP %q, want None (headless: a name per pod)", headless.Name, headless.Spec.ClusterIP)
	case !headless.Spec.PublishNotReadyAddresses:
		t.Errorf("Service %s does not publish pods that are not ready: the servers could never find one another", headless.Name)
	default:
		if w, ok := r.selected(t, *headless); ok && w.String() != "StatefulSet nats" {
			t.Errorf("Service %s selects the pods of %s, not of StatefulSet nats", headless.Name, w)
		}
	}
	if o.Cluster.Name == "" {
		t.Error("nats.conf: the cluster has no name")
	}
	want, got := map[string]bool{}, map[string]bool{}
	for i := range servers {
		want[fmt.Sprintf("nats://%s-%d.%s:%d", set.Name, i, set.Spec.ServiceName, o.Cluster.Port)] = true
	}
	for _, u := range o.Routes {
		got[u.String()] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("nats.conf routes %v, want one to each pod: %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	// JetStream, on the pod's own volume, its file store bounded under it.
	if !o.JetStream {
		t.Error("nats.conf: JetStream is off")
	}
	if o.StoreDir != "" {
		t.Errorf("nats.conf sets store_dir %q, which nats-server refuses beside the --store_dir of the pod's args", o.StoreDir)
	}
	storeDir := argValue(c.Args, "-sd", "--store_dir")
	claim := claimAt(set, c, storeDir)
	if claim == nil {
		t.Errorf("nats: --store_dir %q is not a volume from the StatefulSet's volumeClaimTemplates", storeDir)
	} else {
		size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if o.JetStreamMaxStore <= 0 || o.JetStreamMaxStore >= size.Value() {
			t.Errorf("nats.conf: max_file_store %d, want set and under the %s volume", o.JetStreamMaxStore, size.String())
		}
		if !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
			t.Errorf("nats: volume claim %s: access modes %v, want ReadWriteOnce (one server's own)", claim.Name, claim.Spec.AccessModes)
		}
	}

	// Started once current with JetStream's leader (the whole /healthz),
	// then ready and alive while it serves with JetStream on.
	checkProbes(t, "nats", c, intstr.FromString("monitor"), probePaths{
		startup: "/healthz", readiness: "/healthz?js-enabled-only=true", liveness: "/healthz?js-enabled-only=true"})

	// Leaving, lame duck mode (its pid file names the process to signal),
	// within the grace period.
	ldm := []string{"nats-server", "--signal", "ldm=" + o.PidFile}
	if o.PidFile == "" || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		!slices.Equal(c.Lifecycle.PreStop.Exec.Command, ldm) {
		t.Errorf("nats: preStop is not %v, lame duck mode", ldm)
	}
	grace := 30 * time.Second
	if g := set.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := o.LameDuckGracePeriod + o.LameDuckDuration; grace < need {
		t.Errorf("nats: terminationGracePeriodSeconds %s, under lame duck mode's %s", grace, need)
	}

	// A drain takes no more servers at once than leave a quorum.
	quorum := servers/2 + 1
	for _, p := range r.pdbs {
		if sel, err := metav1LabelSelector(p.Spec.Selector); err != nil || !sel.Matches(labels.Set(set.Spec.Template.Labels)) {
			continue // checkPDBs reports a broken selector
		}
		unavailable := -1
		switch {
		case p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.Type == intstr.Int:
			unavailable = p.Spec.MaxUnavailable.IntValue()
		case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int:
			unavailable = servers - p.Spec.MinAvailable.IntValue()
		}
		if unavailable < 1 || servers-unavailable < quorum {
			t.Errorf("PodDisruptionBudget %s lets %d of %d servers go at once, want at least one and a quorum (%d) left", p.Name, unavailable, servers, quorum)
		}
	}

	// Every service reaches the cluster and keeps a replica of every
	// stream on each server (messaging, the dispatcher and the flow-runner
	// create them; the others read the setting too).
	for _, s := range k8sServices {
		d := r.deployment(s.name)
		if d == nil {
			continue
		}
		sc := d.Spec.Template.Spec.Containers[0]
		if got := envSetting(r, sc, "EVENTS_REPLICAS"); got != strconv.Itoa(servers) {
			t.Errorf("%s: EVENTS_REPLICAS = %q, want %d, one replica on each NATS server", s.name, got, servers)
		}
		checkNATSURL(t, r, n, s.name, envSetting(r, sc, "NATS_URL"))
	}
	for _, j := range r.jobs {
		checkNATSURL(t, r, n, "Job "+j.Name, envSetting(r, j.Spec.Template.Spec.Containers[0], "NATS_URL"))
	}
}

// checkNATSURL: every server of NATS_URL (comma-separated) is a NATS
// server of n on its client port: a Service in front of its pods, or one
// pod by name under its headless Service.
func checkNATSURL(t *testing.T, r rendered, n localNATS, what, natsURL string) {
	t.Helper()
	if natsURL == "" {
		t.Errorf("%s: NATS_URL is not set", what)
		return
	}
	for _, s := range strings.Split(natsURL, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Scheme != "nats" {
			t.Errorf("%s: NATS_URL server %q is not a nats:// URL", what, s)
			continue
		}
		if !n.reaches(t, r, u.Hostname(), u.Port()) {
			t.Errorf("%s: NATS_URL server %s is not the client port of a NATS server", what, s)
		}
	}
}

// reaches reports whether host:port, in the cluster's DNS, is the client
// port of n's servers: a Service in front of its pods, or one pod by name
// under its headless Service (nats-0.nats-headless).
func (n localNATS) reaches(t *testing.T, r rendered, host, port string) bool {
	t.Helper()
	client := strconv.Itoa(int(portNumber(n.container, intstr.FromString("client"))))
	for _, suffix := range []string{".cluster.local", ".svc", "." + n.set.Namespace} {
		host = strings.TrimSuffix(host, suffix)
	}
	name, sub, _ := strings.Cut(host, ".")
	if sub != "" {
		i, err := strconv.Atoi(strings.TrimPrefix(name, n.set.Name+"-"))
		return sub == n.set.Spec.ServiceName && strings.HasPrefix(name, n.set.Name+"-") && err == nil &&
			i >= 0 && i < n.servers() && port == client
	}
	svc := r.service(name)
	if svc == nil {
		return false
	}
	if w, ok := r.selected(t, *svc); !ok || w.String() != "StatefulSet "+n.set.Name {
		return false
	}
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == port && strconv.Itoa(int(portNumber(n.container, p.TargetPort))) == client {
			return true
		}
	}
	return false
}

// TestK8sLocalNATSCluster runs the local overlay's NATS as its StatefulSet
// does: three nats-server processes of the machine's binary
// (pkg/testenv/natscluster) reading the overlay's nats.conf, with each
// pod's arguments, their addresses and stores alone moved to loopback and
// the test's directory. Each server passes the pod's startup and
// readiness probes; a client connecting to one server as the services do
// (natsx.Connect, the overlay's credentials file, one address as their
// NATS_URL gives) learns the other two from it; the events stream,
// created as the services create it with the replicas the overlay gives
// them, is held by the three, every replica current; and without the
// credentials the cluster refuses the connection.
func TestK8sLocalNATSCluster(t *testing.T) {
	t.Parallel()
	r := renderK8s(t, "overlays/local")
	n := localNATSOf(t, r)
	creds := r.secrets["parley-nats-creds"].Data["nats.creds"]
	if len(creds) == 0 {
		t.Fatal("the local overlay's parley-nats-creds has no nats.creds")
	}
	dir := t.TempDir()
	confPath, credsPath := filepath.Join(dir, "nats.conf"), filepath.Join(dir, "nats.creds")
	if err := os.WriteFile(confPath, []byte(n.conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credsPath, creds, 0o600); err != nil {
		t.Fatal(err)
	}

	servers := n.servers()
	cluster := natscluster.StartWith(t, servers, natscluster.Options{
		ConfigFile: confPath,
		Args:       func(i int) []string { return podArgs(n.container, fmt.Sprintf("%s-%d", n.set.Name, i)) },
		Connect:    []nats.Option{nats.UserCredentials(credsPath)},
	})
	// Started, every server is healthy: the pod's probes pass.
	for _, s := range cluster.Servers() {
		for _, p := range []*corev1.Probe{n.container.StartupProbe, n.container.ReadinessProbe} {
			if code := probe(s.Monitor + p.HTTPGet.Path); code != http.StatusOK {
				t.Errorf("%s: %s answers %d, want 200", s.Name, p.HTTPGet.Path, code)
			}
		}
	}

	messaging := r.deployment("messaging")
	if messaging == nil {
		t.Fatal("the local overlay has no messaging Deployment")
	}
	replicas, err := strconv.Atoi(envSetting(r, messaging.Spec.Template.Spec.Containers[0], "EVENTS_REPLICAS"))
	if err != nil {
		t.Fatalf("messaging's EVENTS_REPLICAS: %v", err)
	}
	conn := config.Connections{
		NATSURL:             cluster.Servers()[0].URL,
		NATSSecurity:        config.NATSSecurity{NATSCreds: credsPath},
		EventsStream:        "EVENTS",
		EventsSubjectPrefix: "events",
		EventsReplicas:      replicas,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := natsx.Connect(ctx, conn, "k8s-test", zap.NewNop())
	if err != nil {
		t.Fatalf("connect with the overlay's credentials: %v", err)
	}
	defer nc.Close()
	wait.For(t, 10*time.Second, "the client learns the other servers from the one it reached", func() error {
		if got := nc.DiscoveredServers(); len(got) != servers-1 {
			return fmt.Errorf("discovered %v", got)
		}
		return nil
	})

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	events := natsx.Events(conn)
	stream, err := events.Ensure(ctx, js)
	if err != nil {
		t.Fatalf("the events stream with %d replicas: %v", replicas, err)
	}
	if _, err := js.Publish(ctx, events.Subject("ws", "message.received"), []byte("{}")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	wait.For(t, 10*time.Second, "the stream's replicas all current", func() error {
		info, err := stream.Info(ctx)
		switch {
		case err != nil:
			return err
		case info.Config.Replicas != servers:
			return fmt.Errorf("%d replicas configured, want %d", info.Config.Replicas, servers)
		case info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != servers-1:
			return fmt.Errorf("cluster %+v: want a leader and %d other replicas", info.Cluster, servers-1)
		case info.State.Msgs != 1:
			return fmt.Errorf("%d messages, want 1", info.State.Msgs)
		}
		for _, p := range info.Cluster.Replicas {
			if !p.Current {
				return fmt.Errorf("replica %s is not current", p.Name)
			}
		}
		return nil
	})

	// Without them, the same servers refuse the connection.
	conn.NATSCreds = ""
	if nc, err := natsx.Connect(ctx, conn, "k8s-test", zap.NewNop()); err == nil {
		nc.Close()
		t.Fatal("the overlay's NATS let a client in without credentials")
	}
}

// envRef is a $(VAR) reference in a container's args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podArgs is c's args as the kubelet passes them in a pod named pod: each
// $(VAR) replaced by c's variable VAR, a literal or the pod's name (a
// reference it cannot resolve stays as it is, as the kubelet leaves it).
func podArgs(c corev1.Container, pod string) []string {
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = pod
		}
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			if v, ok := vars[envRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		})
	}
	return args
}

// argValue is the value of the last of flags (-f v or -f=v) in args; ""
// when none is given.
func argValue(args []string, flags ...string) string {
	v := ""
	for i, a := range args {
		for _, f := range flags {
			switch {
			case a == f && i+1 < len(args):
				v = args[i+1]
			case strings.HasPrefix(a, f+"="):
				v = strings.TrimPrefix(a, f+"=")
			}
		}
	}
	return v
}

// podNameIn reports whether c's variable name is its pod's name.
func podNameIn(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}
	}
	return false
}

// claimAt returns the claim template of set whose volume c mounts at dir;
// nil if none.
func claimAt(set appsv1.StatefulSet, c corev1.Container, dir string) *corev1.PersistentVolumeClaim {
	for _, m := range c.VolumeMounts {
		if dir == "" || path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for i, claim := range set.Spec.VolumeClaimTemplates {
			if claim.Name == m.Name {
				return &set.Spec.VolumeClaimTemplates[i]
			}
		}
	}
	return nil
}

// envSetting is the value container c is given for variable name, as
// Kubernetes resolves it: its own env entry (a literal, or a key of a
// ConfigMap or Secret), else the last of its envFrom ConfigMaps and
// Secrets to have it; "" when none does.
func envSetting(r rendered, c corev1.Container, name string) string {
	for _, e := range c.Env {
		switch ref := e.ValueFrom; {
		case e.Name != name:
		case ref == nil:
			return e.Value
		case ref.ConfigMapKeyRef != nil:
			return r.configMaps[ref.ConfigMapKeyRef.Name].Data[ref.ConfigMapKeyRef.Key]
		case ref.SecretKeyRef != nil:
			return string(r.secrets[ref.SecretKeyRef.Name].Data[ref.SecretKeyRef.Key])
		default:
			return "" // the pod's own fields: not a setting of the rendering
		}
	}
	v := ""
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			if s, ok := r.configMaps[from.ConfigMapRef.Name].Data[name]; ok {
				v = s
			}
		case from.SecretRef != nil:
			if s, ok := r.secrets[from.SecretRef.Name].Data[name]; ok {
				v = string(s)
			}
		}
	}
	return v
}

func (r rendered) service(name string) *corev1.Service { return byName(r.services, name) }
