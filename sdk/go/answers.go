package parley

import (
	"encoding/json"
	"errors"
	"fmt"
)

// answer is a type the API answers with. identifiedBy names the
// properties every answer of it carries and without which it tells
// nothing (its id, its status, its list): JSON of the right shape that
// lacks one ({} where a run is due) would decode into zero values, so
// decodeAnswer refuses it. A property that is null counts as given.
type answer interface{ identifiedBy() []string }

func (*Me) identifiedBy() []string               { return []string{"workspace"} }
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

// decodeAnswer decodes the JSON raw into v and, when v is an answer,
// checks that raw is an object with each property that identifies it.
// Every answer and stream event is decoded here; the caller wraps an
// error in ErrMalformedAnswer with what it read.
func decodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	a, ok := v.(answer)
	if !ok {
		return nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil || props == nil {
		return errors.New("not an object")
	}
	for _, k := range a.identifiedBy() {
		if _, ok := props[k]; !ok {
			return fmt.Errorf("no %q", k)
		}
	}
	return nil
}
