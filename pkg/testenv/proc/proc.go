// Package proc runs a test's own server processes (the test kit's
// localserver and natscluster): started again on demand with the same
// command line, output kept in a file and written to the test's log when
// it failed, stopped with a signal and waited for, killed with the test's
// process should that die without its cleanups.
package proc

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

// Process is one server process, started again on demand with the same
// command line: its address and its files are the server's, not the
// process's.
type Process struct {
	Name    string
	LogPath string
	// Command builds the command line of each start.
	Command func() *exec.Cmd
	// Others lists the server's processes besides the one started, which
	// must be gone before it starts again (nil: there are none).
	Others func() []int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start runs the process; it must not be running.
func (p *Process) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			t.Fatalf("proc: %s is already running", p.Name)
		}
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("proc: %v", err)
	}
	cmd := p.Command()
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
		t.Fatalf("proc: start %s: %v", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// StartReady runs the process and waits until ready, which is given a
// bounded context, says it serves; it fails t if the process exits first.
func (p *Process) StartReady(t testing.TB, ready func(ctx context.Context) error) {
	t.Helper()
	p.Start(t)
	wait.For(t, within, p.Name+" ready", func() error {
		if !p.Running() {
			t.Fatalf("proc: %s exited during start:\n%s", p.Name, p.LogTail())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return ready(ctx)
	})
}

// Signal sends sig to the running process (SIGSTOP, SIGCONT: a pause
// that Stop would wait out).
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		t.Fatalf("proc: %s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("proc: signal %s: %v", p.Name, err)
	}
}

// Pid is the process's id, 0 before its first start.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
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

// Stop sends sig and waits until the process and everything it forked
// have exited; what is left of its group within the bound is killed.
func (p *Process) Stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.StopErr(sig); err != nil {
		t.Fatalf("proc: %v", err)
	}
}

func (p *Process) StopErr(sig syscall.Signal) error {
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
			return fmt.Errorf("signal %s: %w", p.Name, err)
		}
		select {
		case <-done:
		case <-time.After(within):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("%s did not exit within %s of %s; killed", p.Name, within, sig)
		}
	}
	if p.Others == nil {
		return nil
	}
	// They notice the process's end on their own (a PostgreSQL backend
	// does, and exits); what is left after the bound is killed.
	deadline := time.Now().Add(within)
	for {
		left := p.Others()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return fmt.Errorf("%s: processes %v still there %s after it exited; killed", p.Name, left, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WorkingIn lists the processes whose working directory is dir, zombies
// aside (they have none).
func WorkingIn(dir string) []int {
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

// LogTail is the end of the process's output, for a failure's message.
func (p *Process) LogTail() string {
	b, err := os.ReadFile(p.LogPath)
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

// Cleanup stops the process with sig at the end of t (its output written to
// t's log when t failed) and removes dir.
func (p *Process) Cleanup(t testing.TB, sig syscall.Signal, dir string) {
	t.Cleanup(func() {
		if err := p.StopErr(sig); err != nil {
			t.Logf("proc: %v", err)
		}
		if t.Failed() {
			t.Logf("--- %s output (end) ---\n%s", p.Name, p.LogTail())
		}
		if dir == "" {
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("proc: remove %s: %v", dir, err)
		}
	})
}
