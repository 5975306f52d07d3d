package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// --delivery replays one delivery: the workspace is checked, the
// dispatcher gets the delivery's id and no range, and the answer is
// printed in the replay command's shape, with the delivery's id.
func TestDeliveriesReplayOfOneDelivery(t *testing.T) {
	t.Parallel()
	replay := map[string]any{"id": "r1", "workspace_id": "w1", "since": "2026-11-22T09:59:00Z", "until": "2026-11-22T10:01:00Z",
		"event": "message.received", "delivery_id": "d1", "queued": 1}
	rec := &recorder{answers: map[string]any{
		"GET /admin/workspaces/w1": map[string]any{"workspace": map[string]any{"id": "w1"}},
		"POST /admin/replays":      map[string]any{"replay": replay, "next": nil},
	}}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"deliveries", "replay", "--workspace", "w1", "--delivery", "d1"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rec.calls, "; ") != "gateway/admin GET /admin/workspaces/w1; webhook-dispatcher/admin POST /admin/replays" {
		t.Fatalf("calls %v", rec.calls)
	}
	if body := rec.bodies[1]; !reflect.DeepEqual(body, map[string]any{"workspace_id": "w1", "delivery_id": "d1"}) {
		t.Errorf("body %v", body)
	}
	var printed map[string]map[string]any
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatalf("printed %s: %v", out.String(), err)
	}
	want := map[string]any{"id": "r1", "workspace_id": "w1", "since": "2026-11-22T09:59:00Z", "until": "2026-11-22T10:01:00Z",
		"event": "message.received", "delivery_id": "d1", "queued": float64(1)}
	if len(printed) != 1 || !reflect.DeepEqual(printed["replay"], want) {
		t.Errorf("printed %s", out.String())
	}
}
