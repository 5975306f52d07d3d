package openapi

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	parley "github.com/parleyhq/parley/sdk/go"
	"github.com/parleyhq/parley/sdk/go/webhook"
)

// The contract between this document and the Go client (sdk/go): every
// operation, field, error code and run event of the document has its
// counterpart in the client, and the client has nothing the document does
// not. A change to the document without the client fails here.

// sdkOperation is what the client does for one operation.
type sdkOperation struct {
	// methods are the *parley.Client methods that call the operation.
	methods []string
	// request is the Go type of the JSON body the methods send; nil when the
	// operation takes none.
	request any
	// wrap names the one property of the 2xx body the methods return
	// ({"message": {...}} → *parley.Message); "" when they return the body
	// whole. The Go type is the first method's first result.
	wrap string
	// discard says the methods return no part of the answer: it is
	// {"ok": true} and carries nothing.
	discard bool
	// raw says the methods return the body's bytes undecoded.
	raw bool
}

// sdkOperations maps every operationId under paths to the client.
var sdkOperations = map[string]sdkOperation{
	"getOpenAPIDocument":    {methods: []string{"OpenAPIDocument"}, raw: true},
	"getMe":                 {methods: []string{"Me"}},
	"listChannels":          {methods: []string{"Channels"}, wrap: "channels"},
	"listConversations":     {methods: []string{"ListConversations", "Conversations"}},
	"listMessages":          {methods: []string{"ListMessages", "Messages"}},
	"sendMessage":           {methods: []string{"SendMessage"}, request: parley.SendMessageRequest{}, wrap: "message"},
	"sendImage":             {methods: []string{"SendImage"}, request: parley.SendImageRequest{}},
	"sendCarousel":          {methods: []string{"SendCarousel"}, request: parley.SendCarouselRequest{}, wrap: "message"},
	"sendTyping":            {methods: []string{"SendTyping"}, request: parley.TypingRequest{}, discard: true},
	"getComment":            {methods: []string{"Comment"}, wrap: "comment"},
	"replyToComment":        {methods: []string{"ReplyToComment"}, request: parley.CommentReplyRequest{}},
	"privateReplyToComment": {methods: []string{"PrivateReply"}, request: parley.CommentReplyRequest{}},
	"saveWebhook":           {methods: []string{"SaveWebhook"}, request: parley.SaveWebhookRequest{}},
	"getWebhook":            {methods: []string{"Webhook"}, wrap: "webhook"},
	"deleteWebhook":         {methods: []string{"DeleteWebhook"}, discard: true},
	"sendTestEvent":         {methods: []string{"TestWebhook"}, wrap: "delivery"},
	"listDeliveries":        {methods: []string{"ListDeliveries", "Deliveries"}},
	"listFlows":             {methods: []string{"Flows"}, wrap: "flows"},
	"invokeFlow":            {methods: []string{"Invoke", "Continue", "InvokeStream", "ContinueStream"}, request: parley.InvokeRequest{}},
	"getFlowRun":            {methods: []string{"Run"}},
}

// sdkRunEvents maps each event of a streamed run (RunEvent's branches) to
// the client's type of it.
var sdkRunEvents = map[string]parley.RunEvent{
	"run_start":  &parley.RunStart{},
	"node_start": &parley.NodeStart{},
	"message":    &parley.RunMessage{},
	"node_end":   &parley.NodeEnd{},
	"end":        &parley.RunEnd{},
}

// sdkWebhookEvent is how the client's webhook package (sdk/go/webhook)
// decodes one webhook event: the body is a webhook.Event whose Kind is
// kind and whose Data is a pointer to data's type.
type sdkWebhookEvent struct {
	kind webhook.Kind
	data any
}

// sdkWebhookEvents maps each webhook event (the document's webhooks, by
// name and operationId) to the client's decoding of it.
var sdkWebhookEvents = map[string]sdkWebhookEvent{
	"message.received":  {webhook.KindMessageReceived, webhook.MessageReceived{}},   // onMessageReceived
	"postback.received": {webhook.KindPostbackReceived, webhook.PostbackReceived{}}, // onPostbackReceived
	"comment.received":  {webhook.KindCommentReceived, webhook.CommentReceived{}},   // onCommentReceived
	"test":              {webhook.KindTest, webhook.Test{}},                         // onTestEvent
}

// sdkEnums lists the constants the client declares for each of its string
// types that stands for an enum of the document: wherever such a type
// meets a schema with an enum, the two must hold the same values.
var sdkEnums = map[reflect.Type][]string{
	reflect.TypeFor[parley.Platform](): {string(parley.PlatformMessenger), string(parley.PlatformInstagram),
		string(parley.PlatformTelegram), string(parley.PlatformWebchat)},
	reflect.TypeFor[parley.EventKind](): {string(parley.EventMessageReceived), string(parley.EventPostbackReceived),
		string(parley.EventCommentReceived), string(parley.EventTest)},
	reflect.TypeFor[parley.DeliveryStatus](): {string(parley.DeliveryPending), string(parley.DeliveryDelivered),
		string(parley.DeliveryFailed), string(parley.DeliverySkipped)},
	reflect.TypeFor[parley.RunStatus](): {string(parley.RunCompleted), string(parley.RunWaiting), string(parley.RunFailed)},
}

// sdkErrorFields maps every property of an error body to its
// *parley.Error field.
var sdkErrorFields = map[string]string{
	"code":       "Code",
	"message":    "Message",
	"run_id":     "RunID",
	"message_id": "MessageID",
	"comment_id": "CommentID",
}

func TestSDKCoversEveryOperation(t *testing.T) {
	t.Parallel()
	doc := load(t)
	for _, problem := range slices.Concat(sdkProblems(doc), sdkWireProblems(doc, sdkSends(t))) {
		t.Error(problem)
	}
}

// TestSDKContractBites proves the comparison sees a drift: a response
// field renamed and a request field added in a copy of the document.
func TestSDKContractBites(t *testing.T) {
	t.Parallel()
	doc, err := Load() // a fresh copy, this test's own
	if err != nil {
		t.Fatal(err)
	}
	message := doc.Components.Schemas["Message"].Value
	message.Properties["external_ref"] = message.Properties["external_id"]
	delete(message.Properties, "external_id")
	send := doc.Components.Schemas["SendMessageRequest"].Value
	send.Properties["priority"] = openapi3.NewStringSchema().NewRef()
	delete(doc.Components.Schemas["RunEvent"].Value.OneOf[0].Value.Properties["data"].Value.Properties, "run_id")
	code := doc.Components.Responses["InvalidRequest"].Value.Content.Get("application/json").Schema.Value.AllOf[1].Value.Properties["code"].Value
	code.Enum = append(code.Enum, "brand_new_code")
	comment := doc.Components.Schemas["CommentReceivedEnvelope"].Value.Properties["data"].Value.Properties["comment"].Value
	comment.Properties["author"] = comment.Properties["from"]
	delete(comment.Properties, "from")
	doc.Webhooks["reaction.received"] = doc.Webhooks["test"]
	platform := doc.Components.Schemas["Platform"].Value
	platform.Enum = append(platform.Enum, "whatsapp")
	doc.Paths.Set("/brand-new", &openapi3.PathItem{Get: &openapi3.Operation{OperationID: "getBrandNew", Responses: openapi3.NewResponses()}})

	sdkWantReported(t, sdkProblems(doc),
		"sendMessage response message.external_ref: no field",
		"sendMessage response message.external_id: a field (ExternalID) the document does not have",
		"listMessages response messages[].external_ref: no field",
		"sendMessage request priority: no field",
		"run event run_start: run_id: a field (RunID) the document does not have",
		"error code brand_new_code: no sentinel in the client",
		"getBrandNew (GET /brand-new): no row in sdkOperations",
		"webhook event comment.received: data.comment.author: no field",
		"webhook event comment.received: data.comment.from: a field (From) the document does not have",
		"webhook event reaction.received: no row in sdkWebhookEvents",
		"getMe response channels[].kind: the enum [instagram messenger telegram webchat whatsapp], the client's parley.Platform constants",
	)
}

// sdkWantReported fails t unless each of want is in one of problems.
func sdkWantReported(t *testing.T, problems []string, want ...string) {
	t.Helper()
	all := strings.Join(problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("the check misses %q; it reports:\n%s", w, all)
		}
	}
}

// sdkProblems is every difference between doc and the client.
func sdkProblems(doc *openapi3.T) []string {
	var out []string
	report := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	client := reflect.TypeFor[*parley.Client]()

	// Operations, both ways.
	used := map[string]string{}
	seen := map[string]bool{}
	for _, o := range operations(doc) {
		if isWebhook(o) {
			continue
		}
		id := o.op.OperationID
		seen[id] = true
		row, ok := sdkOperations[id]
		if !ok {
			report("%s (%s): no row in sdkOperations, no method of the client", id, o.where)
			continue
		}
		for _, name := range row.methods {
			m, ok := client.MethodByName(name)
			if !ok {
				report("%s: the client has no method %s", id, name)
				continue
			}
			used[name] = id
			if m.Type.NumIn() < 2 || m.Type.In(1) != reflect.TypeFor[context.Context]() {
				report("%s: %s does not take a context first", id, name)
			}
		}
		sdkCompareOperation(id, o.op, row, client, report)
	}
	for id := range sdkOperations {
		if !seen[id] {
			report("sdkOperations has %s, which the document does not", id)
		}
	}
	for i := range client.NumMethod() {
		if name := client.Method(i).Name; used[name] == "" {
			report("the client's method %s calls no operation of the document", name)
		}
	}

	// Error codes, both ways; and the error body's fields.
	documented := map[string]bool{}
	for _, o := range operations(doc) {
		for _, codes := range errorCodes(o.op) {
			for _, code := range codes {
				documented[code] = true
			}
		}
		for status, resp := range o.op.Responses.Map() {
			if !strings.HasPrefix(status, "4") && !strings.HasPrefix(status, "5") || resp.Value == nil {
				continue
			}
			if mt := resp.Value.Content.Get("application/json"); mt != nil {
				for prop := range sdkProperties(mt.Schema.Value) {
					if _, ok := sdkErrorFields[prop]; !ok {
						report("%s %s: error property %s has no field of parley.Error", o.op.OperationID, status, prop)
					}
				}
			}
		}
	}
	shared := regexp.MustCompile(`([a-z_]+) \((\d{3})\)`)
	for _, m := range shared.FindAllStringSubmatch(doc.Components.Schemas["Error"].Value.Properties["code"].Value.Description, -1) {
		documented[m[1]] = true
	}
	errType := reflect.TypeFor[parley.Error]()
	for prop, field := range sdkErrorFields {
		if _, ok := errType.FieldByName(field); !ok {
			report("parley.Error has no field %s for the error property %s", field, prop)
		}
	}
	sentinels := map[string]bool{}
	for _, code := range parley.Codes() {
		sentinels[code] = true
		if !documented[code] {
			report("the client's sentinel of %s: a code the document does not list", code)
		}
	}
	for code := range documented {
		if !sentinels[code] {
			report("error code %s: no sentinel in the client", code)
		}
	}

	// Run events, both ways.
	branches := map[string]bool{}
	for _, branch := range doc.Components.Schemas["RunEvent"].Value.OneOf {
		name := fmt.Sprint(branch.Value.Properties["event"].Value.Const)
		branches[name] = true
		ev, ok := sdkRunEvents[name]
		if !ok {
			report("run event %s: no Go type", name)
			continue
		}
		if ev.Event() != name {
			report("run event %s: its Go type %T says %s", name, ev, ev.Event())
		}
		sdkCompare("run event "+name+": ", branch.Value.Properties["data"].Value, reflect.TypeOf(ev), false, report)
	}
	for name := range sdkRunEvents {
		if !branches[name] {
			report("sdkRunEvents has %s, which RunEvent does not", name)
		}
	}

	// Webhook events, both ways: the envelope is a webhook.Event, its data
	// the type webhook.Parse gives for its kind.
	for name, item := range doc.Webhooks {
		row, ok := sdkWebhookEvents[name]
		if !ok {
			report("webhook event %s: no row in sdkWebhookEvents", name)
			continue
		}
		where := "webhook event " + name + ": "
		body := item.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
		sdkCompare(where, body, reflect.TypeFor[webhook.Event](), false, report)
		props := sdkProperties(body)
		if event := props["event"]; event == nil || fmt.Sprint(event.Const) != string(row.kind) {
			report("%sevent: the document's const is not the client's kind %s", where, row.kind)
		}
		if data := props["data"]; data != nil {
			sdkCompare(where+"data", data, reflect.TypeOf(row.data), false, report)
		}
		ev, err := webhook.Parse([]byte(`{"id":"d","event":"` + string(row.kind) + `","created_at":"2026-11-22T10:00:00.000Z","data":{}}`))
		if want := reflect.PointerTo(reflect.TypeOf(row.data)); err != nil || reflect.TypeOf(ev.Data) != want {
			report("%swebhook.Parse does not decode its data into %s", where, want)
		}
	}
	for name := range sdkWebhookEvents {
		if _, ok := doc.Webhooks[name]; !ok {
			report("sdkWebhookEvents has %s, which the document does not", name)
		}
	}
	sort.Strings(out)
	return out
}

// sdkCompareOperation compares an operation's request body and 2xx answer
// with the client's types.
func sdkCompareOperation(id string, op *openapi3.Operation, row sdkOperation, client reflect.Type, report func(string, ...any)) {
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		mt := op.RequestBody.Value.Content.Get("application/json")
		switch {
		case row.request == nil:
			report("%s: the document takes a body, sdkOperations names no request type", id)
		case mt != nil:
			sdkCompare(id+" request ", mt.Schema.Value, reflect.TypeOf(row.request), true, report)
		}
	} else if row.request != nil {
		report("%s: the document takes no body, sdkOperations names %T", id, row.request)
	}
	var body *openapi3.Schema
	for status, resp := range op.Responses.Map() {
		if strings.HasPrefix(status, "2") && resp.Value != nil {
			if mt := resp.Value.Content.Get("application/json"); mt != nil {
				body = mt.Schema.Value
			}
		}
	}
	m, ok := client.MethodByName(row.methods[0])
	switch {
	case !ok || row.raw:
		return
	case body == nil:
		report("%s: no JSON 2xx answer in the document", id)
		return
	case row.discard:
		if props := sdkProperties(body); len(props) != 1 || props["ok"] == nil {
			report("%s: the answer has %v, more than ok that sdkOperations discards", id, slices.Sorted(mapsKeys(props)))
		}
		return
	case m.Type.NumOut() != 2:
		report("%s: %s returns no value", id, row.methods[0])
		return
	}
	goType := m.Type.Out(0)
	if row.wrap != "" {
		props := sdkProperties(body)
		inner, ok := props[row.wrap]
		if !ok {
			report("%s response: no property %s to unwrap", id, row.wrap)
			return
		}
		for name := range props {
			if name != row.wrap {
				report("%s response %s: no field (the client returns only %s)", id, name, row.wrap)
			}
		}
		sdkCompare(id+" response "+row.wrap, inner, goType, false, report)
		return
	}
	sdkCompare(id+" response ", body, goType, false, report)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sdkProperties is a schema's properties, allOf's merged.
func sdkProperties(s *openapi3.Schema) map[string]*openapi3.Schema {
	out := map[string]*openapi3.Schema{}
	for name, p := range s.Properties {
		out[name] = p.Value
	}
	for _, sub := range s.AllOf {
		for name, p := range sdkProperties(sub.Value) {
			if out[name] == nil || len(out[name].Properties) == 0 && out[name].Type == nil {
				out[name] = p
			}
		}
	}
	return out
}

// sdkRequired is a schema's required properties, allOf's merged.
func sdkRequired(s *openapi3.Schema) map[string]bool {
	out := map[string]bool{}
	for _, name := range s.Required {
		out[name] = true
	}
	for _, sub := range s.AllOf {
		for name := range sdkRequired(sub.Value) {
			out[name] = true
		}
	}
	return out
}

// sdkField is a JSON field of a Go struct.
type sdkField struct {
	name      string // the Go field's
	typ       reflect.Type
	omitempty bool
}

// sdkFields is a struct's JSON fields by their JSON names, those of
// embedded structs included.
func sdkFields(t reflect.Type) map[string]sdkField {
	out := map[string]sdkField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			for name, sub := range sdkFields(f.Type) {
				out[name] = sub
			}
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = sdkField{f.Name, f.Type, slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

var timeType = reflect.TypeFor[time.Time]()

// sdkCompare reports where the schema s and the Go type t differ: a
// property without a field, a field without a property, a type of another
// kind, a nullable value the type cannot hold (a pointer is needed), and
// in a request an optional property sent when empty (omitempty is
// needed).
func sdkCompare(where string, s *openapi3.Schema, t reflect.Type, request bool, report func(string, ...any)) {
	nullable := s.Type != nil && s.Type.IncludesNull()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	} else if nullable && t.Kind() != reflect.Interface && t.Kind() != reflect.Map && t.Kind() != reflect.Slice {
		report("%s: nullable in the document, %s cannot be null", where, t)
	}
	permits := func(typ string) bool { return s.Type == nil || s.Type.Includes(typ) }
	switch {
	case t.Kind() == reflect.Interface:
		return // any JSON value
	case t == timeType:
		if !permits("string") || s.Format != "date-time" {
			report("%s: time.Time for a %v of format %q", where, s.Type, s.Format)
		}
		return
	case t.Kind() == reflect.String:
		if !permits("string") {
			report("%s: a string for %v", where, s.Type)
		}
		if consts, ok := sdkEnums[t]; ok && len(s.Enum) > 0 {
			var enum []string
			for _, v := range s.Enum {
				enum = append(enum, fmt.Sprint(v))
			}
			if slices.Sort(enum); !slices.Equal(enum, slices.Sorted(slices.Values(consts))) {
				report("%s: the enum %v, the client's %s constants %v", where, enum, t, slices.Sorted(slices.Values(consts)))
			}
		}
	case t.Kind() == reflect.Bool:
		if !permits("boolean") {
			report("%s: a bool for %v", where, s.Type)
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if !permits("integer") {
			report("%s: an integer for %v", where, s.Type)
		}
	case t.Kind() == reflect.Float64:
		if !permits("number") {
			report("%s: a float for %v", where, s.Type)
		}
	case t.Kind() == reflect.Slice:
		if !permits("array") || s.Items == nil {
			report("%s: a slice for %v", where, s.Type)
			return
		}
		sdkCompare(where+"[]", s.Items.Value, t.Elem(), request, report)
	case t.Kind() == reflect.Map:
		if !permits("object") || len(sdkProperties(s)) > 0 {
			report("%s: a map for %v with properties %v", where, s.Type, slices.Sorted(mapsKeys(sdkProperties(s))))
		}
	case t.Kind() == reflect.Struct:
		if !permits("object") {
			report("%s: a struct for %v", where, s.Type)
		}
		props, required, fields := sdkProperties(s), sdkRequired(s), sdkFields(t)
		prefix := where
		if !strings.HasSuffix(prefix, " ") {
			prefix += "."
		}
		for name, p := range props {
			f, ok := fields[name]
			if !ok {
				report("%s%s: no field", prefix, name)
				continue
			}
			if request && !required[name] && !f.omitempty && f.typ.Kind() != reflect.Pointer {
				report("%s%s: optional, but %s is sent when empty (no omitempty)", prefix, name, f.name)
			}
			sdkCompare(prefix+name, p, f.typ, request, report)
		}
		for name, f := range fields {
			if _, ok := props[name]; !ok {
				report("%s%s: a field (%s) the document does not have", prefix, name, f.name)
			}
		}
	default:
		report("%s: a %s has no JSON counterpart here", where, t)
	}
}
