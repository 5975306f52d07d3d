package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

func TestDeliveriesReplayUsageErrors(t *testing.T) {
	t.Parallel()
	base := []string{"deliveries", "replay", "--workspace", "w1"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no since", base, "--since or --delivery is required"},
		{"delivery and since", append(base, "--delivery", "d1", "--since", "2026-11-22T10:00:00Z"), "give --delivery or --since"},
		{"delivery and event", append(base, "--event", "message.received", "--delivery", "d1"), "not both"},
		{"delivery empty", append(base, "--delivery", ""), "--delivery needs a delivery id"},
		{"no workspace", []string{"deliveries", "replay", "--since", "2026-11-22T10:00:00Z"}, "--workspace is required"},
		{"since unparsable", append(base, "--since", "yesterday"), `--since "yesterday" is not an RFC 3339 time`},
		{"since without zone", append(base, "--since", "2026-11-22T10:00:00"), "--since"},
		{"until unparsable", append(base, "--since", "2026-11-22T10:00:00Z", "--until", "noon"), `--until "noon" is not an RFC 3339 time`},
		{"until before since", append(base, "--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T09:00:00Z"), "--until must be after --since"},
		{"until equals since", append(base, "--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T10:00:00Z"), "--until must be after --since"},
		{"stray argument", append(base, "--since", "2026-11-22T10:00:00Z", "now"), "unexpected argument"},
		{"help", []string{"deliveries", "replay", "-h"}, "usage: parleyctl deliveries replay --workspace ID (--since RFC3339 [--until RFC3339] [--event KIND] | --delivery ID)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, tt.args, tt.want)
		})
	}
}

// The workspace is checked with the gateway, then the dispatcher queues
// the replay; the given bounds and kind are sent as typed.
func TestDeliveriesReplaySendsTheRequest(t *testing.T) {
	t.Parallel()
	replay := map[string]any{"id": "r1", "workspace_id": "w1", "since": "2026-11-22T10:00:00Z", "until": "2026-11-22T11:00:00Z", "event": "message.received", "queued": 7}
	rec := &recorder{answers: map[string]any{
		"GET /admin/workspaces/w1": map[string]any{"workspace": map[string]any{"id": "w1"}},
		"POST /admin/replays":      map[string]any{"replay": replay, "next": nil},
	}}
	var out bytes.Buffer
	err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"deliveries", "replay", "--workspace", "w1",
		"--since", "2026-11-22T10:00:00Z", "--until", "2026-11-22T11:00:00+00:00", "--event", "message.received"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rec.calls, "; ") != "gateway/admin GET /admin/workspaces/w1; webhook-dispatcher/admin POST /admin/replays" {
		t.Fatalf("calls %v", rec.calls)
	}
	body := rec.bodies[1]
	if body["workspace_id"] != "w1" || body["since"] != "2026-11-22T10:00:00Z" || body["until"] != "2026-11-22T11:00:00+00:00" || body["event"] != "message.received" || body["resume"] != nil {
		t.Errorf("body %v", body)
	}
	var printed struct {
		Replay map[string]any `json:"replay"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.Replay["id"] != "r1" || printed.Replay["queued"] != float64(7) {
		t.Errorf("printed %s (%v)", out.String(), err)
	}

	// Without --until and --event, neither is sent.
	rec.calls, rec.bodies = nil, nil
	if err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"deliveries", "replay", "--workspace", "w1", "--since", "2026-11-22T10:00:00.5Z"}); err != nil {
		t.Fatal(err)
	}
	if _, sent := rec.bodies[1]["until"]; sent {
		t.Errorf("until sent though not given: %v", rec.bodies[1])
	}
	if _, sent := rec.bodies[1]["event"]; sent {
		t.Errorf("event sent though not given: %v", rec.bodies[1])
	}
}

// sequence answers POST /admin/replays from a list, one answer per call,
// and every other route with an empty object.
type sequence struct {
	answers []map[string]any
	bodies  []map[string]any
}

func (s *sequence) CallJSON(_ context.Context, _, _, _, method, path string, in, out any) error {
	if method != http.MethodPost || path != "/admin/replays" {
		return nil
	}
	raw, _ := json.Marshal(in)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.bodies = append(s.bodies, body)
	answer := s.answers[len(s.bodies)-1]
	raw, _ = json.Marshal(answer)
	return json.Unmarshal(raw, out)
}

func (s *sequence) CallRaw(context.Context, string, string, *rpcv1.Request, any) error {
	return errors.New("a replay makes no raw calls")
}

// A replay the dispatcher queues in parts is continued with the cursor it
// gives until it is whole; one result is printed with the total.
func TestDeliveriesReplayContinuesUntilEverythingIsQueued(t *testing.T) {
	t.Parallel()
	head := map[string]any{"id": "r1", "workspace_id": "w1", "since": "2026-11-22T10:00:00Z", "until": nil, "event": nil}
	part := func(queued int, next any) map[string]any {
		r := map[string]any{"queued": queued}
		for k, v := range head {
			r[k] = v
		}
		return map[string]any{"replay": r, "next": next}
	}
	seq := &sequence{answers: []map[string]any{
		part(100000, map[string]any{"replay_id": "r1", "from_seq": 100001, "end_seq": 250000}),
		part(100000, map[string]any{"replay_id": "r1", "from_seq": 200001, "end_seq": 250000}),
		part(50000, nil),
	}}
	var out bytes.Buffer
	if err := cli.New(testConfig(), seq, &out).Run(context.Background(), []string{"deliveries", "replay", "--workspace", "w1", "--since", "2026-11-22T10:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	if len(seq.bodies) != 3 || seq.bodies[0]["resume"] != nil {
		t.Fatalf("bodies %v", seq.bodies)
	}
	for i, from := range []float64{100001, 200001} {
		resume, _ := seq.bodies[i+1]["resume"].(map[string]any)
		if resume["replay_id"] != "r1" || resume["from_seq"] != from || resume["end_seq"] != float64(250000) || seq.bodies[i+1]["since"] != "2026-11-22T10:00:00Z" {
			t.Errorf("call %d body %v", i+2, seq.bodies[i+1])
		}
	}
	var printed struct {
		Replay map[string]any `json:"replay"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.Replay["queued"] != float64(250000) || printed.Replay["id"] != "r1" {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
	if strings.Count(out.String(), `"replay"`) != 1 {
		t.Errorf("printed more than one result: %s", out.String())
	}
}

// An unknown workspace fails at the gateway and the dispatcher is not
// asked; the dispatcher's refusals come back as they are.
func TestDeliveriesReplayRefusals(t *testing.T) {
	t.Parallel()
	args := []string{"deliveries", "replay", "--workspace", "w1", "--since", "2026-11-22T10:00:00Z"}
	unknown := &recorder{answers: map[string]any{
		"GET /admin/workspaces/w1": errs.NotFound("workspace_not_found", "workspace not found"),
	}}
	err := cli.New(testConfig(), unknown, &bytes.Buffer{}).Run(context.Background(), args)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusNotFound || e.Code != "workspace_not_found" {
		t.Fatalf("unknown workspace: %v", err)
	}
	if len(unknown.calls) != 1 {
		t.Errorf("calls %v", unknown.calls)
	}
	paused := &recorder{answers: map[string]any{
		"GET /admin/workspaces/w1": map[string]any{},
		"POST /admin/replays":      errs.New(http.StatusConflict, "webhook_paused", "the webhook is paused; save it again (parleyctl webhook resave) before replaying"),
	}}
	var out bytes.Buffer
	err = cli.New(testConfig(), paused, &out).Run(context.Background(), args)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusConflict || e.Code != "webhook_paused" {
		t.Fatalf("paused webhook: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout on failure: %s", out.String())
	}
}
