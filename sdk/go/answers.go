package parley

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// answer is a type the API answers with. identifiedBy names the
// properties every answer of it carries and without which it tells
// nothing (its id, its status, its list): JSON of the right shape that
// lacks one ({} where a run is due) would decode into zero values, so
// decodeAnswer refuses it. A property that is null counts as given.
type answer interface{ identifiedBy() []string }

func (*Me) identifiedBy() []string               { return []string{"workspace"} }
func (*Channel) identifiedBy() []string          { return []string{"id"} }
func (*Conversation) identifiedBy() []string     { return []string{"id"} }
func (*Flow) identifiedBy() []string             { return []string{"id"} }
func (*ConversationPage) identifiedBy() []string { return []string{"conversations"} }
func (*MessagePage) identifiedBy() []string      { return []string{"messages"} }
func (*Message) identifiedBy() []string          { return []string{"id"} }
func (*SendImageResult) identifiedBy() []string  { return []string{"message", "messages"} }
func (*Comment) identifiedBy() []string          { return []string{"id"} }
func (*CommentReply) identifiedBy() []string     { return []string{"ok", "comment"} }
func (*PrivateReply) identifiedBy() []string     { return []string{"ok", "comment"} }
func (*SavedWebhook) identifiedBy() []string     { return []string{"webhook", "secret"} }
func (*Webhook) identifiedBy() []string          { return []string{"id"} }
func (*Delivery) identifiedBy() []string         { return []string{"id"} }
func (*DeliveryPage) identifiedBy() []string     { return []string{"deliveries"} }
func (*InvokeResult) identifiedBy() []string     { return []string{"status", "run_id"} }
func (*RunTrace) identifiedBy() []string         { return []string{"run"} }
func (*Run) identifiedBy() []string              { return []string{"id"} }
func (*RunStart) identifiedBy() []string         { return []string{"run_id"} }
func (*NodeStart) identifiedBy() []string        { return []string{"node_id"} }
func (*FlowMessage) identifiedBy() []string      { return []string{"type"} }
func (*NodeEnd) identifiedBy() []string          { return []string{"node_id"} }
func (*RunEnd) identifiedBy() []string           { return []string{"status"} }

// okAnswer is the answer {"ok": true} of the calls that return nothing
// else (SendTyping, DeleteWebhook): read like any other, so that a proxy's
// page is not taken for the call done.
type okAnswer struct {
	OK bool `json:"ok"`
}

func (*okAnswer) identifiedBy() []string { return []string{"ok"} }

// openAPIDocument is the answer of GET /v1/openapi.json, which
// OpenAPIDocument returns as its bytes.
type openAPIDocument struct{}

func (*openAPIDocument) identifiedBy() []string { return []string{"openapi"} }

// part is a property of an answer that holds another answer (item), or a
// list of them (list), checked as that answer is: a page's rows, the
// message a send stored, the comment a reply answers.
type part struct {
	property string
	item     answer
	list     bool
}

// composite is an answer that holds others.
type composite interface {
	answer
	parts() []part
}

func (*ConversationPage) parts() []part { return []part{{"conversations", (*Conversation)(nil), true}} }
func (*MessagePage) parts() []part      { return []part{{"messages", (*Message)(nil), true}} }
func (*DeliveryPage) parts() []part     { return []part{{"deliveries", (*Delivery)(nil), true}} }
func (*Me) parts() []part               { return []part{{"channels", (*Channel)(nil), true}} }
func (*SendImageResult) parts() []part {
	return []part{{"message", (*Message)(nil), false}, {"messages", (*Message)(nil), true}}
}
func (*CommentReply) parts() []part { return []part{{"comment", (*Comment)(nil), false}} }
func (*PrivateReply) parts() []part { return []part{{"comment", (*Comment)(nil), false}} }
func (*SavedWebhook) parts() []part { return []part{{"webhook", (*Webhook)(nil), false}} }
func (*RunTrace) parts() []part     { return []part{{"run", (*Run)(nil), false}} }

// An InvokeResult's messages are a stream's message events, checked alike
// (a replayed stream yields them as RunMessages).
func (*InvokeResult) parts() []part { return []part{{"messages", (*FlowMessage)(nil), true}} }

// decodeAnswer decodes the JSON raw into v and checks what v is: an
// answer must be an object with each property that identifies it, the
// answers it holds too (check), and so must each item of a list of
// answers (Channels, Flows). Every answer and stream event is decoded
// here; the caller wraps an error in ErrMalformedAnswer with what it read.
func decodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	if a, ok := v.(answer); ok {
		return check(raw, a)
	}
	if list := reflect.ValueOf(v); list.Kind() == reflect.Pointer && list.Elem().Kind() == reflect.Slice {
		if item, ok := reflect.New(list.Elem().Type().Elem()).Interface().(answer); ok {
			return eachIdentified(raw, item, "")
		}
	}
	return nil
}

// identified checks that raw is an object with each property that
// identifies a, and returns its properties.
func identified(raw []byte, a answer) (map[string]json.RawMessage, error) {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil || props == nil {
		return nil, errors.New("not an object")
	}
	for _, k := range a.identifiedBy() {
		if _, ok := props[k]; !ok {
			return nil, fmt.Errorf("no %q", k)
		}
	}
	return props, nil
}

// check checks that raw is an object with each property that identifies
// a, and each answer a holds (its parts) likewise. A list left out is an
// empty one, as null is; an answer that holds one answer identifies
// itself by it, so it is never left out.
func check(raw []byte, a answer) error {
	props, err := identified(raw, a)
	if err != nil {
		return err
	}
	c, ok := a.(composite)
	if !ok {
		return nil
	}
	for _, p := range c.parts() {
		if p.list {
			if props[p.property] == nil {
				continue
			}
			err = eachIdentified(props[p.property], p.item, p.property)
		} else if err = check(props[p.property], p.item); err != nil {
			err = fmt.Errorf("%s: %w", p.property, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// eachIdentified checks each item of the JSON array raw, the list named
// name (null is an empty one), as an answer of item's type.
func eachIdentified(raw json.RawMessage, item answer, name string) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i, it := range items {
		if err := check(it, item); err != nil {
			return fmt.Errorf("%s[%d]: %w", name, i, err)
		}
	}
	return nil
}
