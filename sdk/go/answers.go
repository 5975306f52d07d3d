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
func (*RunStart) identifiedBy() []string         { return []string{"run_id"} }
func (*NodeStart) identifiedBy() []string        { return []string{"node_id"} }
func (*FlowMessage) identifiedBy() []string      { return []string{"type"} }
func (*NodeEnd) identifiedBy() []string          { return []string{"node_id"} }
func (*RunEnd) identifiedBy() []string           { return []string{"status"} }

// openAPIDocument is the answer of GET /v1/openapi.json, which
// OpenAPIDocument returns as its bytes.
type openAPIDocument struct{}

func (*openAPIDocument) identifiedBy() []string { return []string{"openapi"} }

// listing is an answer that lists answers of another type under one of
// its properties (a page): each of them is checked as well.
type listing interface {
	answer
	listed() (property string, item answer)
}

func (*ConversationPage) listed() (string, answer) { return "conversations", (*Conversation)(nil) }
func (*MessagePage) listed() (string, answer)      { return "messages", (*Message)(nil) }
func (*DeliveryPage) listed() (string, answer)     { return "deliveries", (*Delivery)(nil) }

// decodeAnswer decodes the JSON raw into v and checks what v is: an
// answer must be an object with each property that identifies it, the
// items a page lists too, and so must each item of a list of answers
// (Channels, Flows). Every answer and stream event is decoded here; the
// caller wraps an error in ErrMalformedAnswer with what it read.
func decodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	if a, ok := v.(answer); ok {
		props, err := identified(raw, a)
		if err != nil {
			return err
		}
		if l, ok := v.(listing); ok {
			property, item := l.listed()
			return eachIdentified(props[property], item, property)
		}
		return nil
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

// eachIdentified checks each item of the JSON array raw, the list named
// name (null is an empty one), as an answer of item's type.
func eachIdentified(raw json.RawMessage, item answer, name string) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i, it := range items {
		if _, err := identified(it, item); err != nil {
			return fmt.Errorf("%s[%d]: %w", name, i, err)
		}
	}
	return nil
}
