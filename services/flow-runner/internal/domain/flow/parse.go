package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
)

// Stage is a feature that opens in stages on the platform (FLOW_STAGES_OPEN).
type Stage string

// The staged features.
const (
	StageCallFlow       Stage = "call_flow"
	StageScript         Stage = "script"
	StageConditionCases Stage = "condition.cases"
	StageDelayUntil     Stage = "delay.until"
	StageVariableOp     Stage = "variable.op"
)

// AllStages lists every staged feature.
var AllStages = []Stage{StageCallFlow, StageScript, StageConditionCases, StageDelayUntil, StageVariableOp}

// ParseStages reads a comma-separated FLOW_STAGES_OPEN value. An unknown
// name is an error, so that a typo does not silently close a feature.
func ParseStages(s string) (map[Stage]bool, error) {
	out := map[Stage]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		known := false
		for _, st := range AllStages {
			if Stage(name) == st {
				known = true
			}
		}
		if !known {
			return nil, fmt.Errorf("unknown flow stage %q", name)
		}
		out[Stage(name)] = true
	}
	return out, nil
}

// ParseOptions tunes Parse.
type ParseOptions struct {
	// StagesOpen is the set of staged features a definition may use; nil
	// opens them all (the platform's default).
	StagesOpen map[Stage]bool
}

func (o ParseOptions) open(s Stage) bool { return o.StagesOpen == nil || o.StagesOpen[s] }

// Document bounds.
const (
	MaxDefinitionBytes = 1 << 20
	MaxNodes           = 1000
	maxIDLen           = 128
	// A flow's name and description are shown in every list of flows
	// (GET /v1/flows, the console), in characters (CheckNew).
	MaxNameLength        = 200
	MaxDescriptionLength = 2000
)

// CheckNew applies the rules a document must meet to be published that a
// version stored before them need not meet to keep running (Parse reads
// stored versions too): the name's and the description's lengths, and a
// loop's next naming the loop.
func (d *Definition) CheckNew() error {
	if n := utf8.RuneCountInString(d.Name); n > MaxNameLength {
		return &ValidationError{Field: "name", Reason: fmt.Sprintf("must be at most %d characters (got %d)", MaxNameLength, n)}
	}
	if n := utf8.RuneCountInString(d.Description); n > MaxDescriptionLength {
		return &ValidationError{Field: "description", Reason: fmt.Sprintf("must be at most %d characters (got %d)", MaxDescriptionLength, n)}
	}
	// No target names its own node (docs/flows.md "The document"):
	// checkGraph lets a loop's through, so that a body naming its loop is
	// told it leads back; a loop whose next is itself, which would run its
	// list again until the run's budget, is refused here.
	for _, n := range d.Nodes {
		if l, ok := n.(*Loop); ok && l.Next == l.ID() {
			return &ValidationError{NodeID: l.ID(), Field: "next", Reason: "names the node itself"}
		}
	}
	return nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse validates a flow document and returns its typed, compiled form. A
// refusal is a *ValidationError naming the node and the field; the first
// problem found, in document order, is the one reported.
func Parse(data []byte, opts ParseOptions) (*Definition, error) {
	if len(data) > MaxDefinitionBytes {
		return nil, &ValidationError{Reason: fmt.Sprintf("definition larger than %d bytes", MaxDefinitionBytes)}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, &ValidationError{Reason: "not a JSON object: " + jsonReason(err)}
	}
	p := &parser{opts: opts}
	doc := p.reader("", "", top)
	d := &Definition{
		Name:        doc.str("name", true),
		Description: doc.str("description", false),
		Triggers:    doc.strings("triggers"),
		byID:        map[string]Node{},
	}
	if p.err != nil {
		return nil, p.err
	}
	if strings.TrimSpace(d.Name) == "" {
		return nil, &ValidationError{Field: "name", Reason: "required"}
	}
	for i, t := range d.Triggers {
		if t != "api" && t != "chat" {
			return nil, &ValidationError{Field: fmt.Sprintf("triggers[%d]", i), Reason: fmt.Sprintf("unknown trigger %q (api, chat)", t)}
		}
	}
	var raws []json.RawMessage
	if !doc.has("nodes") {
		return nil, &ValidationError{Field: "nodes", Reason: "required"}
	}
	if err := json.Unmarshal(top["nodes"], &raws); err != nil {
		return nil, &ValidationError{Field: "nodes", Reason: "must be an array of nodes"}
	}
	if len(raws) == 0 {
		return nil, &ValidationError{Field: "nodes", Reason: "empty"}
	}
	if len(raws) > MaxNodes {
		return nil, &ValidationError{Field: "nodes", Reason: fmt.Sprintf("more than %d nodes", MaxNodes)}
	}
	for i, raw := range raws {
		n, err := p.node(i, raw)
		if err != nil {
			return nil, err
		}
		if _, dup := d.byID[n.ID()]; dup {
			return nil, &ValidationError{NodeID: n.ID(), Field: "id", Reason: "duplicate id"}
		}
		d.byID[n.ID()] = n
		d.Nodes = append(d.Nodes, n)
		if s, ok := n.(*Start); ok {
			if d.Start != nil {
				return nil, &ValidationError{NodeID: n.ID(), Field: "type", Reason: fmt.Sprintf("a second start (the first is %q); a flow has exactly one", d.Start.ID())}
			}
			d.Start = s
		}
	}
	if d.Start == nil {
		return nil, &ValidationError{Field: "nodes", Reason: "no start node; a flow has exactly one"}
	}
	if err := d.checkGraph(); err != nil {
		return nil, err
	}
	return d, nil
}

func jsonReason(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

// checkGraph checks that every edge resolves, that every node is reachable
// from start, and that no loop body leads back to its own loop (an
// iteration that never ends).
func (d *Definition) checkGraph() error {
	for _, n := range d.Nodes {
		for _, e := range n.Targets() {
			if e.To == "" {
				return &ValidationError{NodeID: n.ID(), Field: e.Field, Reason: "empty target"}
			}
			if e.To == n.ID() && n.Type() != TypeLoop {
				return &ValidationError{NodeID: n.ID(), Field: e.Field, Reason: "names the node itself"}
			}
			if d.byID[e.To] == nil {
				return &ValidationError{NodeID: n.ID(), Field: e.Field, Reason: fmt.Sprintf("unknown node %q", e.To)}
			}
		}
	}
	seen := d.reach(d.Start.ID(), "")
	for _, n := range d.Nodes {
		if !seen[n.ID()] {
			return &ValidationError{NodeID: n.ID(), Reason: "unreachable from start"}
		}
	}
	for _, n := range d.Nodes {
		if l, ok := n.(*Loop); ok {
			if d.reach(l.Body, "")[l.ID()] {
				return &ValidationError{NodeID: l.ID(), Field: "body", Reason: "the body leads back to its own loop"}
			}
		}
	}
	return nil
}

func (d *Definition) reach(from, stop string) map[string]bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] || d.byID[id] == nil {
			continue
		}
		seen[id] = true
		for _, e := range d.byID[id].Targets() {
			stack = append(stack, e.To)
		}
	}
	return seen
}

type parser struct {
	opts ParseOptions
	err  *ValidationError
}

// reader reads the fields of one JSON object of a node, recording the first
// problem; prefix names where the object sits ("message.buttons[0]").
type reader struct {
	p      *parser
	id     string
	prefix string
	m      map[string]json.RawMessage
}

func (p *parser) reader(id, prefix string, m map[string]json.RawMessage) *reader {
	return &reader{p: p, id: id, prefix: prefix, m: m}
}

func (r *reader) path(name string) string {
	if r.prefix == "" {
		return name
	}
	return r.prefix + "." + name
}

func (r *reader) fail(name, format string, args ...any) {
	if r.p.err == nil {
		r.p.err = &ValidationError{NodeID: r.id, Field: r.path(name), Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *reader) has(name string) bool {
	raw, ok := r.m[name]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (r *reader) decode(name string, v any, what string) bool {
	if !r.has(name) {
		return false
	}
	if err := json.Unmarshal(r.m[name], v); err != nil {
		if outOfRange(err) {
			// Valid JSON, but no number of a run holds it (1e400).
			r.fail(name, "has a number beyond ±%g", math.MaxFloat64)
			return false
		}
		r.fail(name, "must be %s", what)
		return false
	}
	return true
}

// outOfRange says err is a JSON number that a float64 (a number field, or
// a number inside a JSON value) does not fit.
func outOfRange(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te) && strings.HasPrefix(te.Value, "number") && te.Type.Kind() == reflect.Float64
}

func (r *reader) str(name string, required bool) string {
	var s string
	if !r.decode(name, &s, "a string") && required && !r.has(name) {
		r.fail(name, "required")
	}
	return s
}

func (r *reader) strings(name string) []string {
	var s []string
	r.decode(name, &s, "an array of strings")
	return s
}

func (r *reader) boolean(name string) bool {
	var b bool
	r.decode(name, &b, "true or false")
	return b
}

// booleanOr reads an optional boolean, def when it is absent.
func (r *reader) booleanOr(name string, def bool) bool {
	b := def
	r.decode(name, &b, "true or false")
	return b
}

func (r *reader) integer(name string, min, max, def int) int {
	var f float64
	if !r.decode(name, &f, "a number") {
		return def
	}
	if f != float64(int64(f)) {
		r.fail(name, "must be a whole number")
		return def
	}
	if f < float64(min) || f > float64(max) {
		r.fail(name, "must be from %d to %d", min, max)
		return def
	}
	return int(f)
}

func (r *reader) template(name string, required bool) *Template {
	s := r.str(name, required)
	if !r.has(name) || r.p.err != nil {
		return nil
	}
	if required && strings.TrimSpace(s) == "" {
		r.fail(name, "required")
		return nil
	}
	t, err := expression.ParseTemplate(s)
	if err != nil {
		r.fail(name, "%s", err)
		return nil
	}
	return t
}

func (r *reader) templates(name string) []*Template {
	list := r.strings(name)
	out := make([]*Template, 0, len(list))
	for i, s := range list {
		t, err := expression.ParseTemplate(s)
		if err != nil {
			r.fail(fmt.Sprintf("%s[%d]", name, i), "%s", err)
			return nil
		}
		out = append(out, t)
	}
	return out
}

func (r *reader) expr(name string, required bool) *Expr {
	s := r.str(name, required)
	if !r.has(name) || r.p.err != nil {
		return nil
	}
	e, err := expression.Compile(s)
	if err != nil {
		r.fail(name, "%s", err)
		return nil
	}
	return e
}

func (r *reader) value(name string) *Value {
	var v any
	if !r.decode(name, &v, "JSON") {
		return nil
	}
	c, err := expression.CompileValue(v)
	if err != nil {
		r.fail(name, "%s", err)
		return nil
	}
	return c
}

func (r *reader) object(name string) *Value {
	v := r.value(name)
	if v != nil && !v.IsObject() {
		r.fail(name, "must be an object")
		return nil
	}
	return v
}

func (r *reader) target(name string) string {
	s := r.str(name, false)
	if r.has(name) && s == "" {
		r.fail(name, "empty target")
	}
	return s
}

// ident reads a variable name: save_as, as, a variable's name. vars.input is
// the first call's input and is never written.
func (r *reader) ident(name string, required bool) string {
	s := r.str(name, required)
	if !r.has(name) || r.p.err != nil {
		return ""
	}
	if err := checkIdent(s); err != "" {
		r.fail(name, "%s", err)
	}
	return s
}

func checkIdent(s string) string {
	if !identRE.MatchString(s) || len(s) > maxIDLen {
		return fmt.Sprintf("%q is not a variable name (letters, digits, _; not starting with a digit)", s)
	}
	if s == "input" {
		return "input is reserved for the first call's input"
	}
	return ""
}

func (r *reader) objects(name string) []*reader {
	if !r.has(name) {
		return nil
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(r.m[name], &list); err != nil {
		r.fail(name, "must be an array of objects")
		return nil
	}
	out := make([]*reader, len(list))
	for i, m := range list {
		if m == nil {
			r.fail(fmt.Sprintf("%s[%d]", name, i), "must be an object")
			return nil
		}
		out[i] = r.p.reader(r.id, r.path(fmt.Sprintf("%s[%d]", name, i)), m)
	}
	return out
}

func (r *reader) sub(name string, required bool) *reader {
	if !r.has(name) {
		if required {
			r.fail(name, "required")
		}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.m[name], &m); err != nil {
		r.fail(name, "must be an object")
		return nil
	}
	return r.p.reader(r.id, r.path(name), m)
}

func (r *reader) staged(name string, s Stage) {
	if !r.p.opts.open(s) {
		r.fail(name, "the staged feature %s is not open on this platform", s)
	}
}

func (r *reader) oneOf(name, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	r.fail(name, "%q is not one of %s", got, strings.Join(allowed, ", "))
}

func (p *parser) node(i int, raw json.RawMessage) (Node, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, &ValidationError{Field: fmt.Sprintf("nodes[%d]", i), Reason: "must be an object"}
	}
	head := p.reader("", fmt.Sprintf("nodes[%d]", i), m)
	id := head.str("id", true)
	if p.err != nil {
		return nil, p.err
	}
	if strings.TrimSpace(id) == "" || len(id) > maxIDLen || strings.ContainsAny(id, "/\n") {
		return nil, &ValidationError{Field: fmt.Sprintf("nodes[%d].id", i), Reason: fmt.Sprintf("%q is not a node id (1-%d characters, no / or newline)", id, maxIDLen)}
	}
	r := p.reader(id, "", m)
	typ := NodeType(r.str("type", true))
	if p.err != nil {
		return nil, p.err
	}
	b := base{id: id, typ: typ}
	var n Node
	switch typ {
	case TypeStart:
		n = &Start{base: b, Next: r.target("next")}
	case TypeSendMessage:
		n = p.sendMessage(b, r)
	case TypeQuestion:
		q := &Question{base: b, Text: r.template("text", true), QuickReplies: r.templates("quick_replies"),
			SaveAs: r.ident("save_as", false), InputType: r.str("input_type", false), Next: r.target("next")}
		if q.InputType == "" {
			q.InputType = InputText
		}
		r.oneOf("input_type", q.InputType, InputText, InputNumber, InputEmail, InputPhone, InputFile)
		n = q
	case TypeCondition:
		n = p.condition(b, r)
	case TypeVariable:
		n = p.variable(b, r)
	case TypeHTTP:
		n = p.http(b, r, "GET")
	case TypeLLM:
		l := &LLM{base: b, System: r.template("system", false), Prompt: r.template("prompt", true), Model: r.str("model", false),
			MaxTokens: r.integer("max_tokens", 1, 100_000, 0), SaveAs: r.ident("save_as", false), Send: r.boolean("send"), Next: r.target("next")}
		var t float64
		if r.decode("temperature", &t, "a number") {
			if t < 0 || t > 2 {
				r.fail("temperature", "must be from 0 to 2")
			}
			l.Temperature = &t
		}
		n = l
	case TypeKnowledge:
		n = &Knowledge{base: b, Query: r.template("query", true), TopK: r.integer("top_k", 1, MaxTopK, 3),
			SaveAs: r.ident("save_as", false), Next: r.target("next")}
	case TypeIntent:
		n = p.intent(b, r)
	case TypeExtract:
		n = p.extract(b, r)
	case TypeLoop:
		n = &Loop{base: b, Over: r.expr("over", true), As: r.ident("as", true), Body: r.target("body"),
			MaxIterations: r.integer("max_iterations", 1, MaxMaxIterations, DefaultMaxIterations), Next: r.target("next")}
		if !r.has("body") {
			r.fail("body", "required")
		}
	case TypeCallFlow:
		r.staged("type", StageCallFlow)
		c := &CallFlow{base: b, FlowID: r.str("flow_id", true), Input: r.object("input"), SaveAs: r.ident("save_as", false), Next: r.target("next")}
		if p.err == nil && strings.TrimSpace(c.FlowID) == "" {
			r.fail("flow_id", "required")
		}
		n = c
	case TypeScript:
		r.staged("type", StageScript)
		s := &Script{base: b, Code: r.str("code", true), SaveAs: r.ident("save_as", false), Next: r.target("next")}
		if p.err == nil && strings.TrimSpace(s.Code) == "" {
			r.fail("code", "required")
		}
		if len(s.Code) > MaxScriptBytes {
			r.fail("code", "longer than %d bytes", MaxScriptBytes)
		}
		n = s
	case TypeEnd:
		if r.has("next") {
			r.fail("next", "an end node has no next")
		}
		n = &End{base: b, Output: r.object("output")}
	case TypeAction:
		n = p.action(b, r)
	case TypeAIResponse:
		n = &AIResponse{base: b, System: r.template("system", false), Knowledge: r.booleanOr("knowledge", true),
			TopK: r.integer("top_k", 1, MaxTopK, DefaultAnswerTopK), Fallback: r.template("fallback", false), Next: r.target("next")}
	case TypeHandover:
		n = &Handover{base: b, Text: r.template("text", false), Next: r.target("next")}
	case TypeResumeAI:
		n = &ResumeAI{base: b, Next: r.target("next")}
	case TypeTag:
		n = p.tag(b, r)
	case TypeAssign:
		a := &Assign{base: b, Operator: r.template("operator", true), Next: r.target("next")}
		if p.err == nil && a.Operator.IsStatic() {
			if why := CheckEmail(a.Operator.Raw()); why != "" {
				r.fail("operator", "%s", why)
			}
		}
		n = a
	case TypeDelay:
		n = p.delay(b, r)
	case TypeTool, TypeOrder, TypeSubmitForm:
		n = &ChatOnly{base: b, Next: r.target("next")}
	default:
		return nil, &ValidationError{NodeID: id, Field: "type", Reason: fmt.Sprintf("unknown node type %q", typ)}
	}
	if p.err != nil {
		return nil, p.err
	}
	return n, nil
}

func (p *parser) sendMessage(b base, r *reader) Node {
	n := &SendMessage{base: b, Next: r.target("next")}
	m := r.sub("message", true)
	if m == nil {
		return n
	}
	msg := Message{Type: m.str("type", false)}
	if msg.Type == "" {
		msg.Type = MessageText
	}
	m.oneOf("type", msg.Type, MessageText, MessageQuickReplies, MessageButtons, MessageCarousel)
	msg.Text = m.template("text", msg.Type != MessageCarousel)
	msg.QuickReplies = m.templates("quick_replies")
	msg.Buttons = p.buttons(m, "buttons")
	for _, c := range m.objects("cards") {
		msg.Cards = append(msg.Cards, Card{Title: c.template("title", true), Subtitle: c.template("subtitle", false),
			ImageURL: c.template("image_url", false), Buttons: p.buttons(c, "buttons")})
	}
	if p.err != nil {
		return n
	}
	// The shared send rules of messaging, where the document can show them.
	only := map[string]bool{"quick_replies": msg.Type == MessageQuickReplies, "buttons": msg.Type == MessageButtons, "cards": msg.Type == MessageCarousel}
	for _, f := range []string{"quick_replies", "buttons", "cards"} {
		if m.has(f) && !only[f] {
			m.fail(f, "not used by a %s message", msg.Type)
		}
	}
	switch msg.Type {
	case MessageQuickReplies:
		if len(msg.QuickReplies) == 0 || len(msg.QuickReplies) > 13 {
			m.fail("quick_replies", "1 to 13 quick replies")
		}
	case MessageButtons:
		if len(msg.Buttons) == 0 || len(msg.Buttons) > 3 {
			m.fail("buttons", "1 to 3 buttons")
		}
	case MessageCarousel:
		if len(msg.Cards) == 0 || len(msg.Cards) > 10 {
			m.fail("cards", "1 to 10 cards")
		}
	}
	n.Message = msg
	return n
}

func (p *parser) buttons(r *reader, name string) []Button {
	var out []Button
	list := r.objects(name)
	if len(list) > 3 {
		r.fail(name, "at most 3 buttons")
		return nil
	}
	for _, br := range list {
		bt := Button{Type: br.str("type", true), Title: br.template("title", true)}
		br.oneOf("type", bt.Type, ButtonWebURL, ButtonPostback)
		switch bt.Type {
		case ButtonWebURL:
			bt.URL = br.template("url", true)
		case ButtonPostback:
			bt.Payload = br.template("payload", true)
		}
		out = append(out, bt)
	}
	return out
}

func (p *parser) condition(b base, r *reader) Node {
	n := &Condition{base: b, Then: r.target("then"), Else: r.target("else")}
	switch {
	case r.has("cases"):
		r.staged("cases", StageConditionCases)
		if r.has("if") || r.has("then") {
			r.fail("cases", "if/then and cases cannot be combined")
			return n
		}
		list := r.objects("cases")
		if len(list) == 0 {
			r.fail("cases", "at least one case")
		}
		for _, c := range list {
			n.Cases = append(n.Cases, Case{If: c.expr("if", true), Next: c.target("next")})
			if !c.has("next") {
				c.fail("next", "required")
			}
		}
	default:
		n.If = r.expr("if", true)
	}
	return n
}

func (p *parser) variable(b base, r *reader) Node {
	n := &Variable{base: b, Next: r.target("next")}
	switch {
	case r.has("op") || r.has("name"):
		r.staged("op", StageVariableOp)
		if r.has("set") {
			r.fail("set", "set{} and name/op/value cannot be combined")
			return n
		}
		n.Op = r.str("op", false)
		if n.Op == "" {
			n.Op = OpSet
		}
		r.oneOf("op", n.Op, OpSet, OpIncrement, OpDecrement, OpAppend, OpRemove, OpClear)
		n.Target.Name = r.ident("name", true)
		switch n.Op {
		case OpClear:
			if r.has("value") {
				r.fail("value", "clear takes no value")
			}
		case OpIncrement, OpDecrement:
			if r.has("value") {
				n.Target = p.assignment(r, "value", n.Target.Name)
			}
		default:
			if !r.has("value") {
				r.fail("value", "required")
			}
			n.Target = p.assignment(r, "value", n.Target.Name)
		}
	case r.has("set"):
		names, raws, err := orderedObject(r.m["set"])
		if err != nil {
			r.fail("set", "must be an object of name: expression")
			return n
		}
		if len(names) == 0 {
			r.fail("set", "empty")
		}
		for i, name := range names {
			if e := checkIdent(name); e != "" {
				r.fail("set."+name, "%s", e)
				return n
			}
			sr := p.reader(r.id, "set", map[string]json.RawMessage{name: raws[i]})
			n.Set = append(n.Set, p.assignment(sr, name, name))
		}
	default:
		r.fail("set", "required (or the staged name/op/value)")
	}
	return n
}

// assignment reads a variable value: a string is an expression, unless it
// holds {{ }}, when it is a template; any other JSON is a literal.
func (p *parser) assignment(r *reader, field, name string) Assignment {
	a := Assignment{Name: name}
	var s string
	if err := json.Unmarshal(r.m[field], &s); err == nil {
		if strings.Contains(s, "{{") {
			a.Value = r.value(field)
		} else {
			a.Expr = r.expr(field, true)
		}
		return a
	}
	a.Value = r.value(field)
	return a
}

// orderedObject decodes a JSON object keeping its keys' order.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not an object")
	}
	var names []string
	var values []json.RawMessage
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if i, dup := index[name]; dup {
			values[i] = v
			continue
		}
		index[name] = len(names)
		names = append(names, name)
		values = append(values, v)
	}
	return names, values, nil
}

var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

func (p *parser) http(b base, r *reader, defaultMethod string) *HTTP {
	n := &HTTP{base: b, Method: strings.ToUpper(r.str("method", false)), URL: r.template("url", true),
		SaveAs: r.ident("save_as", false), OnError: r.target("on_error"), Next: r.target("next")}
	if n.Method == "" {
		n.Method = defaultMethod
	}
	r.oneOf("method", n.Method, httpMethods...)
	n.Timeout = time.Duration(r.integer("timeout_ms", 1, int(MaxHTTPTimeout/time.Millisecond), int(MaxHTTPTimeout/time.Millisecond))) * time.Millisecond
	if r.has("headers") {
		var h map[string]string
		if !r.decode("headers", &h, "an object of strings") {
			return n
		}
		names := make([]string, 0, len(h))
		for k := range h {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if k == "" || strings.ContainsAny(k, " :\r\n\t") {
				r.fail("headers", "%q is not a header name", k)
				return n
			}
			t, err := expression.ParseTemplate(h[k])
			if err != nil {
				r.fail("headers."+k, "%s", err)
				return n
			}
			n.Headers = append(n.Headers, Header{Name: k, Value: t})
		}
	}
	n.Body = r.value("body")
	if n.Body != nil && (n.Method == "GET" || n.Method == "HEAD") {
		r.fail("body", "a %s request has no body", n.Method)
	}
	return n
}

func (p *parser) intent(b base, r *reader) Node {
	n := &Intent{base: b, Text: r.template("text", true), Else: r.target("else"), SaveAs: r.ident("save_as", false)}
	list := r.objects("intents")
	if len(list) == 0 {
		r.fail("intents", "at least one intent")
	}
	names := map[string]bool{}
	for _, o := range list {
		opt := IntentOption{Name: o.str("name", true), Description: o.str("description", false), Examples: o.strings("examples"), Next: o.target("next")}
		if p.err == nil && strings.TrimSpace(opt.Name) == "" {
			o.fail("name", "required")
		}
		if names[opt.Name] {
			o.fail("name", "duplicate intent %q", opt.Name)
		}
		names[opt.Name] = true
		n.Intents = append(n.Intents, opt)
	}
	return n
}

var extractTypes = []string{"string", "number", "boolean", "email", "phone", "date"}

func (p *parser) extract(b base, r *reader) Node {
	n := &Extract{base: b, Text: r.template("text", true), SaveAs: r.ident("save_as", false),
		CaptureContact: r.boolean("capture_contact"), Next: r.target("next")}
	list := r.objects("fields")
	if len(list) == 0 && !n.CaptureContact {
		r.fail("fields", "at least one field")
	}
	names := map[string]bool{}
	for _, f := range list {
		ef := ExtractField{Name: f.str("name", true), Type: f.str("type", false), Description: f.str("description", false), Required: f.boolean("required")}
		if ef.Type == "" {
			ef.Type = "string"
		}
		f.oneOf("type", ef.Type, extractTypes...)
		if p.err == nil {
			if e := checkIdent(ef.Name); e != "" {
				f.fail("name", "%s", e)
			}
		}
		if names[ef.Name] {
			f.fail("name", "duplicate field %q", ef.Name)
		}
		names[ef.Name] = true
		n.Fields = append(n.Fields, ef)
	}
	return n
}

func (p *parser) action(b base, r *reader) Node {
	n := &Action{base: b, Kind: r.str("action", true), Next: r.target("next")}
	switch n.Kind {
	case ActionSetVariable:
		a := p.assignment(r, "value", r.ident("name", true))
		if !r.has("value") {
			r.fail("value", "required")
		}
		n.SetVariable = &a
	case ActionWebhookCall:
		n.Webhook = p.http(b, r, "POST")
	}
	return n
}

// tag reads a tag node: tags[], or tag, one tag, for short.
func (p *parser) tag(b base, r *reader) Node {
	n := &Tag{base: b, Next: r.target("next")}
	field := "tags"
	switch {
	case r.has("tags") && r.has("tag"):
		r.fail("tag", "tag and tags cannot be combined")
		return n
	case r.has("tag"):
		field = "tag"
		if t := r.template("tag", true); t != nil {
			n.Tags = []*Template{t}
		}
	default:
		n.Tags = r.templates("tags")
		if p.err == nil && len(n.Tags) == 0 {
			r.fail("tags", "at least one tag")
		}
	}
	if p.err != nil {
		return n
	}
	if len(n.Tags) > MaxTagsPerNode {
		r.fail("tags", "at most %d tags", MaxTagsPerNode)
		return n
	}
	for i, t := range n.Tags {
		if !t.IsStatic() {
			continue
		}
		if why := CheckTag(t.Raw()); why != "" {
			if field == "tags" {
				r.fail(fmt.Sprintf("tags[%d]", i), "%s", why)
			} else {
				r.fail("tag", "%s", why)
			}
			return n
		}
	}
	return n
}

// CheckTag says why tag (trimmed) is not one messaging keeps, or "": 1 to
// MaxTagLen characters, no control characters. A tag node's tags are
// checked when published, or, for templates, when rendered.
func CheckTag(tag string) string {
	tag = strings.TrimSpace(tag)
	switch {
	case tag == "":
		return fmt.Sprintf("a tag is 1 to %d characters; this one is empty", MaxTagLen)
	case utf8.RuneCountInString(tag) > MaxTagLen:
		return fmt.Sprintf("a tag is 1 to %d characters; this one has %d", MaxTagLen, utf8.RuneCountInString(tag))
	case strings.IndexFunc(tag, unicode.IsControl) >= 0:
		return "a tag has no control characters"
	}
	return ""
}

// CheckEmail says why s (trimmed) is not one plain email address of at
// most MaxEmailLen characters, or "".
func CheckEmail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > MaxEmailLen {
		return fmt.Sprintf("an email address has at most %d characters", MaxEmailLen)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return fmt.Sprintf("%q is not one plain email address", clipText(s, 60))
	}
	return ""
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// delay reads a delay node: seconds, or the staged until (an RFC 3339
// time, or a template that renders to one).
func (p *parser) delay(b base, r *reader) Node {
	n := &Delay{base: b, Next: r.target("next")}
	switch {
	case r.has("until"):
		r.staged("until", StageDelayUntil)
		if r.has("seconds") {
			r.fail("seconds", "seconds and until cannot be combined")
			return n
		}
		n.Until = r.template("until", true)
		if p.err == nil && n.Until.IsStatic() {
			if _, err := time.Parse(time.RFC3339, strings.TrimSpace(n.Until.Raw())); err != nil {
				r.fail("until", "%q is not an RFC 3339 time (2026-12-01T09:00:00Z)", clipText(n.Until.Raw(), 60))
			}
		}
	case r.has("seconds"):
		n.Seconds = r.integer("seconds", 1, MaxDelaySeconds, 0)
	default:
		r.fail("seconds", "required (or the staged until)")
	}
	return n
}

func caseField(i int) string   { return fmt.Sprintf("cases[%d].next", i) }
func intentField(i int) string { return fmt.Sprintf("intents[%d].next", i) }
