package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// binDir holds the binaries TestMain builds once for every test.
var binDir string

var binaries = []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner", "parleyctl", "console"}

// gateways validates every request a test sends to one of its suite's
// gateways, and every answer, against the OpenAPI document (see
// pkg/testenv/apicheck): a mismatch fails the test whose gateway it was.
// TestMain puts it under http.DefaultClient; a test's own client to the
// gateway goes through gateways.Transport too (benchmarks' clients do
// not: the check would be measured with the gateway).
var gateways apicheck.Hosts

func TestMain(m *testing.M) {
	http.DefaultClient.Transport = gateways.Transport(nil)
	dir, err := os.MkdirTemp("", "parley-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, name := range binaries {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), ".")
		cmd.Dir = filepath.Join("..", "services", name)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", name, err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// suite is one running copy of Parley.
type suite struct {
	env           *testenv.Env
	environ       []string
	gatewayURL    string
	messagingURL  string
	dispatcherURL string
	flowRunnerURL string
	// own holds entries (KEY=VALUE) for one service's environment only,
	// after the shared ones, by service name.
	own map[string][]string
	// procs are the suite's own processes, by service name, for a test
	// that stops one of them (proc.kill).
	procs map[string]*proc
	// check validates the traffic to the suite's gateways (gateways).
	check *apicheck.Checker
}

// startSuite runs gateway, messaging, webhook-dispatcher and flow-runner in
// t's own environment and waits until each is ready. extra entries (KEY=VALUE) are
// added to every process's environment.
func startSuite(t testing.TB, extra ...string) *suite {
	t.Helper()
	return startSuiteOwn(t, nil, extra...)
}

// startSuiteOwn is startSuite where own, given the suite's environment,
// returns entries for one service's environment only (its database, Redis
// or NATS behind a proxy the test can cut, say); parleyctl and the test
// itself keep the shared ones.
func startSuiteOwn(t testing.TB, own func(service string, env *testenv.Env) []string, extra ...string) *suite {
	t.Helper()
	return startSuiteEnv(t, nil, own, extra...)
}

// startSuiteEnv is startSuiteOwn in an environment made with envOpts
// (testenv.Servers: the test's own PostgreSQL and Redis, which it may
// break; testenv.NATS: its own NATS cluster); parleyctl and the test use
// them too.
func startSuiteEnv(t testing.TB, envOpts []testenv.Option, own func(service string, env *testenv.Env) []string, extra ...string) *suite {
	t.Helper()
	env := testenv.New(t, envOpts...)
	port := ports.Free(t, 4)
	s := &suite{
		env:           env,
		gatewayURL:    fmt.Sprintf("http://127.0.0.1:%d", port[0]),
		messagingURL:  fmt.Sprintf("http://127.0.0.1:%d", port[1]),
		dispatcherURL: fmt.Sprintf("http://127.0.0.1:%d", port[2]),
		flowRunnerURL: fmt.Sprintf("http://127.0.0.1:%d", port[3]),
		own:           map[string][]string{},
		procs:         map[string]*proc{},
		check:         apicheck.New(t),
	}
	s.environ = append(append(os.Environ(), env.Environ()...),
		fmt.Sprintf("GATEWAY_ADDR=127.0.0.1:%d", port[0]),
		fmt.Sprintf("MESSAGING_ADDR=127.0.0.1:%d", port[1]),
		fmt.Sprintf("DISPATCHER_ADDR=127.0.0.1:%d", port[2]),
		fmt.Sprintf("FLOW_RUNNER_ADDR=127.0.0.1:%d", port[3]),
		"PUBLIC_BASE_URL="+s.gatewayURL,
		"MESSAGING_PUBLIC_URL="+s.messagingURL,
		"LOG_LEVEL=warn",
	)
	s.environ = append(s.environ, extra...)
	t.Cleanup(func() {
		t.Logf("apicheck: %d requests to the gateway validated against the OpenAPI document", s.check.Exchanges())
	})
	for i, name := range []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner"} {
		if own != nil {
			s.own[name] = own(name, env)
		}
		s.start(t, name, port[i])
	}
	return s
}

func (s *suite) start(t testing.TB, name string, port int) {
	t.Helper()
	s.procs[name] = s.launch(t, name, fmt.Sprintf("127.0.0.1:%d", port), append(append([]string(nil), s.environ...), s.own[name]...))
}

// proc is a service process of a suite: one of its own, or one started
// beside them with startExtra.
type proc struct {
	name   string
	addr   string // the service's *_ADDR: /readyz and /metrics
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// startExtra starts another instance of service name (its binary) with the
// suite's environment plus extra (KEY=VALUE, later entries win) on its own
// port, given as addrVar (DISPATCHER_ADDR, FLOW_RUNNER_ADDR), and waits
// until it serves /readyz. It shares the suite's database, Redis and NATS:
// a dispatcher joins the durable consumer, a flow-runner the rpc queue
// group.
func (s *suite) startExtra(t testing.TB, name, addrVar string, extra ...string) *proc {
	t.Helper()
	return s.startExtraOn(t, "127.0.0.1", name, addrVar, extra...)
}

// startExtraOn is startExtra listening on host rather than loopback.
func (s *suite) startExtraOn(t testing.TB, host, name, addrVar string, extra ...string) *proc {
	t.Helper()
	addr := net.JoinHostPort(host, fmt.Sprint(ports.Free(t, 1)[0]))
	return s.launch(t, name, addr, append(append(append([]string(nil), s.environ...), extra...), addrVar+"="+addr))
}

// startConsole starts the operator console beside the suite's services,
// with the suite's environment (its database, key prefix and streams) on a
// port of its own, waits until it serves /readyz, and returns its URL.
func (s *suite) startConsole(t testing.TB) string {
	t.Helper()
	return "http://" + s.startExtra(t, "console", "CONSOLE_ADDR").addr
}

// launch starts binary name with environ, serving probes on addr; it is
// interrupted (killed 10 s later) when t ends, unless it has exited, and
// its output is logged if t failed.
func (s *suite) launch(t testing.TB, name, addr string, environ []string) *proc {
	t.Helper()
	if name == "gateway" {
		gateways.Watch(t, addr, s.check)
	}
	p := &proc{name: name, addr: addr, out: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, name))
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
		if t.Failed() {
			t.Logf("--- %s %s (pid %d) output ---\n%s", name, addr, p.cmd.Process.Pid, p.out.String())
		}
	})
	waitReady(t, name, addr, p.exited, p.out)
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (no shutdown code runs: nothing is acked, nothing
// finished) and waits until the process is gone.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10 s after SIGKILL", p.name)
	}
}

// signal sends sig to p (SIGSTOP freezes it, SIGCONT thaws it).
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, p.name, err)
	}
}

// restart starts p's service again, once p has exited (kill), on p's
// address with p's environment, waits until it is ready, and returns it
// (which the caller puts in p's place: s.procs is not changed). It is
// stopped when t ends, as launch's are.
func (s *suite) restart(t testing.TB, p *proc) *proc {
	t.Helper()
	if p.running() {
		t.Fatalf("restart %s %s: still running", p.name, p.addr)
	}
	return s.launch(t, p.name, p.addr, p.cmd.Env)
}

// waitReady waits until the process started as name answers 200 on
// http://addr/readyz, and fails t with its output if it exits first or is
// not ready within 30 s.
func waitReady(t testing.TB, name, addr string, exited <-chan struct{}, out *lockedBuffer) {
	t.Helper()
	wait.For(t, 30*time.Second, name+" ready on "+addr, func() error {
		select {
		case <-exited:
			t.Fatalf("%s exited during start:\n%s", name, out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d; output:\n%s", resp.StatusCode, out.String())
		}
		return nil
	})
}

// ctl runs parleyctl with args and decodes its JSON output into out.
func (s *suite) ctl(t testing.TB, out any, args ...string) {
	t.Helper()
	stdout, stderr, err := s.ctlRaw(args...)
	if err != nil {
		t.Fatalf("parleyctl %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	if out != nil {
		if err := json.Unmarshal(stdout, out); err != nil {
			t.Fatalf("parleyctl %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, stdout)
		}
	}
}

func (s *suite) ctlRaw(args ...string) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "parleyctl"), args...)
	cmd.Env = s.environ
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// api calls the gateway with key and decodes the JSON answer.
func (s *suite) api(t testing.TB, key, method, path string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.gatewayURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// newReceiver is the developer's webhook endpoint: it records every
// request and answers 204, as a receiver that has nothing to say does.
func newReceiver(t *testing.T, opts ...receiver.Option) *receiver.Receiver {
	return receiver.New(t, receiver.Status(http.StatusNoContent), append([]receiver.Option{checkDeliveries(t)}, opts...)...)
}

// checkDeliveries fails t for each request a receiver gets that is not a
// delivery as the OpenAPI document's webhooks describe it. A test's own
// receiver.OnRequest, given after it, replaces it.
func checkDeliveries(t testing.TB) receiver.Option {
	return receiver.OnRequest(apicheck.New(t).CheckWebhook)
}

// customerEvent is a message.received or postback.received envelope as
// the developer's receiver gets it, whatever the platform.
type customerEvent struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		WorkspaceID    string            `json:"workspace_id"`
		ConversationID string            `json:"conversation_id"`
		Platform       string            `json:"platform"`
		Channel        map[string]any    `json:"channel"`
		Contact        map[string]any    `json:"contact"`
		Message        map[string]any    `json:"message"`
		Postback       map[string]string `json:"postback"`
	} `json:"data"`
}

// verifySignature checks X-Service-Signature the way docs/webhooks.md
// "Verifying a delivery" tells receivers to (Request.Verify, the Go
// client's webhook.VerifyAt).
func verifySignature(t *testing.T, req receiver.Request, secret string) {
	t.Helper()
	if err := req.Verify(secret, time.Now()); err != nil {
		t.Fatalf("%v (the secret from PUT /v1/webhook)", err)
	}
}

// lockedBuffer collects a process's output from two pipes at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
