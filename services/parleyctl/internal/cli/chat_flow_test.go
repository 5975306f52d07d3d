package cli_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

func TestChannelSetFlowUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no channel", []string{"channel", "set-flow", "--flow", "f1"}, "--channel is required"},
		{"neither flow nor clear", []string{"channel", "set-flow", "--channel", "c1"}, "exactly one of --flow and --clear"},
		{"flow and clear", []string{"channel", "set-flow", "--channel", "c1", "--flow", "f1", "--clear"}, "exactly one of --flow and --clear"},
		{"an empty flow", []string{"channel", "set-flow", "--channel", "c1", "--flow", ""}, "--flow needs a flow id"},
		{"stray argument", []string{"channel", "set-flow", "--channel", "c1", "--clear", "more"}, "unexpected argument"},
		{"help", []string{"channel", "set-flow", "-h"}, "usage: parleyctl channel set-flow --channel ID (--flow FLOW_ID | --clear)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, tt.args, tt.want)
		})
	}
}

// channelAnswer is messaging's answer for channel c1 of workspace w1.
var channelAnswer = map[string]any{"channel": map[string]any{
	"id": "c1", "workspace_id": "w1", "kind": "telegram", "external_id": "bot", "ai_mode": "auto",
	"status": "active", "secret": "s3cret", "created_at": "2026-11-24T04:00:00Z",
}}

// TestChannelSetFlow: the channel's workspace comes from messaging, then
// the flow-runner sets or clears its chat flow; the answer is printed.
func TestChannelSetFlow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		call      string
		wantBody  map[string]any
		wantQuery string
		answer    map[string]any
	}{
		{
			"set", []string{"--flow", "f1"}, "flow-runner/admin PUT /admin/channels/c1/chat-flow",
			map[string]any{"workspace_id": "w1", "channel_id": "c1", "flow_id": "f1"}, "",
			map[string]any{"chat_flow": map[string]any{"workspace_id": "w1", "channel_id": "c1", "flow_id": "f1"}},
		},
		{
			"clear", []string{"--clear"}, "flow-runner/admin DELETE /admin/channels/c1/chat-flow", nil, "workspace_id=w1",
			map[string]any{"chat_flow": map[string]any{"workspace_id": "w1", "channel_id": "c1", "flow_id": ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method, path, _ := strings.Cut(strings.TrimPrefix(tt.call, "flow-runner/admin "), " ")
			rec := &recorder{answers: map[string]any{"GET /admin/channels/c1": channelAnswer, method + " " + path: tt.answer}}
			var out bytes.Buffer
			args := append([]string{"channel", "set-flow", "--channel", "c1"}, tt.args...)
			if err := cli.New(testConfig(), rec, &out).Run(context.Background(), args); err != nil {
				t.Fatal(err)
			}
			want := []string{"messaging/admin GET /admin/channels/c1", tt.call}
			if !reflect.DeepEqual(rec.calls, want) || rec.queries[1] != tt.wantQuery || !reflect.DeepEqual(rec.bodies[1], tt.wantBody) {
				t.Fatalf("calls %v, queries %q, bodies %v", rec.calls, rec.queries, rec.bodies)
			}
			printed := tt.answer["chat_flow"].(map[string]any)
			for _, field := range []string{"workspace_id", "channel_id", "flow_id"} {
				if !strings.Contains(out.String(), `"`+field+`": "`+printed[field].(string)+`"`) {
					t.Errorf("printed %s, want %s", out.String(), field)
				}
			}
		})
	}
}

// An unknown channel fails before the flow-runner is asked, naming it; a
// refusal of the flow-runner comes back as it said it.
func TestChannelSetFlowRefusals(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{"GET /admin/channels/c9": errs.NotFound("channel_not_found", "channel not found")}}
	var out bytes.Buffer
	err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"channel", "set-flow", "--channel", "c9", "--flow", "f1"})
	var usage *cli.UsageError
	if err == nil || errors.As(err, &usage) || !strings.Contains(err.Error(), `no channel "c9"`) || len(rec.calls) != 1 || out.Len() != 0 {
		t.Fatalf("an unknown channel: %v, calls %v, printed %q", err, rec.calls, out.String())
	}

	refusal := errs.New(http.StatusUnprocessableEntity, "flow_not_for_chat", `flow f2 cannot be a chat flow: its published version has no "chat" trigger`)
	rec = &recorder{answers: map[string]any{"GET /admin/channels/c1": channelAnswer, "PUT /admin/channels/c1/chat-flow": refusal}}
	err = cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"channel", "set-flow", "--channel", "c1", "--flow", "f2"})
	if e, ok := errs.As(err); !ok || e.Status != http.StatusUnprocessableEntity || e.Code != "flow_not_for_chat" || out.Len() != 0 {
		t.Fatalf("a refused flow: %v, printed %q", err, out.String())
	}
}
