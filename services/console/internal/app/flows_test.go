package app_test

import (
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// TestFlowProblemOf reads the flow-runner's refusals from the fields it
// sends beside the message.
func TestFlowProblemOf(t *testing.T) {
	t.Parallel()
	refusal := func(message string, extra map[string]any) *adminclient.Error {
		e := errs.InvalidRequest("%s", message)
		e.Extra = extra
		return e
	}
	cases := []struct {
		refusal *adminclient.Error
		want    app.FlowProblem
	}{
		{refusal(`node "ask": field "next": unknown node "nowhere"`, map[string]any{"node_id": "ask", "field": "next", "reason": `unknown node "nowhere"`}),
			app.FlowProblem{NodeID: "ask", NodeIndex: -1, Field: "next", Reason: `unknown node "nowhere"`}},
		{refusal(`node "lonely": unreachable from start`, map[string]any{"node_id": "lonely", "reason": "unreachable from start"}),
			app.FlowProblem{NodeID: "lonely", NodeIndex: -1, Reason: "unreachable from start"}},
		// A node named by its place in "nodes".
		{refusal(`field "nodes[3].id": "a/b" is not a node id`, map[string]any{"field": "nodes[3].id", "reason": `"a/b" is not a node id`}),
			app.FlowProblem{NodeIndex: 3, Field: "nodes[3].id", Reason: `"a/b" is not a node id`}},
		{refusal(`field "nodes[12]": must be an object`, map[string]any{"field": "nodes[12]", "reason": "must be an object"}),
			app.FlowProblem{NodeIndex: 12, Field: "nodes[12]", Reason: "must be an object"}},
		{refusal(`field "name": required`, map[string]any{"field": "name", "reason": "required"}),
			app.FlowProblem{NodeIndex: -1, Field: "name", Reason: "required"}},
		// Without a reason field the message is the reason; fields of
		// another type are ignored, never guessed at.
		{refusal("not a JSON object: unexpected end of JSON input", nil),
			app.FlowProblem{NodeIndex: -1, Reason: "not a JSON object: unexpected end of JSON input"}},
		{refusal("odd", map[string]any{"node_id": 7, "field": true}),
			app.FlowProblem{NodeIndex: -1, Reason: "odd"}},
	}
	for _, tc := range cases {
		if got := app.FlowProblemOf(tc.refusal); got != tc.want {
			t.Errorf("FlowProblemOf(%v) = %+v, want %+v", tc.refusal, got, tc.want)
		}
	}
}

func TestOutlineFlow(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"name":"x","nodes":[{"id":"start","type":"start"},7,{"id":3,"type":"ask"},{"id":"end"}]}`)
	want := []app.OutlinedNode{{Index: 0, ID: "start", Type: "start"}, {Index: 1}, {Index: 2, Type: "ask"}, {Index: 3, ID: "end"}}
	if got := app.OutlineFlow(doc); !reflect.DeepEqual(got, want) {
		t.Fatalf("OutlineFlow = %+v, want %+v", got, want)
	}
	for _, bad := range []string{`{"name":`, `[]`, `{"nodes":{}}`} {
		if got := app.OutlineFlow([]byte(bad)); len(got) != 0 {
			t.Errorf("OutlineFlow(%s) = %+v, want none", bad, got)
		}
	}
	byID := app.FlowProblem{NodeID: "end", NodeIndex: -1}
	byIndex := app.FlowProblem{NodeID: "end", NodeIndex: 1}
	if !byID.Names(want[3]) || byID.Names(want[0]) || !byIndex.Names(want[1]) || byIndex.Names(want[3]) {
		t.Fatal("Names marks the wrong node")
	}
	if (app.FlowProblem{NodeIndex: -1}).Names(want[1]) {
		t.Fatal("a problem of the whole document names a node")
	}
}
