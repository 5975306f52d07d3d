package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeHelpListsTheTargets: the Make targets of docs/operations.md and
// the README exist under their names, each listed by make help with what
// it does; a target renamed or dropped fails here, not in a reader's
// shell.
func TestMakeHelpListsTheTargets(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("make", "--no-print-directory", "-C", "..", "help").CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "make" {
			listed[f[1]] = true
		}
	}
	for _, target := range []string{"help", "run", "test", "build", "bench", "bench-e2e", "lint", "tidy", "proto"} {
		if !listed[target] {
			t.Errorf("make help does not list %q:\n%s", target, out)
		}
	}
}

// TestMakeBuildPutsTheBinariesInBin: make build puts every service and
// parleyctl in bin/ (here a directory of the test's, through BIN), each
// one a program that starts.
func TestMakeBuildPutsTheBinariesInBin(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if out, err := exec.Command("make", "--no-print-directory", "-C", "..", "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, name := range []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner", "console", "parleyctl"} {
		info, err := os.Stat(filepath.Join(bin, name))
		if err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("bin/%s: %v, mode %v; want an executable", name, err, info)
		}
	}
	// parleyctl help needs no services: the built program runs.
	out, err := exec.Command(filepath.Join(bin, "parleyctl"), "help").Output()
	if err != nil || !strings.Contains(string(out), "parleyctl workspace create") {
		t.Errorf("bin/parleyctl help = %v\n%s", err, out)
	}
}
