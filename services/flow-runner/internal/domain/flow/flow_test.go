package flow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGoldenValid(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/valid/*.json")
	if len(files) == 0 {
		t.Fatal("no golden definitions")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(data, ParseOptions{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d.Start == nil || len(d.Nodes) == 0 || d.Name == "" {
				t.Fatalf("incomplete definition %+v", d)
			}
		})
	}
}

func TestGoldenInvalid(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/invalid/*.json")
	if len(files) == 0 {
		t.Fatal("no golden definitions")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data, ParseOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if got := err.Error(); got != strings.TrimSpace(string(want)) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// doc wraps nodes (JSON objects) after a start that leads to the first.
func doc(nodes ...string) []byte {
	first := "x"
	if len(nodes) > 0 {
		i := strings.Index(nodes[0], `"id": "`)
		if i >= 0 {
			rest := nodes[0][i+7:]
			first = rest[:strings.Index(rest, `"`)]
		}
	}
	all := append([]string{`{"id": "start", "type": "start", "next": "` + first + `"}`}, nodes...)
	return []byte(`{"name": "t", "triggers": ["api"], "nodes": [` + strings.Join(all, ",") + `]}`)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	closed := ParseOptions{StagesOpen: map[Stage]bool{}}
	tests := []struct {
		name      string
		give      []byte
		opts      ParseOptions
		wantNode  string
		wantField string
		wantIn    string
	}{
		{"not json", []byte(`{`), ParseOptions{}, "", "", "not a JSON object"},
		{"array document", []byte(`[]`), ParseOptions{}, "", "", "not a JSON object"},
		{"no name", []byte(`{"nodes": [{"id": "s", "type": "start"}]}`), ParseOptions{}, "", "name", "required"},
		{"name not string", []byte(`{"name": 1, "nodes": []}`), ParseOptions{}, "", "name", "must be a string"},
		{"bad trigger", []byte(`{"name": "t", "triggers": ["sms"], "nodes": [{"id": "s", "type": "start"}]}`), ParseOptions{}, "", "triggers[0]", "unknown trigger"},
		{"no nodes", []byte(`{"name": "t"}`), ParseOptions{}, "", "nodes", "required"},
		{"empty nodes", []byte(`{"name": "t", "nodes": []}`), ParseOptions{}, "", "nodes", "empty"},
		{"nodes not array", []byte(`{"name": "t", "nodes": {}}`), ParseOptions{}, "", "nodes", "must be an array"},
		{"node not object", []byte(`{"name": "t", "nodes": [1]}`), ParseOptions{}, "", "nodes[0]", "must be an object"},
		{"no start", []byte(`{"name": "t", "nodes": [{"id": "e", "type": "end"}]}`), ParseOptions{}, "", "nodes", "no start"},
		{"missing id", []byte(`{"name": "t", "nodes": [{"type": "start"}]}`), ParseOptions{}, "", "nodes[0].id", "required"},
		{"slash in id", []byte(`{"name": "t", "nodes": [{"id": "a/b", "type": "start"}]}`), ParseOptions{}, "", "nodes[0].id", "not a node id"},
		{"missing type", doc(`{"id": "x"}`), ParseOptions{}, "x", "type", "required"},
		{"unknown type", doc(`{"id": "x", "type": "teleport"}`), ParseOptions{}, "x", "type", "unknown node type"},
		{"duplicate id", doc(`{"id": "x", "type": "end"}`, `{"id": "x", "type": "end"}`), ParseOptions{}, "x", "id", "duplicate id"},
		{"unknown next", doc(`{"id": "x", "type": "send_message", "message": {"text": "a"}, "next": "y"}`), ParseOptions{}, "x", "next", `unknown node "y"`},
		{"empty next", doc(`{"id": "x", "type": "send_message", "message": {"text": "a"}, "next": ""}`), ParseOptions{}, "x", "next", "empty target"},
		{"next to itself", doc(`{"id": "x", "type": "send_message", "message": {"text": "a"}, "next": "x"}`), ParseOptions{}, "x", "next", "itself"},
		{"number out of range", doc(`{"id": "x", "type": "variable", "name": "n", "value": {"big": [1e400]}, "next": "e"}`, `{"id": "e", "type": "end"}`), ParseOptions{}, "x", "value", "has a number beyond ±1.7976931348623157e+308"},
		{"whole number out of range", doc(`{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "e", "max_iterations": -1e999}`, `{"id": "e", "type": "end"}`), ParseOptions{}, "x", "max_iterations", "has a number beyond"},
		{"next not string", doc(`{"id": "x", "type": "send_message", "message": {"text": "a"}, "next": 3}`), ParseOptions{}, "x", "next", "must be a string"},
		{"unreachable", doc(`{"id": "x", "type": "end"}`, `{"id": "y", "type": "end"}`), ParseOptions{}, "y", "", "unreachable"},
		{"unknown then", doc(`{"id": "x", "type": "condition", "if": "true", "then": "nope"}`), ParseOptions{}, "x", "then", "unknown node"},
		{"unknown else", doc(`{"id": "x", "type": "condition", "if": "true", "else": "nope"}`), ParseOptions{}, "x", "else", "unknown node"},
		{"unknown case next", doc(`{"id": "x", "type": "condition", "cases": [{"if": "true", "next": "nope"}]}`), ParseOptions{}, "x", "cases[0].next", "unknown node"},
		{"unknown on_error", doc(`{"id": "x", "type": "http", "url": "https://e.x", "on_error": "nope"}`), ParseOptions{}, "x", "on_error", "unknown node"},
		{"unknown body", doc(`{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "nope"}`), ParseOptions{}, "x", "body", "unknown node"},
		{"unknown intent next", doc(`{"id": "x", "type": "intent", "text": "t", "intents": [{"name": "a", "next": "nope"}]}`), ParseOptions{}, "x", "intents[0].next", "unknown node"},
		{"message missing", doc(`{"id": "x", "type": "send_message"}`), ParseOptions{}, "x", "message", "required"},
		{"message type", doc(`{"id": "x", "type": "send_message", "message": {"type": "video", "text": "a"}}`), ParseOptions{}, "x", "message.type", "not one of"},
		{"message text missing", doc(`{"id": "x", "type": "send_message", "message": {"type": "text"}}`), ParseOptions{}, "x", "message.text", "required"},
		{"quick replies missing", doc(`{"id": "x", "type": "send_message", "message": {"type": "quick_replies", "text": "a"}}`), ParseOptions{}, "x", "message.quick_replies", "1 to 13"},
		{"quick replies on text", doc(`{"id": "x", "type": "send_message", "message": {"type": "text", "text": "a", "quick_replies": ["b"]}}`), ParseOptions{}, "x", "message.quick_replies", "not used by a text message"},
		{"too many buttons", doc(`{"id": "x", "type": "send_message", "message": {"type": "buttons", "text": "a", "buttons": [
			{"type": "postback", "title": "1", "payload": "1"}, {"type": "postback", "title": "2", "payload": "2"},
			{"type": "postback", "title": "3", "payload": "3"}, {"type": "postback", "title": "4", "payload": "4"}]}}`), ParseOptions{}, "x", "message.buttons", "at most 3"},
		{"button type", doc(`{"id": "x", "type": "send_message", "message": {"type": "buttons", "text": "a", "buttons": [{"type": "call", "title": "1"}]}}`), ParseOptions{}, "x", "message.buttons[0].type", "not one of"},
		{"button without url", doc(`{"id": "x", "type": "send_message", "message": {"type": "buttons", "text": "a", "buttons": [{"type": "web_url", "title": "1"}]}}`), ParseOptions{}, "x", "message.buttons[0].url", "required"},
		{"button without payload", doc(`{"id": "x", "type": "send_message", "message": {"type": "buttons", "text": "a", "buttons": [{"type": "postback", "title": "1"}]}}`), ParseOptions{}, "x", "message.buttons[0].payload", "required"},
		{"carousel empty", doc(`{"id": "x", "type": "send_message", "message": {"type": "carousel", "cards": []}}`), ParseOptions{}, "x", "message.cards", "1 to 10"},
		{"card without title", doc(`{"id": "x", "type": "send_message", "message": {"type": "carousel", "cards": [{"subtitle": "s"}]}}`), ParseOptions{}, "x", "message.cards[0].title", "required"},
		{"bad template", doc(`{"id": "x", "type": "send_message", "message": {"text": "{{ nope }}"}}`), ParseOptions{}, "x", "message.text", "unknown name nope"},
		{"question text missing", doc(`{"id": "x", "type": "question"}`), ParseOptions{}, "x", "text", "required"},
		{"question input type", doc(`{"id": "x", "type": "question", "text": "?", "input_type": "date"}`), ParseOptions{}, "x", "input_type", "not one of"},
		{"save_as not ident", doc(`{"id": "x", "type": "question", "text": "?", "save_as": "a.b"}`), ParseOptions{}, "x", "save_as", "not a variable name"},
		{"save_as input", doc(`{"id": "x", "type": "question", "text": "?", "save_as": "input"}`), ParseOptions{}, "x", "save_as", "reserved"},
		{"condition without if", doc(`{"id": "x", "type": "condition", "then": "x"}`), ParseOptions{}, "x", "if", "required"},
		{"condition bad if", doc(`{"id": "x", "type": "condition", "if": "vars.a ==", "then": "x"}`), ParseOptions{}, "x", "if", "expression"},
		{"cases and if", doc(`{"id": "x", "type": "condition", "if": "true", "cases": [{"if": "true", "next": "x"}]}`), ParseOptions{}, "x", "cases", "cannot be combined"},
		{"cases empty", doc(`{"id": "x", "type": "condition", "cases": []}`), ParseOptions{}, "x", "cases", "at least one"},
		{"case without next", doc(`{"id": "x", "type": "condition", "cases": [{"if": "true"}]}`), ParseOptions{}, "x", "cases[0].next", "required"},
		{"cases closed", doc(`{"id": "x", "type": "condition", "cases": [{"if": "true", "next": "e"}]}`, `{"id": "e", "type": "end"}`), closed, "x", "cases", "condition.cases is not open"},
		{"variable without set", doc(`{"id": "x", "type": "variable"}`), ParseOptions{}, "x", "set", "required"},
		{"variable set not object", doc(`{"id": "x", "type": "variable", "set": [1]}`), ParseOptions{}, "x", "set", "must be an object"},
		{"variable set bad name", doc(`{"id": "x", "type": "variable", "set": {"1a": "1"}}`), ParseOptions{}, "x", "set.1a", "not a variable name"},
		{"variable set bad expr", doc(`{"id": "x", "type": "variable", "set": {"a": "hello"}}`), ParseOptions{}, "x", "set.a", "unknown name hello"},
		{"variable op unknown", doc(`{"id": "x", "type": "variable", "name": "a", "op": "multiply", "value": "2"}`), ParseOptions{}, "x", "op", "not one of"},
		{"variable op without name", doc(`{"id": "x", "type": "variable", "op": "set", "value": "2"}`), ParseOptions{}, "x", "name", "required"},
		{"variable op without value", doc(`{"id": "x", "type": "variable", "name": "a", "op": "append"}`), ParseOptions{}, "x", "value", "required"},
		{"variable clear with value", doc(`{"id": "x", "type": "variable", "name": "a", "op": "clear", "value": "1"}`), ParseOptions{}, "x", "value", "no value"},
		{"variable op closed", doc(`{"id": "x", "type": "variable", "name": "a", "op": "increment"}`), closed, "x", "op", "variable.op is not open"},
		{"http without url", doc(`{"id": "x", "type": "http"}`), ParseOptions{}, "x", "url", "required"},
		{"http method", doc(`{"id": "x", "type": "http", "url": "https://e.x", "method": "TRACE"}`), ParseOptions{}, "x", "method", "not one of"},
		{"http timeout", doc(`{"id": "x", "type": "http", "url": "https://e.x", "timeout_ms": 10001}`), ParseOptions{}, "x", "timeout_ms", "from 1 to 10000"},
		{"http timeout fraction", doc(`{"id": "x", "type": "http", "url": "https://e.x", "timeout_ms": 1.5}`), ParseOptions{}, "x", "timeout_ms", "whole number"},
		{"http headers", doc(`{"id": "x", "type": "http", "url": "https://e.x", "headers": {"A": 1}}`), ParseOptions{}, "x", "headers", "object of strings"},
		{"http header name", doc(`{"id": "x", "type": "http", "url": "https://e.x", "headers": {"A B": "1"}}`), ParseOptions{}, "x", "headers", "not a header name"},
		{"http header template", doc(`{"id": "x", "type": "http", "url": "https://e.x", "headers": {"A": "{{"}}`), ParseOptions{}, "x", "headers.A", "without its"},
		{"http body on get", doc(`{"id": "x", "type": "http", "url": "https://e.x", "body": {"a": 1}}`), ParseOptions{}, "x", "body", "no body"},
		{"http body template", doc(`{"id": "x", "type": "http", "method": "POST", "url": "https://e.x", "body": {"a": "{{ 1 + }}"}}`), ParseOptions{}, "x", "body", "expression"},
		{"llm without prompt", doc(`{"id": "x", "type": "llm"}`), ParseOptions{}, "x", "prompt", "required"},
		{"llm temperature", doc(`{"id": "x", "type": "llm", "prompt": "p", "temperature": 3}`), ParseOptions{}, "x", "temperature", "from 0 to 2"},
		{"knowledge top_k", doc(`{"id": "x", "type": "knowledge", "query": "q", "top_k": 11}`), ParseOptions{}, "x", "top_k", "from 1 to 10"},
		{"knowledge without query", doc(`{"id": "x", "type": "knowledge"}`), ParseOptions{}, "x", "query", "required"},
		{"intent without intents", doc(`{"id": "x", "type": "intent", "text": "t"}`), ParseOptions{}, "x", "intents", "at least one"},
		{"intent duplicate", doc(`{"id": "x", "type": "intent", "text": "t", "intents": [{"name": "a"}, {"name": "a"}]}`), ParseOptions{}, "x", "intents[1].name", "duplicate"},
		{"extract without fields", doc(`{"id": "x", "type": "extract", "text": "t"}`), ParseOptions{}, "x", "fields", "at least one"},
		{"extract field type", doc(`{"id": "x", "type": "extract", "text": "t", "fields": [{"name": "a", "type": "blob"}]}`), ParseOptions{}, "x", "fields[0].type", "not one of"},
		{"loop without over", doc(`{"id": "x", "type": "loop", "as": "i", "body": "b"}`, `{"id": "b", "type": "end"}`), ParseOptions{}, "x", "over", "required"},
		{"loop without as", doc(`{"id": "x", "type": "loop", "over": "[1]", "body": "b"}`, `{"id": "b", "type": "end"}`), ParseOptions{}, "x", "as", "required"},
		{"loop without body", doc(`{"id": "x", "type": "loop", "over": "[1]", "as": "i"}`), ParseOptions{}, "x", "body", "required"},
		{"loop max", doc(`{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "b", "max_iterations": 0}`, `{"id": "b", "type": "end"}`), ParseOptions{}, "x", "max_iterations", "from 1 to 1000"},
		{"loop body back to loop", doc(`{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "b"}`, `{"id": "b", "type": "send_message", "message": {"text": "a"}, "next": "x"}`), ParseOptions{}, "x", "body", "leads back"},
		{"call_flow without flow", doc(`{"id": "x", "type": "call_flow"}`), ParseOptions{}, "x", "flow_id", "required"},
		{"call_flow input not object", doc(`{"id": "x", "type": "call_flow", "flow_id": "f", "input": [1]}`), ParseOptions{}, "x", "input", "must be an object"},
		{"call_flow closed", doc(`{"id": "x", "type": "call_flow", "flow_id": "f"}`), closed, "x", "type", "call_flow is not open"},
		{"script without code", doc(`{"id": "x", "type": "script"}`), ParseOptions{}, "x", "code", "required"},
		{"script closed", doc(`{"id": "x", "type": "script", "code": "return 1"}`), closed, "x", "type", "script is not open"},
		{"end with next", doc(`{"id": "x", "type": "end", "next": "x"}`), ParseOptions{}, "x", "next", "no next"},
		{"end output not object", doc(`{"id": "x", "type": "end", "output": "a"}`), ParseOptions{}, "x", "output", "must be an object"},
		{"end output template", doc(`{"id": "x", "type": "end", "output": {"a": "{{ vars. }}"}}`), ParseOptions{}, "x", "output", "expression"},
		{"delay until closed", doc(`{"id": "x", "type": "delay", "until": "2026-01-01"}`), closed, "x", "until", "delay.until is not open"},
		{"delay without seconds", doc(`{"id": "x", "type": "delay"}`), ParseOptions{}, "x", "seconds", "required (or the staged until)"},
		{"delay seconds zero", doc(`{"id": "x", "type": "delay", "seconds": 0}`), ParseOptions{}, "x", "seconds", "from 1 to 86400"},
		{"delay seconds over a day", doc(`{"id": "x", "type": "delay", "seconds": 86401}`), ParseOptions{}, "x", "seconds", "from 1 to 86400"},
		{"delay seconds fraction", doc(`{"id": "x", "type": "delay", "seconds": 1.5}`), ParseOptions{}, "x", "seconds", "whole number"},
		{"delay seconds not a number", doc(`{"id": "x", "type": "delay", "seconds": "60"}`), ParseOptions{}, "x", "seconds", "must be a number"},
		{"delay seconds and until", doc(`{"id": "x", "type": "delay", "seconds": 5, "until": "2026-12-01T00:00:00Z"}`), ParseOptions{}, "x", "seconds", "cannot be combined"},
		{"delay until not a time", doc(`{"id": "x", "type": "delay", "until": "2026-01-01"}`), ParseOptions{}, "x", "until", "not an RFC 3339 time"},
		{"delay until empty", doc(`{"id": "x", "type": "delay", "until": " "}`), ParseOptions{}, "x", "until", "required"},
		{"delay until bad template", doc(`{"id": "x", "type": "delay", "until": "{{ nope }}"}`), ParseOptions{}, "x", "until", "unknown name nope"},
		{"ai_response top_k zero", doc(`{"id": "x", "type": "ai_response", "top_k": 0}`), ParseOptions{}, "x", "top_k", "from 1 to 10"},
		{"ai_response top_k eleven", doc(`{"id": "x", "type": "ai_response", "top_k": 11}`), ParseOptions{}, "x", "top_k", "from 1 to 10"},
		{"ai_response knowledge not bool", doc(`{"id": "x", "type": "ai_response", "knowledge": "yes"}`), ParseOptions{}, "x", "knowledge", "true or false"},
		{"ai_response system not string", doc(`{"id": "x", "type": "ai_response", "system": 1}`), ParseOptions{}, "x", "system", "must be a string"},
		{"ai_response bad fallback", doc(`{"id": "x", "type": "ai_response", "fallback": "{{"}`), ParseOptions{}, "x", "fallback", "without its"},
		{"handover bad text", doc(`{"id": "x", "type": "handover", "text": "{{ vars. }}"}`), ParseOptions{}, "x", "text", "expression"},
		{"tag without tags", doc(`{"id": "x", "type": "tag"}`), ParseOptions{}, "x", "tags", "at least one tag"},
		{"tag empty tags", doc(`{"id": "x", "type": "tag", "tags": []}`), ParseOptions{}, "x", "tags", "at least one tag"},
		{"tag tags not strings", doc(`{"id": "x", "type": "tag", "tags": [1]}`), ParseOptions{}, "x", "tags", "array of strings"},
		{"tag and tags", doc(`{"id": "x", "type": "tag", "tag": "a", "tags": ["b"]}`), ParseOptions{}, "x", "tag", "cannot be combined"},
		{"tag blank", doc(`{"id": "x", "type": "tag", "tags": ["ok", " "]}`), ParseOptions{}, "x", "tags[1]", "empty"},
		{"tag too long", doc(`{"id": "x", "type": "tag", "tags": ["` + strings.Repeat("é", 51) + `"]}`), ParseOptions{}, "x", "tags[0]", "this one has 51"},
		{"tag control character", doc(`{"id": "x", "type": "tag", "tag": "a\tb"}`), ParseOptions{}, "x", "tag", "control characters"},
		{"tag too many", doc(`{"id": "x", "type": "tag", "tags": [` + strings.Repeat(`"t",`, 20) + `"t"]}`), ParseOptions{}, "x", "tags", "at most 20"},
		{"tag bad template", doc(`{"id": "x", "type": "tag", "tags": ["{{ nope }}"]}`), ParseOptions{}, "x", "tags[0]", "unknown name nope"},
		{"assign without operator", doc(`{"id": "x", "type": "assign"}`), ParseOptions{}, "x", "operator", "required"},
		{"assign not an email", doc(`{"id": "x", "type": "assign", "operator": "ann"}`), ParseOptions{}, "x", "operator", "not one plain email address"},
		{"assign named address", doc(`{"id": "x", "type": "assign", "operator": "Ann <ann@example.com>"}`), ParseOptions{}, "x", "operator", "not one plain email address"},
		{"assign too long", doc(`{"id": "x", "type": "assign", "operator": "` + strings.Repeat("a", 250) + `@e.xy"}`), ParseOptions{}, "x", "operator", "at most 254"},
		{"action without kind", doc(`{"id": "x", "type": "action"}`), ParseOptions{}, "x", "action", "required"},
		{"action set_variable without value", doc(`{"id": "x", "type": "action", "action": "set_variable", "name": "a"}`), ParseOptions{}, "x", "value", "required"},
		{"action webhook without url", doc(`{"id": "x", "type": "action", "action": "webhook_call"}`), ParseOptions{}, "x", "url", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.give, tt.opts)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if ve.NodeID != tt.wantNode || ve.Field != tt.wantField || !strings.Contains(ve.Reason, tt.wantIn) {
				t.Fatalf("got {%q %q %q}, want {%q %q …%q…}", ve.NodeID, ve.Field, ve.Reason, tt.wantNode, tt.wantField, tt.wantIn)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || (tt.wantNode != "" && !strings.Contains(msg, tt.wantNode)) || (tt.wantField != "" && !strings.Contains(msg, tt.wantField)) {
				t.Fatalf("Error() %q does not name node and field on one line", msg)
			}
		})
	}
}

// TestCheckNewBoundsNameAndDescription: a new version's name and
// description are bounded, in characters, and no loop's next names the
// loop; a stored one past the rules still parses, and runs.
func TestCheckNewBoundsNameAndDescription(t *testing.T) {
	t.Parallel()
	doc := func(name, description string) []byte {
		return []byte(`{"name": "` + name + `", "description": "` + description +
			`", "triggers": ["api"], "nodes": [{"id": "s", "type": "start", "next": "e"}, {"id": "e", "type": "end"}]}`)
	}
	for _, tt := range []struct {
		name, give, wantField, wantIn string
	}{
		{"at the bounds", string(doc(strings.Repeat("é", MaxNameLength), strings.Repeat("d", MaxDescriptionLength))), "", ""},
		{"name too long", string(doc(strings.Repeat("é", 201), "")), "name", "at most 200 characters (got 201)"},
		{"description too long", string(doc("t", strings.Repeat("d", 2001))), "description", "at most 2000 characters (got 2001)"},
		{"loop next to itself", `{"name": "t", "triggers": ["api"], "nodes": [{"id": "s", "type": "start", "next": "x"},
			{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "b", "next": "x"}, {"id": "b", "type": "end"}]}`, "next", "names the node itself"},
	} {
		def, err := Parse([]byte(tt.give), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: Parse: %v, want a stored version read", tt.name, err)
		}
		err = def.CheckNew()
		var ve *ValidationError
		switch {
		case tt.wantField == "" && err != nil:
			t.Errorf("%s: CheckNew: %v", tt.name, err)
		case tt.wantField != "" && (!errors.As(err, &ve) || ve.Field != tt.wantField || !strings.Contains(ve.Reason, tt.wantIn)):
			t.Errorf("%s: CheckNew: %v, want %s %q", tt.name, err, tt.wantField, tt.wantIn)
		}
	}
}

func TestStagesOpenWhenListed(t *testing.T) {
	t.Parallel()
	stages, err := ParseStages("call_flow, script,condition.cases,delay.until,variable.op")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile("testdata/valid/every_node.json")
	if _, err := Parse(data, ParseOptions{StagesOpen: stages}); err != nil {
		t.Fatal(err)
	}
	delete(stages, StageScript)
	if _, err := Parse(data, ParseOptions{StagesOpen: stages}); err == nil || !strings.Contains(err.Error(), `node "js"`) {
		t.Fatalf("script closed: %v", err)
	}
	if _, err := ParseStages("call_flow,scripts"); err == nil {
		t.Fatal("an unknown stage was accepted")
	}
}

func TestNotInvokable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		give     []byte
		wantNode string
	}{
		{"every invokable node", mustRead(t, "testdata/valid/every_node.json"), ""},
		{"order status", mustRead(t, "testdata/valid/order_status.json"), ""},
		{"chat only", mustRead(t, "testdata/valid/chat_only.json"), "wait"},
		{"tool", doc(`{"id": "x", "type": "tool"}`), "x"},
		{"ai_response", doc(`{"id": "x", "type": "ai_response"}`), "x"},
		{"handover", doc(`{"id": "x", "type": "handover"}`), "x"},
		{"assign", doc(`{"id": "x", "type": "assign", "operator": "ann@example.com"}`), "x"},
		{"tag", doc(`{"id": "x", "type": "tag", "tags": ["vip"]}`), "x"},
		{"delay", doc(`{"id": "x", "type": "delay", "seconds": 60}`), "x"},
		{"order", doc(`{"id": "x", "type": "order"}`), "x"},
		{"resume_ai", doc(`{"id": "x", "type": "resume_ai"}`), "x"},
		{"submit_form", doc(`{"id": "x", "type": "submit_form"}`), "x"},
		{"action other", doc(`{"id": "x", "type": "action", "action": "send_email"}`), "x"},
		{"action set_variable", doc(`{"id": "x", "type": "action", "action": "set_variable", "name": "a", "value": "1"}`), ""},
		{"file question", doc(`{"id": "x", "type": "question", "text": "?", "input_type": "file"}`), "x"},
		{"capture contact", doc(`{"id": "x", "type": "extract", "text": "t", "capture_contact": true}`), "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Parse(tt.give, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ni := d.NotInvokable()
			switch {
			case tt.wantNode == "" && ni != nil:
				t.Fatalf("NotInvokable: %v", ni)
			case tt.wantNode != "" && (ni == nil || ni.NodeID != tt.wantNode):
				t.Fatalf("NotInvokable: %v, want node %q", ni, tt.wantNode)
			case ni != nil && !strings.Contains(ni.Error(), tt.wantNode):
				t.Fatalf("Error() %q does not name the node", ni.Error())
			}
		})
	}
}

func TestTypedModel(t *testing.T) {
	t.Parallel()
	d, err := Parse(mustRead(t, "testdata/valid/every_node.json"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, ok := d.Node("call").(*HTTP)
	if !ok || h.Method != "POST" || h.Timeout.Milliseconds() != 5000 || h.OnError != "llm" || len(h.Headers) != 1 || h.Body == nil {
		t.Fatalf("http node %+v", d.Node("call"))
	}
	v := d.Node("set").(*Variable)
	if len(v.Set) != 3 || v.Set[0].Name != "count" || v.Set[1].Name != "greeting" || v.Set[2].Name != "list" {
		t.Fatalf("set keeps document order: %+v", v.Set)
	}
	l := d.Node("loop").(*Loop)
	if got := l.Targets(); len(got) != 2 || got[0] != (Edge{"body", "each"}) || got[1] != (Edge{"next", "sub"}) {
		t.Fatalf("loop targets %v", got)
	}
	c := d.Node("cases").(*Condition)
	if len(c.Cases) != 2 || c.Targets()[1].Field != "cases[1].next" {
		t.Fatalf("cases %+v", c)
	}
	if d.Node("kb").(*Knowledge).TopK != 5 || !d.HasTrigger("chat") || d.Waits() == nil {
		t.Fatal("knowledge, triggers or waits")
	}
}

// TestChatOnlyModel: the chat-only nodes' fields, with their defaults; a
// template that renders at run time is checked then, not at publish.
func TestChatOnlyModel(t *testing.T) {
	t.Parallel()
	d, err := Parse([]byte(`{"name": "c", "triggers": ["chat"], "nodes": [
		{"id": "start", "type": "start", "next": "ai"},
		{"id": "ai", "type": "ai_response", "next": "ai2"},
		{"id": "ai2", "type": "ai_response", "system": "Be {{vars.contact.name}}", "knowledge": false, "top_k": 10, "fallback": "Sorry", "next": "h"},
		{"id": "h", "type": "handover", "text": "Passing you on", "next": "r"},
		{"id": "r", "type": "resume_ai", "next": "t"},
		{"id": "t", "type": "tag", "tags": ["vip", "{{vars.message.text}}"], "next": "a"},
		{"id": "a", "type": "assign", "operator": "{{vars.input.text}}", "next": "w"},
		{"id": "w", "type": "delay", "seconds": 86400, "next": "u"},
		{"id": "u", "type": "delay", "until": "{{vars.input.text}}", "next": "tool"},
		{"id": "tool", "type": "tool", "next": "e"},
		{"id": "e", "type": "end"}]}`), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Node("ai").(*AIResponse); n.System != nil || !n.Knowledge || n.TopK != 3 || n.Fallback != nil || n.Next != "ai2" {
		t.Fatalf("ai_response defaults %+v", n)
	}
	if n := d.Node("ai2").(*AIResponse); n.System == nil || n.Knowledge || n.TopK != 10 || n.Fallback.Raw() != "Sorry" {
		t.Fatalf("ai_response %+v", n)
	}
	if n := d.Node("h").(*Handover); n.Text.Raw() != "Passing you on" || n.Next != "r" {
		t.Fatalf("handover %+v", n)
	}
	if n := d.Node("t").(*Tag); len(n.Tags) != 2 || n.Tags[1].IsStatic() {
		t.Fatalf("tag %+v", n)
	}
	if n := d.Node("w").(*Delay); n.Seconds != 86400 || n.Until != nil {
		t.Fatalf("delay %+v", n)
	}
	if n := d.Node("u").(*Delay); n.Seconds != 0 || n.Until == nil {
		t.Fatalf("delay until %+v", n)
	}
	if d.AINode().ID() != "ai" || d.Waits().ID() != "w" || d.NotInvokable().NodeID != "ai" {
		t.Fatal("AINode, Waits or NotInvokable")
	}
	c, err := Parse(mustRead(t, "testdata/valid/chat_only.json"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Node("tag").(*Tag); len(n.Tags) != 1 || n.Tags[0].Raw() != "vip" {
		t.Fatalf("tag, for short: %+v", n)
	}
}

// TestChatOnlyBoundsAccepted: each chat-only node's field at its bound is
// published (TestValidationErrors refuses one past it): top_k 1 and 10,
// a delay of 1 and 86,400 seconds, 20 tags, a 50-character tag, and a
// 254-character operator.
func TestChatOnlyBoundsAccepted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give []byte
	}{
		{"ai_response top_k 1", doc(`{"id": "x", "type": "ai_response", "top_k": 1}`)},
		{"ai_response top_k 10", doc(`{"id": "x", "type": "ai_response", "top_k": 10}`)},
		{"delay one second", doc(`{"id": "x", "type": "delay", "seconds": 1}`)},
		{"delay a day", doc(`{"id": "x", "type": "delay", "seconds": 86400}`)},
		{"twenty tags", doc(`{"id": "x", "type": "tag", "tags": [` + strings.Repeat(`"t",`, 19) + `"t"]}`)},
		{"tag of 50 characters", doc(`{"id": "x", "type": "tag", "tags": ["` + strings.Repeat("é", 50) + `"]}`)},
		{"tag of 50 characters, trimmed", doc(`{"id": "x", "type": "tag", "tag": " ` + strings.Repeat("é", 50) + ` "}`)},
		{"operator of 254 characters", doc(`{"id": "x", "type": "assign", "operator": "` + strings.Repeat("a", 249) + `@e.xy"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Parse(tt.give, ParseOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse checks that Parse never panics, and that what it accepts is
// accepted again (parsing is a pure function of the document).
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/valid/*.json", "testdata/invalid/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			b, _ := os.ReadFile(file)
			f.Add(b)
		}
	}
	f.Add(doc(`{"id": "x", "type": "loop", "over": "1..3", "as": "i", "body": "b"}`, `{"id": "b", "type": "variable", "set": {"a": "vars.i + 1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, ParseOptions{})
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not a *ValidationError", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if d.Start == nil || d.Node(d.Start.ID()) == nil {
			t.Fatal("accepted without a start")
		}
		_ = d.NotInvokable()
		if _, err := Parse(data, ParseOptions{}); err != nil {
			t.Fatalf("accepted once, refused again: %v", err)
		}
	})
}

func TestAssistant(t *testing.T) {
	t.Parallel()
	d := Assistant()
	n, ok := d.Node(AssistantNodeID).(*AIResponse)
	if !ok || !n.Knowledge || n.TopK != 3 || n.System != nil || n.Fallback != nil || n.Next != "end" {
		t.Fatalf("assistant node %+v", d.Node(AssistantNodeID))
	}
	if d.Start.Next != AssistantNodeID || d.Node("end").Type() != TypeEnd || !d.HasTrigger("chat") || d.Waits() != nil {
		t.Fatalf("assistant %+v", d)
	}
	if Assistant() != d {
		t.Fatal("the assistant is parsed once")
	}
}
