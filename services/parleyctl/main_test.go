package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
	ctlconfig "github.com/parleyhq/parley/services/parleyctl/internal/config"
)

// A failure is one line on stderr, whatever lines its message has, and
// exits 1, or 2 for a mistake in the command line (docs/operations.md "The
// operator CLI: parleyctl"). The e2e tests see only one-line messages.
func TestFailIsOneLineAndItsExitStatus(t *testing.T) {
	usage := cli.New(ctlconfig.Config{}, nil, io.Discard).Run(context.Background(), []string{"frobnicate"})
	if usage == nil {
		t.Fatal("an unknown command did not fail")
	}
	tests := []struct {
		name       string
		err        error
		wantStderr string
		wantExit   int
	}{
		{"one line", errors.New("webhook_not_found: no webhook"), "parleyctl: webhook_not_found: no webhook\n", 1},
		{"several lines", errors.New("invalid_request: node \"ask\":\nfield \"next\"\r\nunknown node"),
			"parleyctl: invalid_request: node \"ask\": field \"next\"  unknown node\n", 1},
		{"usage", usage, "parleyctl: " + usage.Error() + "\n", 2},
		{"wrapped usage", fmt.Errorf("parsing:\n%w", usage), "parleyctl: parsing: " + usage.Error() + "\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if exit := fail(&stderr, tt.err); exit != tt.wantExit {
				t.Errorf("exit = %d, want %d", exit, tt.wantExit)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestAMistakeInTheCommandLineNeedsNoNATS: a mistake in the command line
// exits 2 with its usage error at once, NATS reachable or not; a correct
// command with NATS unreachable fails 1 saying so (docs/operations.md
// "The operator CLI: parleyctl"). Before, parleyctl reached NATS first,
// so a missing flag waited five seconds and exited 1 with "no servers".
func TestAMistakeInTheCommandLineNeedsNoNATS(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	t.Setenv("NATS_URL", "nats://"+addr)

	start := time.Now()
	err = run(context.Background(), []string{"workspace", "create", "--slug", "acme"}, io.Discard)
	var stderr bytes.Buffer
	if exit := fail(&stderr, err); exit != 2 || !strings.Contains(stderr.String(), "--name is required") {
		t.Fatalf("a missing --name: exit %d, stderr %q; want 2 and the usage error", exit, stderr.String())
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the usage error took %s", took)
	}

	err = run(context.Background(), []string{"workspace", "create", "--name", "Acme"}, io.Discard)
	stderr.Reset()
	if exit := fail(&stderr, err); exit != 1 || !strings.Contains(stderr.String(), "make run") {
		t.Fatalf("NATS down: exit %d, stderr %q; want 1 and what to check", exit, stderr.String())
	}
}

// TestHelpAndUsageNeedNoSettings: help, a command's usage and a mistake in
// the command line are told whatever the environment holds; only a command
// that calls a service reads the settings, and refuses a bad one naming
// its variable (docs/operations.md "The operator CLI: parleyctl"). Before,
// parleyctl read the settings first, so a bad NATS_URL made even
// `parleyctl help` fail.
func TestHelpAndUsageNeedNoSettings(t *testing.T) {
	// A password with an unescaped "%" does not parse as a URL.
	t.Setenv("NATS_URL", "nats://parley:50%off@127.0.0.1:4222")

	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"channel"}, {"webhook", "-h"}} {
		var stdout bytes.Buffer
		if err := run(context.Background(), args, &stdout); err != nil {
			t.Fatalf("parleyctl %q: %v, want the usage", args, err)
		}
		if !strings.HasPrefix(stdout.String(), "usage:\n  parleyctl ") {
			t.Errorf("parleyctl %q printed %q, want the usage", args, stdout.String())
		}
	}

	usages := []struct {
		args []string
		want string
	}{
		{[]string{"workspace", "create", "--help"}, "usage: parleyctl workspace create --name NAME"},
		{[]string{"demo", "-h"}, "usage: parleyctl demo"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"; run parleyctl help`},
		{[]string{"workspace", "create", "--slug", "acme"}, "--name is required"},
	}
	for _, tt := range usages {
		var stderr bytes.Buffer
		err := run(context.Background(), tt.args, io.Discard)
		if exit := fail(&stderr, err); exit != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("parleyctl %q: exit %d, stderr %q; want 2 and %q", tt.args, exit, stderr.String(), tt.want)
		}
	}

	for _, args := range [][]string{{"workspace", "create", "--name", "Acme"}, {"demo"}} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, io.Discard)
		if exit := fail(&stderr, err); exit != 1 || !strings.Contains(stderr.String(), "NATS_URL") {
			t.Errorf("parleyctl %q: exit %d, stderr %q; want 1 naming NATS_URL", args, exit, stderr.String())
		}
	}
}
