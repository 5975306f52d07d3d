package conversation

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

func TestNextTurn(t *testing.T) {
	t.Parallel()
	on := Conversation{Chat: Chat{Turns: 4}}
	off := Conversation{Chat: Chat{Turns: 4, HandedOver: true}}
	for _, tt := range []struct {
		mode channel.AIMode
		conv Conversation
		seq  int64
		ok   bool
	}{
		{channel.AIModeAuto, on, 5, true},
		{channel.AIModeSuggest, on, 5, true},
		{channel.AIModeExternal, on, 0, false},
		{channel.AIModeAuto, off, 0, false},
		{channel.AIModeSuggest, off, 0, false},
	} {
		if seq, ok := tt.conv.NextTurn(channel.Channel{AIMode: tt.mode}); seq != tt.seq || ok != tt.ok {
			t.Errorf("%s, handed over %v: NextTurn = %d, %v; want %d, %v", tt.mode, tt.conv.Chat.HandedOver, seq, ok, tt.seq, tt.ok)
		}
	}
}

func TestHandOverAndResume(t *testing.T) {
	t.Parallel()
	var c Chat
	if err := c.HandOver(strings.Repeat("é", MaxHandoverReason+1)); err == nil || c.HandedOver {
		t.Fatalf("a reason over %d characters: %v, %+v", MaxHandoverReason, err, c)
	}
	if err := c.HandOver("  node_type_unsupported "); err != nil || !c.HandedOver || c.HandoverReason != "node_type_unsupported" {
		t.Fatalf("HandOver = %v, %+v", err, c)
	}
	c.ResumeAI()
	if c.HandedOver || c.HandoverReason != "" {
		t.Fatalf("ResumeAI left %+v", c)
	}
}

func TestAddTags(t *testing.T) {
	t.Parallel()
	c := Chat{Tags: []string{"VIP"}}
	if err := c.AddTags([]string{"vip", " late ", "Late", "refund"}); err != nil || !reflect.DeepEqual(c.Tags, []string{"VIP", "late", "refund"}) {
		t.Fatalf("AddTags = %v, %v", err, c.Tags)
	}
	for _, bad := range [][]string{nil, {""}, {"  "}, {strings.Repeat("t", MaxTagLength+1)}, {"a\nb"}} {
		before := append([]string(nil), c.Tags...)
		var fe *FieldError
		if err := c.AddTags(bad); !errors.As(err, &fe) || !reflect.DeepEqual(c.Tags, before) {
			t.Errorf("AddTags(%q) = %v, tags %v", bad, err, c.Tags)
		}
	}
	full := Chat{}
	for len(full.Tags) < MaxTags {
		if err := full.AddTags([]string{strings.Repeat("x", len(full.Tags)+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := full.AddTags([]string{"x", "one more"}); err == nil || len(full.Tags) != MaxTags {
		t.Fatalf("past %d tags: %v, %d tags", MaxTags, err, len(full.Tags))
	}
	if err := full.AddTags([]string{"X"}); err != nil {
		t.Fatalf("a tag the conversation has, in another case, adds nothing: %v", err)
	}
}

func TestAssign(t *testing.T) {
	t.Parallel()
	var c Chat
	if err := c.Assign(" Ann@Example.COM "); err != nil || c.Assignee != "ann@example.com" {
		t.Fatalf("Assign = %v, %q", err, c.Assignee)
	}
	for _, bad := range []string{"ann", "ann@localhost", "Ann <ann@example.com>", "a@example.com, b@example.com", strings.Repeat("a", 250) + "@x.io"} {
		if err := c.Assign(bad); err == nil || c.Assignee != "ann@example.com" {
			t.Errorf("Assign(%q) = %v, assignee %q", bad, err, c.Assignee)
		}
	}
	if err := c.Assign(""); err != nil || c.Assignee != "" {
		t.Fatalf("unassign = %v, %q", err, c.Assignee)
	}
}

func TestMarkUnansweredAndWhatAnswers(t *testing.T) {
	t.Parallel()
	var c Chat
	for _, bad := range []string{"", "AI_LIMIT_REACHED", "busy"} {
		if err := c.MarkUnanswered(bad); err == nil || c.Unanswered != "" {
			t.Errorf("MarkUnanswered(%q) = %v, %q", bad, err, c.Unanswered)
		}
	}
	if err := c.MarkUnanswered(UnansweredAILimitReached); err != nil || c.Unanswered != UnansweredAILimitReached {
		t.Fatalf("MarkUnanswered = %v, %q", err, c.Unanswered)
	}
	if (Message{Sender: SenderContact}).Answers() || !(Message{Sender: SenderAI}).Answers() || !(Message{Sender: SenderUser}).Answers() {
		t.Fatal("only messages to the customer answer")
	}
}

func TestAuthors(t *testing.T) {
	t.Parallel()
	handedOver := Conversation{Chat: Chat{HandedOver: true}}
	ai := Author{Sender: SenderAI, RunID: "run-1"}
	if err := ai.CheckSend(handedOver); !errors.Is(err, ErrHandedOver) {
		t.Fatalf("the AI to a handed-over conversation: %v", err)
	}
	if err := ai.CheckSend(Conversation{}); err != nil {
		t.Fatalf("the AI: %v", err)
	}
	if err := ByAPI.CheckSend(handedOver); err != nil {
		t.Fatalf("the API to a handed-over conversation: %v", err)
	}
	external := channel.Channel{AIMode: channel.AIModeExternal}
	if err := ai.CheckChannel(external); !errors.Is(err, ErrChannelExternal) {
		t.Fatalf("the AI on an external channel: %v", err)
	}
	for _, mode := range []channel.AIMode{channel.AIModeAuto, channel.AIModeSuggest} {
		if err := ai.CheckChannel(channel.Channel{AIMode: mode}); err != nil {
			t.Fatalf("the AI on a %s channel: %v", mode, err)
		}
	}
	if err := ByAPI.CheckChannel(external); err != nil {
		t.Fatalf("the API on an external channel: %v", err)
	}
	md := Author{Sender: SenderUser, Operator: "ann@example.com"}.Metadata(map[string]any{"buttons": 1})
	if !reflect.DeepEqual(md, map[string]any{"buttons": 1, "operator": "ann@example.com"}) {
		t.Fatalf("operator metadata = %v", md)
	}
	if md := ai.Metadata(map[string]any{}); !reflect.DeepEqual(md, map[string]any{"run_id": "run-1"}) {
		t.Fatalf("AI metadata = %v", md)
	}
}

func TestCheckMessages(t *testing.T) {
	t.Parallel()
	text := Outbound{Text: &OutboundText{Text: "hi"}}
	carousel := Outbound{Carousel: &OutboundCarousel{Elements: []Card{{Title: "A"}}}}
	if err := CheckMessages([]Outbound{text, carousel}); err != nil || carousel.Carousel.Ratio != RatioHorizontal {
		t.Fatalf("CheckMessages = %v, ratio %q", err, carousel.Carousel.Ratio)
	}
	tooMany := make([]Outbound, MaxSuggestionMessages+1)
	for i := range tooMany {
		tooMany[i] = text
	}
	for _, tt := range []struct {
		msgs  []Outbound
		field string
	}{
		{nil, "messages"},
		{tooMany, "messages"},
		{[]Outbound{text, {}}, "messages[1].type"},
		{[]Outbound{{Text: &OutboundText{Text: "x"}, Carousel: carousel.Carousel}}, "messages[0].type"},
		{[]Outbound{{Carousel: &OutboundCarousel{Elements: []Card{{}}}}}, "messages[0].elements[0].title"},
	} {
		var fe *FieldError
		if err := CheckMessages(tt.msgs); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("CheckMessages(%d messages) = %v, want a field error on %s", len(tt.msgs), err, tt.field)
		}
	}
}
