// Package localserver runs a test's own Redis and PostgreSQL servers, on
// free loopback ports, for a test that breaks them: flushes Redis, kills
// either with SIGKILL, restarts them on the same port. The shared servers
// (DATABASE_URL, REDIS_URL) are never touched, so such a test disturbs no
// other test or checkout. Point a testenv.Env at them with
// testenv.Servers.
//
// The servers are the machine's binaries (redis-server on PATH,
// PostgreSQL 15's under /usr/lib/postgresql/15/bin), run as real processes
// rather than anything embedded: what is tested is what an operator sees
// when a server crashes or restarts. Each lives in a directory of its own,
// removed with its process when the test ends; its output is kept there
// and written to the test's log when the test failed.
package localserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// within bounds how long a server may take to start, stop or come back on
// a loaded machine.
const within = 60 * time.Second

// process is one server process, started again on demand with the same
// command line: its address and its files are the server's, not the
// process's.
type process struct {
	name    string
	logPath string
	// command builds the command line of each start.
	command func() *exec.Cmd
	// others lists the server's processes besides the one started, which
	// must be gone before it starts again (nil: there are none).
	others func() []int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start runs the process; it must not be running.
func (p *process) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			t.Fatalf("localserver: %s is already running", p.name)
		}
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("localserver: %v", err)
	}
	cmd := p.command()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Killed with the test's process, should that die without its
	// cleanups (a test binary's timeout), so that no server outlives it
	// on a shared machine.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("localserver: start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// startReady runs the process and waits until ready, which is given a
// bounded context, says it serves; it fails t if the process exits first.
func (p *process) startReady(t testing.TB, ready func(ctx context.Context) error) {
	t.Helper()
	p.start(t)
	wait.For(t, within, p.name+" ready", func() error {
		if !p.running() {
			t.Fatalf("localserver: %s exited during start:\n%s", p.name, p.logTail())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return ready(ctx)
	})
}

// running reports whether the process is alive.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends sig and waits until the process and everything it forked
// have exited; what is left of its group within the bound is killed.
func (p *process) stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.stopErr(sig); err != nil {
		t.Fatalf("localserver: %v", err)
	}
}

func (p *process) stopErr(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
	default:
		if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signal %s: %w", p.name, err)
		}
		select {
		case <-done:
		case <-time.After(within):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("%s did not exit within %s of %s; killed", p.name, within, sig)
		}
	}
	if p.others == nil {
		return nil
	}
	// They notice the process's end on their own (a PostgreSQL backend
	// does, and exits); what is left after the bound is killed.
	deadline := time.Now().Add(within)
	for {
		left := p.others()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return fmt.Errorf("%s: processes %v still there %s after it exited; killed", p.name, left, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workingIn lists the processes whose working directory is dir, zombies
// aside (they have none).
func workingIn(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// logTail is the end of the process's output, for a failure's message.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	const keep = 4 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// cleanup stops the process with sig at the end of t (its output written to
// t's log when t failed) and removes dir.
func (p *process) cleanup(t testing.TB, sig syscall.Signal, dir string) {
	t.Cleanup(func() {
		if err := p.stopErr(sig); err != nil {
			t.Logf("localserver: %v", err)
		}
		if t.Failed() {
			t.Logf("--- %s output (end) ---\n%s", p.name, p.logTail())
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("localserver: remove %s: %v", dir, err)
		}
	})
}

// binary finds name on PATH, or at one of the usual places.
func binary(t testing.TB, name string, places ...string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range places {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	t.Fatalf("localserver: no %s binary on PATH or in %v", name, places)
	return ""
}
