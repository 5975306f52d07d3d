package app_test

import (
	"reflect"
	"testing"

	"github.com/parleyhq/parley/services/console/internal/app"
)

// TestParseFlowProblem reads the flow-runner's refusals as its parser
// words them: node and field each optional, quoted as Go quotes.
func TestParseFlowProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		message string
		want    app.FlowProblem
	}{
		{`node "ask": field "next": unknown node "nowhere"`, app.FlowProblem{NodeID: "ask", NodeIndex: -1, Field: "next", Reason: `unknown node "nowhere"`}},
		{`node "a \"b\": c": field "message.buttons[0].next": empty target`, app.FlowProblem{NodeID: `a "b": c`, NodeIndex: -1, Field: "message.buttons[0].next", Reason: "empty target"}},
		{`node "lonely": unreachable from start`, app.FlowProblem{NodeID: "lonely", NodeIndex: -1, Reason: "unreachable from start"}},
		{`field "nodes[3].id": "a/b" is not a node id (1-128 characters, no / or newline)`, app.FlowProblem{NodeIndex: 3, Field: "nodes[3].id", Reason: `"a/b" is not a node id (1-128 characters, no / or newline)`}},
		{`field "nodes[12]": must be an object`, app.FlowProblem{NodeIndex: 12, Field: "nodes[12]", Reason: "must be an object"}},
		{`field "name": required`, app.FlowProblem{NodeIndex: -1, Field: "name", Reason: "required"}},
		{`not a JSON object: unexpected end of JSON input`, app.FlowProblem{NodeIndex: -1, Reason: "not a JSON object: unexpected end of JSON input"}},
		// Malformed quoting is left as reason, never guessed at.
		{`node "ask: broken`, app.FlowProblem{NodeIndex: -1, Reason: `node "ask: broken`}},
		{`node "ask" without colon`, app.FlowProblem{NodeIndex: -1, Reason: `node "ask" without colon`}},
		{``, app.FlowProblem{NodeIndex: -1}},
	}
	for _, tc := range cases {
		if got := app.ParseFlowProblem(tc.message); got != tc.want {
			t.Errorf("ParseFlowProblem(%q) = %+v, want %+v", tc.message, got, tc.want)
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
