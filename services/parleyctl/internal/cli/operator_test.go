package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// TestOperatorCreate: the password comes from stdin without its trailing
// newline, never from a flag, and goes to the console's admin endpoint
// with the email and the workspace.
func TestOperatorCreate(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stdin     string
		wantBody  map[string]any
		wantUsage string
	}{
		{name: "platform operator", args: []string{"--email", "ann@example.com", "--password-stdin"}, stdin: "correct horse battery\n",
			wantBody: map[string]any{"email": "ann@example.com", "password": "correct horse battery"}},
		{name: "workspace operator, CRLF", args: []string{"--email", "bo@example.com", "--workspace", "ws_1", "--password-stdin"}, stdin: "correct horse battery\r\n",
			wantBody: map[string]any{"email": "bo@example.com", "password": "correct horse battery", "workspace_id": "ws_1"}},
		{name: "no trailing newline", args: []string{"--email", "cy@example.com", "--password-stdin"}, stdin: "  spaces kept  ",
			wantBody: map[string]any{"email": "cy@example.com", "password": "  spaces kept  "}},
		{name: "without --password-stdin", args: []string{"--email", "a@example.com"}, stdin: "whatever password", wantUsage: "--password-stdin"},
		{name: "a password flag is no flag", args: []string{"--email", "a@example.com", "--password", "x"}, wantUsage: "password"},
		{name: "empty stdin", args: []string{"--email", "a@example.com", "--password-stdin"}, stdin: "\n", wantUsage: "stdin was empty"},
		{name: "two lines", args: []string{"--email", "a@example.com", "--password-stdin"}, stdin: "one\ntwo\n", wantUsage: "one line"},
		{name: "a file, not a password", args: []string{"--email", "a@example.com", "--password-stdin"}, stdin: strings.Repeat("x", 5000), wantUsage: "more than"},
		{name: "no email", args: []string{"--password-stdin"}, stdin: "correct horse battery", wantUsage: "--email is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer cli.SetOperatorStdin(strings.NewReader(tt.stdin))()
			rec := &recorder{answers: map[string]any{"POST /admin/operators": map[string]any{"id": "op_1", "email": "ann@example.com", "workspace_id": nil}}}
			var out bytes.Buffer
			err := cli.New(testConfig(), rec, &out).Run(context.Background(), append([]string{"operator", "create"}, tt.args...))
			if tt.wantUsage != "" {
				if _, ok := err.(*cli.UsageError); !ok || !strings.Contains(err.Error(), tt.wantUsage) {
					t.Fatalf("err = %v, want a usage error mentioning %q", err, tt.wantUsage)
				}
				if len(rec.calls) != 0 {
					t.Fatalf("a usage error still called %v", rec.calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != 1 || rec.calls[0] != "console/admin POST /admin/operators" {
				t.Fatalf("calls = %v", rec.calls)
			}
			if got, _ := json.Marshal(rec.bodies[0]); string(got) != mustJSON(t, tt.wantBody) {
				t.Fatalf("body = %s, want %s", got, mustJSON(t, tt.wantBody))
			}
			var printed map[string]any
			if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed["id"] != "op_1" {
				t.Fatalf("printed %q (%v)", out.String(), err)
			}
		})
	}
}

// TestOperatorCreateRefused: the console's refusal reaches the operator as
// the console worded it.
func TestOperatorCreateRefused(t *testing.T) {
	defer cli.SetOperatorStdin(strings.NewReader("correct horse battery\n"))()
	rec := &recorder{answers: map[string]any{"POST /admin/operators": errs.New(http.StatusConflict, "operator_exists", "an operator with this email exists")}}
	err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"operator", "create", "--email", "ann@example.com", "--password-stdin"})
	if e, ok := errs.As(err); !ok || e.Code != "operator_exists" {
		t.Fatalf("err = %v, want operator_exists", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
