package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/sdk/go/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

const ws = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func messageEvent() *eventsv1.Event {
	return &eventsv1.Event{
		Id:          "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a11",
		Type:        delivery.EventMessageReceived,
		WorkspaceId: ws,
		// Nanoseconds beyond the millisecond are cut, not rounded.
		CreatedAt: ts(t0.Add(123*time.Millisecond + 999*time.Microsecond)),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    ws,
			ConversationId: "c0a80101-0000-4000-8000-000000000001",
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact:        &eventsv1.Contact{Id: "c0a80101-0000-4000-8000-0000000000c1", SenderId: "123456789", Name: "Ana <3 & co", ProfilePic: "https://cdn.example.com/ana.jpg"},
			Message: &eventsv1.Message{
				Id: "c0a80101-0000-4000-8000-0000000000m1", Text: "Hi! Is the <b>blue</b> one in stock?", Type: "image", ExternalId: "42",
				CreatedAt:  ts(t0.Add(-500 * time.Millisecond).In(time.FixedZone("UTC+8", 8*3600))),
				Attachment: &eventsv1.Attachment{Url: "https://cdn.example.com/photo.jpg", Type: "image"},
			},
		}},
	}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	noAttachment := &eventsv1.Event{
		Id: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a12", Type: delivery.EventMessageReceived, WorkspaceId: ws, CreatedAt: ts(t0),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			// workspace_id left empty in data: the event's is used.
			ConversationId: "c0a80101-0000-4000-8000-000000000001",
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact:        &eventsv1.Contact{Id: "c0a80101-0000-4000-8000-0000000000c1", SenderId: "123456789"},
			Message:        &eventsv1.Message{Id: "c0a80101-0000-4000-8000-0000000000m2", Text: "hello", Type: "text", ExternalId: "43", CreatedAt: ts(t0)},
		}},
	}
	postback := &eventsv1.Event{
		Id: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a13", Type: delivery.EventPostbackReceived, WorkspaceId: ws, CreatedAt: ts(t0.Add(time.Second)),
		Data: &eventsv1.Event_PostbackReceived{PostbackReceived: &eventsv1.PostbackReceived{
			WorkspaceId:    ws,
			ConversationId: "c0a80101-0000-4000-8000-000000000001",
			Platform:       "messenger",
			Channel:        &eventsv1.Channel{Kind: "messenger", ExternalId: "1029384756"},
			Contact:        &eventsv1.Contact{Id: "c0a80101-0000-4000-8000-0000000000c2", SenderId: "psid-77", Name: "Bo", ProfilePic: "https://cdn.example.com/bo.jpg"},
			Message:        &eventsv1.Message{Id: "c0a80101-0000-4000-8000-0000000000m3", Text: "Buy now", Type: "postback", ExternalId: "mid.77", CreatedAt: ts(t0.Add(time.Second))},
			Postback:       &eventsv1.Postback{Payload: "BUY_SKU_42", ReceivedAt: ts(t0.Add(time.Second))},
		}},
	}
	comment := &eventsv1.Event{
		Id: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a14", Type: delivery.EventCommentReceived, WorkspaceId: ws, CreatedAt: ts(t0.Add(2 * time.Second)),
		Data: &eventsv1.Event_CommentReceived{CommentReceived: &eventsv1.CommentReceived{
			WorkspaceId: ws,
			Platform:    "instagram",
			Channel:     &eventsv1.Channel{Kind: "instagram", ExternalId: "17841400000000000"},
			Comment: &eventsv1.Comment{
				Id: "17900000000000001", PostId: "17800000000000009", Text: "price?",
				From:       &eventsv1.CommentAuthor{Id: "17840000000000005", Name: "carla"},
				ReceivedAt: ts(t0.Add(2 * time.Second)),
			},
		}},
	}
	tests := []struct {
		golden string
		give   *eventsv1.Event
	}{
		{golden: "message_received.json", give: messageEvent()},
		{golden: "message_received_no_attachment.json", give: noAttachment},
		{golden: "postback_received.json", give: postback},
		{golden: "comment_received.json", give: comment},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile("testdata/" + tt.golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("Render:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestRenderTestGolden(t *testing.T) {
	t.Parallel()
	got, err := RenderTest("0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15", ws, t0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/test.json")
	if string(got) != string(want) {
		t.Fatalf("RenderTest:\n got %s\nwant %s", got, want)
	}
}

func TestRenderRefusesMalformed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(ev *eventsv1.Event)
	}{
		{name: "id not a uuid", mutate: func(ev *eventsv1.Event) { ev.Id = "evt_1" }},
		{name: "no id", mutate: func(ev *eventsv1.Event) { ev.Id = "" }},
		{name: "workspace not a uuid", mutate: func(ev *eventsv1.Event) { ev.WorkspaceId = "acme" }},
		{name: "no created_at", mutate: func(ev *eventsv1.Event) { ev.CreatedAt = nil }},
		{name: "unknown type", mutate: func(ev *eventsv1.Event) { ev.Type = "message.deleted" }},
		{name: "test events come from the api only", mutate: func(ev *eventsv1.Event) { ev.Type = delivery.EventTest }},
		{name: "type does not match data", mutate: func(ev *eventsv1.Event) { ev.Type = delivery.EventCommentReceived }},
		{name: "no data", mutate: func(ev *eventsv1.Event) { ev.Data = nil }},
		{name: "no message", mutate: func(ev *eventsv1.Event) { ev.GetMessageReceived().Message = nil }},
		{name: "no conversation", mutate: func(ev *eventsv1.Event) { ev.GetMessageReceived().ConversationId = "" }},
		{name: "data of another workspace", mutate: func(ev *eventsv1.Event) {
			ev.GetMessageReceived().WorkspaceId = "00000000-0000-4000-8000-000000000000"
		}},
		{name: "postback without postback", mutate: func(ev *eventsv1.Event) {
			ev.Type = delivery.EventPostbackReceived
			ev.Data = &eventsv1.Event_PostbackReceived{PostbackReceived: &eventsv1.PostbackReceived{ConversationId: "c", Message: &eventsv1.Message{}}}
		}},
		{name: "comment without comment", mutate: func(ev *eventsv1.Event) {
			ev.Type = delivery.EventCommentReceived
			ev.Data = &eventsv1.Event_CommentReceived{CommentReceived: &eventsv1.CommentReceived{}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := proto.Clone(messageEvent()).(*eventsv1.Event)
			tt.mutate(ev)
			if _, err := Render(ev); !errors.Is(err, delivery.ErrMalformedEvent) {
				t.Fatalf("Render = %v, want ErrMalformedEvent", err)
			}
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := Render(messageEvent())
	b, _ := Render(messageEvent())
	if string(a) != string(b) {
		t.Fatal("two renders of one event differ")
	}
}

func TestCreatedAtReadsARenderedEnvelope(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC)
	body, err := RenderTest("0b6a4e8a-7f57-4a5e-9d55-3f7a1ef0a001", "ws", at)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CreatedAt(body); err != nil || !got.Equal(at) {
		t.Fatalf("CreatedAt = %s, %v; want %s", got, err, at)
	}
	for _, bad := range []string{`not json`, `{}`, `{"created_at":"yesterday"}`} {
		if _, err := CreatedAt([]byte(bad)); err == nil {
			t.Errorf("CreatedAt(%s) = nil error", bad)
		}
	}
}

// Every rendered envelope decodes with the Go client's webhook.Parse into
// the type of its kind, and no field the dispatcher renders is one that
// type lacks.
func TestGoldenEnvelopesDecodeWithTheClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		golden string
		kind   webhook.Kind
	}{
		{"message_received.json", webhook.KindMessageReceived},
		{"message_received_no_attachment.json", webhook.KindMessageReceived},
		{"postback_received.json", webhook.KindPostbackReceived},
		{"comment_received.json", webhook.KindCommentReceived},
		{"test.json", webhook.KindTest},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile("testdata/" + tt.golden)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := webhook.Parse(body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if ev.Kind != tt.kind || ev.ID == "" || ev.CreatedAt.IsZero() {
				t.Fatalf("Parse = %+v, want a %s event", ev, tt.kind)
			}
			var env struct{ Data json.RawMessage }
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			strict := json.NewDecoder(bytes.NewReader(env.Data))
			strict.DisallowUnknownFields()
			into := reflect.New(reflect.TypeOf(ev.Data).Elem()).Interface()
			if err := strict.Decode(into); err != nil {
				t.Fatalf("data has a field %T lacks: %v", ev.Data, err)
			}
		})
	}
}
