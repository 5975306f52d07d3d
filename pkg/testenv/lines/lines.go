// Package lines runs a program that a test follows through what it
// prints (an example of docs/examples started with go run): its standard
// output is read a line at a time, its standard error kept for the test's
// messages, and its whole process group, go run's child included, is
// killed when the test ends.
package lines

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Program is a running program.
type Program struct {
	name   string
	lines  chan string
	stderr string // the file the program's standard error goes to
}

// Start starts cmd in a process group of its own and returns it running.
func Start(t testing.TB, cmd *exec.Cmd) *Program {
	t.Helper()
	p := &Program{name: cmd.String(), lines: make(chan string, 256), stderr: filepath.Join(t.TempDir(), "stderr")}
	stderr, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close() // the process has its own copy
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return p
}

// Next returns the program's next line. It fails t when the program's
// output ends first, or when no line comes within d.
func (p *Program) Next(t testing.TB, d time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s ended its output; stderr:\n%s", p.name, p.Stderr())
		}
		return line
	case <-time.After(d):
		t.Fatalf("%s printed no line within %s; stderr:\n%s", p.name, d, p.Stderr())
		return ""
	}
}

// Stderr is what the program wrote on its standard error so far.
func (p *Program) Stderr() string {
	b, _ := os.ReadFile(p.stderr)
	return string(b)
}
