package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// sandboxOnce builds the Telegram and LLM sandboxes, which make run starts
// beside the services, into binDir.
var sandboxOnce = sync.OnceValue(func() error {
	for _, name := range []string{"telegram-sandbox", "llm-sandbox"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), "./cmd/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
	}
	return nil
})

// makeRun is `make run` started in its own process group, with this test's
// binaries, database, key prefix, streams and ports (startMakeRunIn).
type makeRun struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// startMakeRunIn is make run on env's database, key prefix and streams (a
// test that runs make run again gives it what an earlier one left). With
// interruptIgnored, make starts with SIGINT and SIGQUIT ignored, as a
// script's background job does.
func startMakeRunIn(t *testing.T, env *testenv.Env, interruptIgnored bool) *makeRun {
	t.Helper()
	if err := sandboxOnce(); err != nil {
		t.Fatal(err)
	}
	p := ports.Free(t, 7)
	// The test's own settings only: nothing from a developer's shell may
	// point make run elsewhere, and a make running this test must not lend
	// its jobserver to the inner one.
	var environ []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TELEGRAM_") || strings.HasPrefix(k, "DEMO_") || strings.HasPrefix(k, "LOG_") ||
			strings.HasPrefix(k, "LLM_") || strings.HasPrefix(k, "GUARD_") ||
			strings.HasPrefix(k, "MAKE") || k == "MFLAGS" || strings.HasSuffix(k, "_ADDR") || strings.HasPrefix(k, "PARLEY_") ||
			strings.HasSuffix(k, "_PUBLIC_URL") || k == "PUBLIC_BASE_URL" {
			continue
		}
		environ = append(environ, kv)
	}
	environ = append(append(environ, env.Environ()...),
		"PARLEY_BIN="+binDir,
		"LOG_FORMAT=json",
		fmt.Sprintf("GATEWAY_ADDR=127.0.0.1:%d", p[0]),
		fmt.Sprintf("MESSAGING_ADDR=127.0.0.1:%d", p[1]),
		fmt.Sprintf("DISPATCHER_ADDR=127.0.0.1:%d", p[2]),
		fmt.Sprintf("FLOW_RUNNER_ADDR=127.0.0.1:%d", p[3]),
		fmt.Sprintf("TELEGRAM_SANDBOX_ADDR=127.0.0.1:%d", p[4]),
		fmt.Sprintf("LLM_SANDBOX_ADDR=127.0.0.1:%d", p[5]),
		fmt.Sprintf("CONSOLE_ADDR=127.0.0.1:%d", p[6]),
	)
	// -o build: the binaries are this test's, already built.
	args := []string{"make", "--no-print-directory", "-o", "build", "run"}
	if interruptIgnored {
		// env execs make in its own place: the process is make's.
		args = append([]string{"env", "--ignore-signal=INT,QUIT"}, args...)
	}
	r := &makeRun{cmd: exec.Command(args[0], args[1:]...), out: &lockedBuffer{}, exited: make(chan struct{})}
	r.cmd.Dir = ".."
	r.cmd.Env = environ
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A survivor holding the output open must not hang Wait.
	r.cmd.WaitDelay = 5 * time.Second
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start make run: %v", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
		if t.Failed() {
			t.Logf("--- make run output ---\n%s", r.out.String())
		}
	})
	wait.For(t, 90*time.Second, "make run up", func() error {
		select {
		case <-r.exited:
			t.Fatalf("make run exited during start:\n%s", r.out.String())
		default:
		}
		if !strings.Contains(r.out.String(), "Parley is up.") {
			return errors.New("no banner yet")
		}
		return nil
	})
	// The banner names the demo flows parleyctl demo published.
	if !demoFlowLine.MatchString(r.out.String()) || !demoAIFlowLine.MatchString(r.out.String()) {
		t.Fatalf("make run's banner names no demo flow or no demo AI flow:\n%s", r.out.String())
	}
	// The API's description and its reference page, without a key.
	gateway := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	for path, wantType := range map[string]string{"/v1/openapi.json": "application/json", "/docs": "text/html"} {
		resp, err := http.Get(gateway + path)
		if err != nil {
			t.Fatalf("GET %s on make run's gateway: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), wantType) {
			t.Fatalf("GET %s on make run's gateway = %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), wantType)
		}
	}
	checkMakeRunConsole(t, r, fmt.Sprintf("http://127.0.0.1:%d", p[6]))
	return r
}

var (
	consoleLine      = regexp.MustCompile(`(?m)^  Console: +(\S+)$`)
	consoleLoginLine = regexp.MustCompile(`(?m)^  Console sign-in: +(\S+) / (\S+) \(the demo workspace; local use only\)$`)
	csrfField        = regexp.MustCompile(`<input type="hidden" name="csrf_token" value="([^"]+)">`)
)

// checkMakeRunConsole: the banner names the console at console and the demo
// operator's sign-in; the console answers its probe and its sign-in page,
// and that sign-in opens the demo workspace's page.
func checkMakeRunConsole(t *testing.T, r *makeRun, console string) {
	t.Helper()
	out := r.out.String()
	if m := consoleLine.FindStringSubmatch(out); m == nil || m[1] != console {
		t.Fatalf("make run's banner does not name the console at %s:\n%s", console, out)
	}
	login := consoleLoginLine.FindStringSubmatch(out)
	if login == nil {
		t.Fatalf("make run's banner has no console sign-in marked for local use only:\n%s", out)
	}
	email, password := login[1], login[2]

	c := newConsoleClient(t, console)
	c.get("/healthz", http.StatusOK)
	resp, _ := c.fetch("/login", http.StatusOK)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /login on make run's console: Content-Type %q, want text/html", resp.Header.Get("Content-Type"))
	}

	// Signing in as the banner says goes home, and home is the demo
	// workspace's page.
	c.signIn(email, password)
	resp, _ = c.fetch("/", http.StatusSeeOther)
	home := resp.Header.Get("Location")
	if !strings.HasPrefix(home, "/workspaces/") {
		t.Fatalf("the demo operator's home is %q, want a workspace's page", home)
	}
	page := c.get(home, http.StatusOK)
	if id := strings.TrimPrefix(home, "/workspaces/"); !strings.Contains(page, "<code>"+id+"</code>") || !strings.Contains(page, "Demo workspace") {
		t.Fatalf("the demo operator's home %s is not the demo workspace's page:\n%s", home, page)
	}
}

var demoFlowLine = regexp.MustCompile(`(?m)^  Demo flow: +[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

var demoAIFlowLine = regexp.MustCompile(`(?m)^  Demo AI flow: +[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// lifecycle returns the messages each "[service] " JSON log line of the
// output carries, in order, and the level of each.
func (r *makeRun) lifecycle(t *testing.T, service string) (msgs, levels []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(r.out.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "["+service+"] ")
		if !ok || !strings.HasPrefix(line, "{") {
			continue
		}
		var entry struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("%s logged a line that is not JSON: %s", service, line)
		}
		msgs, levels = append(msgs, entry.Msg), append(levels, entry.Level)
	}
	return msgs, levels
}

// stop sends sig to make, or to its whole process group, and waits for make
// run to end.
func (r *makeRun) stop(t *testing.T, sig syscall.Signal, group bool) {
	t.Helper()
	target := r.cmd.Process.Pid
	if group {
		target = -target
	}
	if err := syscall.Kill(target, sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("make run still running 90 s after %s", sig)
	}
}

// make run's demo webchat is answered by the assistant, through the LLM
// sandbox and its guard as run.sh wires them (README.md "Quick start"): a
// visitor on the printed widget address asks, and the policy answers.
func TestMakeRunDemoAssistant(t *testing.T) {
	requireChromium(t)
	r := startMakeRunIn(t, testenv.New(t), false)
	m := webchatLine.FindStringSubmatch(r.out.String())
	if m == nil {
		t.Fatalf("make run's banner names no webchat widget:\n%s", r.out.String())
	}
	if g := guardLine.FindStringSubmatch(r.out.String()); g == nil || !strings.Contains(r.out.String(), "LLM provider:       "+g[1]+"\n") {
		t.Fatalf("make run's banner names no guard, or another than the LLM sandbox:\n%s", r.out.String())
	}
	askDemoAssistant(t, m[1])
}

var (
	webchatLine = regexp.MustCompile(`(?m)^  Webchat widget: +(\S+)$`)
	guardLine   = regexp.MustCompile(`(?m)^  Safety guard: +(\S+)$`)
)

// make run again on what an earlier one left: the demo operator exists
// (operator_exists is not a failure), and the sign-in the banner prints
// still opens the demo workspace (startMakeRunIn checks both runs).
func TestMakeRunAgainKeepsTheDemoOperator(t *testing.T) {
	env := testenv.New(t)
	first := startMakeRunIn(t, env, false)
	first.stop(t, syscall.SIGTERM, true)
	startMakeRunIn(t, env, false)
}

// Ctrl-C on make run, a SIGTERM to it, or either signal to make alone,
// from a terminal or to a make a script started in the background (SIGINT
// ignored): each service finishes its orderly shutdown and logs every step
// of it, the prefixers pass on its last lines, run.sh exits 0 so that make
// reports no error, and nothing of make run is left. make itself ends as
// the signal it got asks (killed by it, or 0 when it ignored it).
func TestMakeRunStopsCleanly(t *testing.T) {
	tests := []struct {
		name  string
		sig   syscall.Signal
		group bool // to the whole process group, as a terminal sends Ctrl-C; else to make alone
		// interruptIgnored starts make with SIGINT ignored, as a script's
		// background job is.
		interruptIgnored bool
	}{
		{"Ctrl-C to the process group", syscall.SIGINT, true, false},
		{"SIGTERM to the process group", syscall.SIGTERM, true, false},
		{"SIGTERM to make", syscall.SIGTERM, false, false},
		{"SIGINT to make", syscall.SIGINT, false, false},
		{"SIGINT to the group of a script's background make", syscall.SIGINT, true, true},
		{"SIGTERM to a script's background make", syscall.SIGTERM, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startMakeRunIn(t, testenv.New(t), tt.interruptIgnored)
			r.stop(t, tt.sig, tt.group)
			pid := r.cmd.Process.Pid

			// The order of pkg/service, each step done in time.
			steps := []string{"stopping", "http server stopped", "rpc server stopped", "nats drained", "postgres closed", "stopped"}
			for _, s := range []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner", "console"} {
				msgs, levels := r.lifecycle(t, s)
				from := slices.Index(msgs, "stopping")
				if from < 0 {
					t.Fatalf("%s never logged stopping", s)
				}
				at := from
				for _, step := range steps {
					i := slices.Index(msgs[at:], step)
					if i < 0 {
						t.Fatalf("%s: no %q after %q in its shutdown %q", s, step, msgs[at], msgs[from:])
					}
					at += i
				}
				for i := from; i < len(msgs); i++ {
					if levels[i] != "info" {
						t.Errorf("%s: %s %q during its shutdown", s, levels[i], msgs[i])
					}
				}
			}
			out := r.out.String()
			if !strings.Contains(out, "\nstopped\n") {
				t.Error("run.sh did not say it stopped")
			}
			if strings.Contains(out, "exited with status") {
				t.Error("run.sh saw a process fail")
			}
			// run.sh exited 0: make names no failed recipe.
			if strings.Contains(out, "make: ***") {
				t.Errorf("make reported an error:\n%s", out)
			}
			state := r.cmd.ProcessState
			if ws, ok := state.Sys().(syscall.WaitStatus); !state.Success() && (!ok || !ws.Signaled() || ws.Signal() != tt.sig) {
				t.Errorf("make ended with %v, want 0 or killed by %s", state, tt.sig)
			}
			// make led the group and is gone: anything still in it is a
			// survivor (a service, the sandbox, a prefixer).
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("processes of make run left running after it ended (kill -0: %v)", err)
			}
		})
	}
}

// A service whose log reader goes away (make run's prefixer, a closed
// terminal) still shuts down in order and exits 0, instead of dying of
// SIGPIPE at its first log line after.
func TestServiceOutlivesItsLogReader(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	addr := ports.FreeAddr(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "gateway"))
	cmd.Env = append(append(os.Environ(), env.Environ()...), "GATEWAY_ADDR="+addr, "LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	out, read := &lockedBuffer{}, make(chan struct{})
	go func() { _, _ = io.Copy(out, r); close(read) }()
	waitReady(t, "gateway", addr, exited, out)
	r.Close() // the reader goes away; the next log line meets a broken pipe
	<-read
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gateway ended with %v after its log reader went away, want a clean exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not stop")
	}
}
