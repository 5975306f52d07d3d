package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// TestOperatorCLI checks parleyctl's contract: JSON on stdout, and on bad
// input a single line on stderr with a non-zero exit.
func TestOperatorCLI(t *testing.T) {
	t.Parallel()
	s := startSuite(t)

	var created struct {
		Workspace struct {
			ID   string `json:"id"`
			Slug string `json:"slug"`
		} `json:"workspace"`
	}
	s.ctl(t, &created, "workspace", "create", "--name", "Acme Shop", "--modules", "developer_api", "--rate-per-minute", "30")
	if created.Workspace.ID == "" || created.Workspace.Slug != "acme-shop" {
		t.Fatalf("workspace create: %+v", created)
	}
	var key struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	s.ctl(t, &key, "apikey", "create", "--workspace", created.Workspace.ID, "--name", "ci")
	if key.ID == "" || !strings.HasPrefix(key.Key, "pk_") {
		t.Fatalf("apikey create: %+v", key)
	}
	status, _, me := s.api(t, key.Key, http.MethodGet, "/v1/me", nil)
	if status != http.StatusOK || me["rate_limit"].(map[string]any)["per_minute"] != float64(30) {
		t.Fatalf("GET /v1/me with the new key = %d %v", status, me)
	}
	s.ctl(t, nil, "apikey", "revoke", "--id", key.ID)
	if status, _, body := s.api(t, key.Key, http.MethodGet, "/v1/me", nil); status != http.StatusUnauthorized || body["code"] != "unauthorized" {
		t.Fatalf("revoked key: %d %v", status, body)
	}

	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantErr  string
	}{
		{"missing required flag", []string{"workspace", "create"}, 2, "--name is required"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"bad mode", []string{"channel", "set-mode", "--channel", "00000000-0000-0000-0000-000000000000", "--mode", "loud"}, 1, "ai_mode"},
		{"unknown workspace", []string{"channel", "create", "--workspace", "00000000-0000-0000-0000-000000000000", "--kind", "telegram", "--token", "1:x"}, 1, "not found"},
		{"bad kind", []string{"channel", "create", "--workspace", created.Workspace.ID, "--kind", "fax"}, 1, "kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := s.ctlRaw(tt.args...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tt.wantExit {
				t.Fatalf("exit = %v, want %d; stderr %s", err, tt.wantExit, stderr)
			}
			if len(stdout) != 0 {
				t.Errorf("stdout on failure: %s", stdout)
			}
			line := bytes.TrimRight(stderr, "\n")
			if bytes.Contains(line, []byte("\n")) || !bytes.HasPrefix(line, []byte("parleyctl: ")) {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			if !strings.Contains(strings.ToLower(string(line)), strings.ToLower(tt.wantErr)) {
				t.Errorf("stderr %q does not mention %q", line, tt.wantErr)
			}
		})
	}
}
