package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

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
