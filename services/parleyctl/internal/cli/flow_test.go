package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// writeFile puts content in a file of its own and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "flow.json")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestFlowUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"publish without workspace", []string{"flow", "publish", "--file", "f.json"}, "--workspace is required"},
		{"publish without file", []string{"flow", "publish", "--workspace", "w1"}, "--file is required"},
		{"publish stray argument", []string{"flow", "publish", "--workspace", "w1", "--file", "f.json", "more"}, "unexpected argument"},
		{"deactivate without flow", []string{"flow", "deactivate"}, "--flow is required"},
		{"unknown verb", []string{"flow", "delete"}, `parleyctl flow takes deactivate, publish`},
		{"help", []string{"flow", "publish", "-h"}, "usage: parleyctl flow publish --workspace ID --file FLOW.json [--flow ID]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, tt.args, tt.want)
		})
	}
}

// A file that cannot be read or is not a JSON object fails before any call,
// with an error naming the file (and where JSON broke), not a usage error.
func TestFlowPublishRefusesUnreadableFiles(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.json")
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"missing file", missing, []string{"nope.json", "no such file"}},
		{"bad JSON", writeFile(t, "{\n  \"name\": \"x\",\n  \"nodes\": [,]\n}"), []string{"flow.json is not JSON", "line 3, column 13"}},
		{"truncated", writeFile(t, `{"name": "x"`), []string{"flow.json is not JSON", "unexpected end"}},
		{"empty", writeFile(t, ""), []string{"flow.json is not JSON"}},
		{"not an object", writeFile(t, `[{"id": "start"}]`), []string{"must be a JSON object"}},
		{"a directory", t.TempDir(), []string{"is a directory"}},
		{"over 1 MiB", writeFile(t, `{"name": "`+strings.Repeat("x", 1<<20)+`"}`), []string{"flow.json is over 1 MiB"}},
		// Read whole, it would never end: it is cut at the limit.
		{"endless", "/dev/zero", []string{"/dev/zero is over 1 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"flow", "publish", "--workspace", "w1", "--file", tt.file})
			var usage *cli.UsageError
			if err == nil || errors.As(err, &usage) {
				t.Fatalf("err = %v, want a plain error", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q, want one line", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to mention %q", err, w)
				}
			}
			if len(rec.calls) != 0 {
				t.Errorf("an unreadable file was still sent: %v", rec.calls)
			}
		})
	}
}

// The document goes byte for byte, whitespace and key order as written,
// to the flow-runner; --flow publishes a new version of that flow.
func TestFlowPublishSendsTheFileAsIs(t *testing.T) {
	t.Parallel()
	doc := "{ \"nodes\": [],\n\t\"name\" : \"Order status\" }\n"
	file := writeFile(t, doc)
	tests := []struct {
		name      string
		args      []string
		wantQuery string
	}{
		{"new flow", nil, ""},
		{"new version", []string{"--flow", "f 1"}, "flow_id=f+1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{answers: map[string]any{
				"POST /admin/workspaces/w1/flows": map[string]any{"id": "f1", "published_version": 2},
			}}
			var out bytes.Buffer
			args := append([]string{"flow", "publish", "--workspace", "w1", "--file", file}, tt.args...)
			if err := cli.New(testConfig(), rec, &out).Run(context.Background(), args); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != 1 || rec.calls[0] != "flow-runner/admin POST /admin/workspaces/w1/flows" || rec.queries[0] != tt.wantQuery {
				t.Fatalf("calls %v, queries %q", rec.calls, rec.queries)
			}
			if string(rec.raws[0]) != doc {
				t.Errorf("sent %q, want the file %q", rec.raws[0], doc)
			}
			var printed map[string]any
			if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["id"] != "f1" || printed["published_version"] != float64(2) || len(printed) != 2 {
				t.Errorf("printed %s (%v)", out.String(), err)
			}
		})
	}
}

// A refusal comes back as the service's error, which main prints on one
// line and exits non-zero for.
func TestFlowPublishRefusalPassesThrough(t *testing.T) {
	t.Parallel()
	refusal := errs.InvalidRequest(`node "ask": save_as: is required`)
	rec := &recorder{answers: map[string]any{"POST /admin/workspaces/w1/flows": refusal}}
	var out bytes.Buffer
	err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"flow", "publish", "--workspace", "w1", "--file", writeFile(t, `{"name": "x"}`)})
	e, ok := errs.As(err)
	if !ok || e.Status != http.StatusBadRequest || !strings.Contains(err.Error(), `node "ask": save_as`) {
		t.Fatalf("err = %v, want the refusal", err)
	}
	if out.Len() != 0 {
		t.Errorf("a refusal printed %q", out.String())
	}
}

func TestFlowDeactivate(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{"POST /admin/flows/f1/deactivate": map[string]any{"id": "f1", "status": "inactive"}}}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"flow", "deactivate", "--flow", "f1"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 1 || rec.calls[0] != "flow-runner/admin POST /admin/flows/f1/deactivate" {
		t.Fatalf("calls %v", rec.calls)
	}
	var printed map[string]any
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["id"] != "f1" || printed["status"] != "inactive" {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
}
