// Package natscluster runs a test's own JetStream cluster: n nats-server
// processes clustered on loopback, each with its own store, which the test
// may kill, restart, pause and resume while Parley runs against them. The
// servers run natscluster's configuration, or a deployment's own with only
// their addresses and stores moved (StartWith). The shared NATS server is
// never touched, so a test that breaks its cluster disturbs no other test
// or checkout.
//
// The servers are real processes rather than servers embedded in the test
// because what is tested is what an operator sees: a SIGKILL leaves the
// store as a crashed server's, a SIGSTOP freezes a server that its peers
// and clients still believe connected.
//
// The binary is not the machine's: it is built from the nats-server
// version the modules pin (github.com/nats-io/nats-server/v2 in go.mod, the
// 2.9 line that Compose and Kubernetes run), once per machine and version,
// and kept in the user's cache directory. Debian's 2.9.10 does not leave a
// frozen peer while messages flow to it (nats-server issue 4014, fixed in
// 2.9.16): requests routed to the subscriptions of the clients that were
// on it are lost for as long as it is frozen.
package natscluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/proc"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// startWithin bounds how long a cluster, or one restarted server, may take
// to be ready on a loaded machine.
const startWithin = 60 * time.Second

// Cluster is a running cluster of nats-server processes.
type Cluster struct {
	t       testing.TB
	binary  string
	connect []nats.Option // Options.Connect
	servers []*Server
}

// Options run the servers from a deployment's own configuration rather
// than natscluster's (StartWith).
type Options struct {
	// ConfigFile is the configuration every server reads. Each server's
	// name, addresses, routes, store and pid file follow it on the
	// command line, where nats-server takes them over the file's.
	ConfigFile string
	// Args gives server i's arguments before those, as its deployment
	// passes them (a Kubernetes pod's); of a flag given twice, the last
	// counts.
	Args func(i int) []string
	// Connect is how the cluster's own clients (the wait for JetStream,
	// StreamInfo) authenticate, when ConfigFile requires it.
	Connect []nats.Option
}

// Server is one nats-server of a Cluster.
type Server struct {
	// Name is the server's name, as JetStream reports a stream's leader
	// and replicas.
	Name string
	// URL is the server's client address.
	URL string
	// Monitor is the server's monitoring address (http://127.0.0.1:<port>),
	// where /healthz and /jsz are.
	Monitor string

	cluster *Cluster
	args    []string // what nats-server is started with
	proc    *proc.Process
}

// Start runs n servers clustered with JetStream and waits until the cluster
// has a JetStream leader and every server answers as healthy. Everything
// is stopped and removed when t ends; when t has failed, the end of each
// server's log is written to t first.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with the servers run as opts says.
func StartWith(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	binary, err := serverBinary()
	if err != nil {
		t.Fatalf("natscluster: %v", err)
	}
	dir := t.TempDir()
	free := ports.Free(t, 3*n)
	c := &Cluster{t: t, binary: binary, connect: opts.Connect}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", free[3*i+1])
	}
	for i := range n {
		s := &Server{
			Name:    fmt.Sprintf("n%d", i+1),
			URL:     fmt.Sprintf("nats://127.0.0.1:%d", free[3*i]),
			Monitor: fmt.Sprintf("http://127.0.0.1:%d", free[3*i+2]),
			cluster: c,
		}
		serverDir := filepath.Join(dir, s.Name)
		if err := os.MkdirAll(serverDir, 0o755); err != nil {
			t.Fatalf("natscluster: %v", err)
		}
		s.proc = &proc.Process{
			Name:    s.Name,
			LogPath: filepath.Join(serverDir, "nats.log"),
			Command: func() *exec.Cmd { return exec.Command(binary, s.args...) },
		}
		c.servers = append(c.servers, s)
		if opts.ConfigFile != "" {
			if opts.Args != nil {
				s.args = opts.Args(i)
			}
			s.args = append(s.args, "-c", opts.ConfigFile, "-n", s.Name,
				"-a", "127.0.0.1", "-p", fmt.Sprint(free[3*i]), "-m", fmt.Sprint(free[3*i+2]),
				"-sd", filepath.Join(serverDir, "store"), "--pid", filepath.Join(serverDir, "nats.pid"),
				"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", free[3*i+1]), "--routes", strings.Join(routes, ","))
			continue
		}
		config := filepath.Join(serverDir, "nats.conf")
		s.args = []string{"-c", config}
		// ping_interval and ping_max: a peer that stops answering (frozen,
		// cut off) is left after 6-8 s, as Parley's clients leave a server
		// (natsx.Connect), rather than after the default 4 minutes or more,
		// during which its peers still route requests to the subscriptions
		// of the clients that were on it, and those requests are lost.
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
ping_interval: "2s"
ping_max: 3
jetstream {
  store_dir: %q
  max_memory_store: 256MB
  max_file_store: 2GB
}
cluster {
  name: parley-test
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, s.Name, free[3*i], free[3*i+2], filepath.Join(serverDir, "store"), free[3*i+1], strings.Join(routes, ", "))
		if err := os.WriteFile(config, []byte(conf), 0o644); err != nil {
			t.Fatalf("natscluster: %v", err)
		}
	}
	t.Cleanup(c.stop)
	for _, s := range c.servers {
		s.proc.Start(t)
	}
	for _, s := range c.servers {
		s.waitHealthy(t)
	}
	c.waitJetStream(t)
	return c
}

// serverModule is the Go module whose main package is nats-server.
const serverModule = "github.com/nats-io/nats-server/v2"

// built is this process's answer of serverBinary.
var built struct {
	once sync.Once
	path string
	err  error
}

// serverBinary returns the nats-server built from the version of
// serverModule the modules pin, building it the first time a machine asks
// for that version. A build goes under a name of its own and is renamed
// when whole, so processes building at once never run a part of one.
func serverBinary() (string, error) {
	built.once.Do(func() {
		built.path, built.err = buildServer()
	})
	return built.path, built.err
}

func buildServer() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", serverModule).Output()
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		return "", fmt.Errorf("the %s version go.mod pins: %v %s", serverModule, err, out)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "parley", "natscluster")
	path := filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	part := fmt.Sprintf("%s.%d.part", path, os.Getpid())
	if out, err := exec.Command("go", "build", "-o", part, serverModule).CombinedOutput(); err != nil {
		_ = os.Remove(part)
		return "", fmt.Errorf("build nats-server %s: %v\n%s", version, err, out)
	}
	return path, os.Rename(part, path)
}

// URL lists every server's client address, comma-separated, as NATS_URL
// takes it.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}

// Servers returns the cluster's servers, in the order they were started.
func (c *Cluster) Servers() []*Server { return c.servers }

// Server returns the server called name, or nil.
func (c *Cluster) Server(name string) *Server {
	for _, s := range c.servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// StreamInfo reads a stream's state and placement through any server that
// answers.
func (c *Cluster) StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	nc, err := nats.Connect(c.URL(), append([]nats.Option{nats.Timeout(2 * time.Second), nats.MaxReconnects(-1)}, c.connect...)...)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

// StreamLeader returns the server that leads stream, waiting until it has
// a leader.
func (c *Cluster) StreamLeader(t testing.TB, stream string) *Server {
	t.Helper()
	var leader *Server
	wait.For(t, startWithin, "a leader of stream "+stream, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := c.StreamInfo(ctx, stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errors.New("no leader")
		}
		if leader = c.Server(info.Cluster.Leader); leader == nil {
			return fmt.Errorf("leader %q is not one of the cluster's servers", info.Cluster.Leader)
		}
		return nil
	})
	return leader
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.proc.Stop(t, syscall.SIGKILL)
}

// Restart starts a killed server again, with its ports and store, and
// waits until it is healthy.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.proc.Start(t)
	s.waitHealthy(t)
}

// Pause freezes the server (SIGSTOP): its connections stay open but it
// answers nothing, as a server cut off from the network would look.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.proc.Signal(t, syscall.SIGSTOP)
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.proc.Signal(t, syscall.SIGCONT)
}

// Running reports whether the server's process is alive (paused counts).
func (s *Server) Running() bool { return s.proc.Running() }

// Clients returns the names of the client connections the server has
// (nats.Name: each Parley service names its own), read from its
// monitoring endpoint: for a test that waits until the services have left
// a server it paused for the others.
func (s *Server) Clients() ([]string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("%s/connz?limit=%d", s.Monitor, maxClients))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /connz: %s", s.Name, resp.Status)
	}
	var connz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&connz); err != nil {
		return nil, fmt.Errorf("%s /connz: %w", s.Name, err)
	}
	names := make([]string, len(connz.Connections))
	for i, c := range connz.Connections {
		names[i] = c.Name
	}
	return names, nil
}

// maxClients bounds the connections Clients lists: far more than a test
// opens.
const maxClients = 1024

// Pid is the server's process id while it runs (paused counts), else 0:
// for a benchmark that counts the CPU time the servers use.
func (s *Server) Pid() int {
	if !s.Running() {
		return 0
	}
	return s.proc.Pid()
}

// waitHealthy waits for the server's /healthz, which answers 200 once the
// server has joined JetStream and caught up with the cluster.
func (s *Server) waitHealthy(t testing.TB) {
	t.Helper()
	url := s.Monitor + "/healthz"
	client := &http.Client{Timeout: 2 * time.Second}
	wait.For(t, startWithin, s.Name+" healthy", func() error {
		if !s.Running() {
			return fmt.Errorf("%s exited: %s", s.Name, s.proc.LogTail())
		}
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz %d", resp.StatusCode)
		}
		return nil
	})
}

// waitJetStream waits until a client can use JetStream through the
// cluster, which needs an elected meta leader.
func (c *Cluster) waitJetStream(t testing.TB) {
	t.Helper()
	wait.For(t, startWithin, "the cluster's JetStream", func() error {
		nc, err := nats.Connect(c.URL(), append([]nats.Option{nats.Timeout(2 * time.Second)}, c.connect...)...)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err
	})
}

func (c *Cluster) stop() {
	for _, s := range c.servers {
		// A paused server takes no signal but SIGKILL.
		if err := s.proc.StopErr(syscall.SIGKILL); err != nil {
			c.t.Logf("natscluster: %v", err)
		}
	}
	if c.t.Failed() {
		for _, s := range c.servers {
			c.t.Logf("natscluster: end of %s's log:\n%s", s.Name, s.proc.LogTail())
		}
	}
}
