package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

func TestKBUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"add without workspace", []string{"kb", "add", "--title", "T", "--file", "d.md"}, "--workspace is required"},
		{"add without title", []string{"kb", "add", "--workspace", "w1", "--file", "d.md"}, "--title is required"},
		{"add without file", []string{"kb", "add", "--workspace", "w1", "--title", "T"}, "--file is required"},
		{"list without workspace", []string{"kb", "list"}, "--workspace is required"},
		{"delete without id", []string{"kb", "delete", "--workspace", "w1"}, "--id is required"},
		{"stray argument", []string{"kb", "list", "--workspace", "w1", "more"}, "unexpected argument"},
		{"unknown verb", []string{"kb", "search"}, "parleyctl kb takes add, delete, list"},
		{"help", []string{"kb", "add", "-h"}, "usage: parleyctl kb add --workspace ID --title TITLE --file DOC.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, tt.args, tt.want)
		})
	}
}

// TestKBHelp: the group alone lists its three commands.
func TestKBHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := cli.New(testConfig(), &recorder{}, &out).Run(context.Background(), []string{"kb"}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"parleyctl kb add --", "parleyctl kb list --", "parleyctl kb delete --"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("usage %q lacks %q", out.String(), w)
		}
	}
}

// TestKBAdd sends the title and the file's Markdown as they are (Cyrillic
// included) and prints the document's id, title and passage count.
func TestKBAdd(t *testing.T) {
	t.Parallel()
	markdown := "# Буцаалт\n\nБараагаа 14 хоногийн дотор буцаах боломжтой.\n\n- \"quoted\" \\ line\n"
	rec := &recorder{answers: map[string]any{
		"POST /admin/workspaces/w%201/kb/documents": map[string]any{
			"document": map[string]any{"id": "d1", "title": "Журам", "passages": 2, "created_at": "2026-11-22T10:00:00Z"},
		},
	}}
	var out bytes.Buffer
	args := []string{"kb", "add", "--workspace", "w 1", "--title", "Журам", "--file", writeFile(t, markdown)}
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 1 || rec.calls[0] != "flow-runner/admin POST /admin/workspaces/w%201/kb/documents" {
		t.Fatalf("calls %v", rec.calls)
	}
	if b := rec.bodies[0]; b["title"] != "Журам" || b["markdown"] != markdown || len(b) != 2 {
		t.Errorf("sent %v", b)
	}
	var printed map[string]any
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["id"] != "d1" || printed["title"] != "Журам" || printed["passages"] != float64(2) || len(printed) != 3 {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
}

// A file that cannot be read, or is not UTF-8, fails before any call.
func TestKBAddRefusesUnreadableFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope.md"), "no such file"},
		{"not UTF-8", writeFile(t, "Caf\xe9 au lait\n"), "flow.json is not UTF-8"},
		{"a directory", t.TempDir(), "is a directory"},
		{"over 1 MiB", writeFile(t, strings.Repeat("# x\n", 1<<18+1)), "flow.json is over 1 MiB"},
		{"endless", "/dev/zero", "/dev/zero is over 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"kb", "add", "--workspace", "w1", "--title", "T", "--file", tt.file})
			var usage *cli.UsageError
			if err == nil || errors.As(err, &usage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a plain error mentioning %q", err, tt.want)
			}
			if len(rec.calls) != 0 {
				t.Errorf("still sent: %v", rec.calls)
			}
		})
	}
}

// A refusal (here the service's, naming the field) comes back as is, and
// nothing is printed.
func TestKBAddRefusalPassesThrough(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{"POST /admin/workspaces/w1/kb/documents": errs.InvalidRequest("markdown: has no text")}}
	var out bytes.Buffer
	err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"kb", "add", "--workspace", "w1", "--title", "T", "--file", writeFile(t, "# only a heading\n")})
	if e, ok := errs.As(err); !ok || e.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "markdown: has no text") {
		t.Fatalf("err = %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("a refusal printed %q", out.String())
	}
}

func TestKBListAndDelete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantCall  string
		wantQuery string
		answer    any
	}{
		{
			"list", []string{"kb", "list", "--workspace", "w1"}, "flow-runner/admin GET /admin/workspaces/w1/kb/documents", "",
			map[string]any{"documents": []any{map[string]any{"id": "d1", "title": "T", "passages": 3, "created_at": "2026-11-22T10:00:00Z"}}},
		},
		{"delete", []string{"kb", "delete", "--id", "d1"}, "flow-runner/admin DELETE /admin/kb/documents/d1", "", map[string]any{"id": "d1", "deleted": true}},
		{
			"delete within a workspace", []string{"kb", "delete", "--id", "d1", "--workspace", "w 1"}, "flow-runner/admin DELETE /admin/kb/documents/d1", "workspace=w+1",
			map[string]any{"id": "d1", "deleted": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			route := strings.TrimPrefix(tt.wantCall, "flow-runner/admin ")
			rec := &recorder{answers: map[string]any{route: tt.answer}}
			var out bytes.Buffer
			if err := cli.New(testConfig(), rec, &out).Run(context.Background(), tt.args); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != 1 || rec.calls[0] != tt.wantCall || rec.queries[0] != tt.wantQuery {
				t.Fatalf("calls %v, queries %q", rec.calls, rec.queries)
			}
			want, _ := json.Marshal(tt.answer)
			var printed any
			if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
				t.Fatalf("printed %s: %v", out.String(), err)
			}
			if got, _ := json.Marshal(printed); string(got) != string(want) {
				t.Errorf("printed %s, want the answer %s", got, want)
			}
		})
	}
}
