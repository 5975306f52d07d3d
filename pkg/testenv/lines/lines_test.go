package lines

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestLinesComeInOrderAndTheGroupIsKilledAtTheEnd: stdout a line at a
// time, stderr kept apart, and a child of the program (as go run's
// compiled program is) gone once the test that started it ended.
func TestLinesComeInOrderAndTheGroupIsKilledAtTheEnd(t *testing.T) {
	var child int
	t.Run("run", func(t *testing.T) {
		p := Start(t, exec.Command("sh", "-c", `echo one; echo oops >&2; sleep 60 & echo $!; wait`))
		if got := p.Next(t, 10*time.Second); got != "one" {
			t.Fatalf("first line %q", got)
		}
		pid, err := strconv.Atoi(p.Next(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		child = pid
		wait.Until(t, 10*time.Second, "stderr kept", func() bool { return strings.Contains(p.Stderr(), "oops") })
	})
	wait.Until(t, 10*time.Second, "the program's child killed", func() bool {
		return errors.Is(syscall.Kill(child, 0), syscall.ESRCH)
	})
}
