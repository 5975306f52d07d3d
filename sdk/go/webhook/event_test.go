package webhook

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	parley "github.com/parleyhq/parley/sdk/go"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ptr[T any](v T) *T { return &v }

// The bodies are the document's examples (pkg/openapi/openapi.yaml,
// webhooks), rendered the way the dispatcher renders envelopes.
func TestParse(t *testing.T) {
	t.Parallel()
	channelTG := Channel{Kind: "telegram", ExternalID: "parley_demo_bot"}
	tests := []struct {
		name string
		give string
		want *Event
	}{
		{
			name: "message.received",
			give: `{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a11","event":"message.received","created_at":"2026-11-22T10:00:00.123Z","data":{"workspace_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","conversation_id":"0192f3a4-0000-7000-8000-000000000001","platform":"telegram","channel":{"kind":"telegram","external_id":"parley_demo_bot"},"contact":{"id":"0192f3a4-0000-7000-8000-0000000000c1","sender_id":"123456789","name":"Ana","profile_pic":"https://cdn.example.com/ana.jpg"},"message":{"id":"0192f3a4-0000-7000-8000-0000000000a1","text":"Is the blue one in stock?","type":"image","external_id":"42","created_at":"2026-11-22T09:59:59.500Z","attachment":{"url":"https://cdn.example.com/photo.jpg","type":"image"}}}}`,
			want: &Event{ID: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a11", Kind: KindMessageReceived, CreatedAt: at("2026-11-22T10:00:00.123Z"), Data: &MessageReceived{
				WorkspaceID: "7c9e6679-7425-40de-944b-e07fc1f90ae7", ConversationID: "0192f3a4-0000-7000-8000-000000000001", Platform: "telegram",
				Channel: channelTG,
				Contact: parley.Contact{ID: "0192f3a4-0000-7000-8000-0000000000c1", SenderID: "123456789", Name: "Ana", ProfilePic: "https://cdn.example.com/ana.jpg"},
				Message: Message{ID: "0192f3a4-0000-7000-8000-0000000000a1", Text: "Is the blue one in stock?", Type: "image", ExternalID: "42",
					CreatedAt: ptr(at("2026-11-22T09:59:59.500Z")), Attachment: &Attachment{URL: "https://cdn.example.com/photo.jpg", Type: "image"}},
			}},
		},
		{
			name: "message.received without a platform time or attachment",
			give: `{"id":"d2","event":"message.received","created_at":"2026-11-22T10:00:00.000Z","data":{"workspace_id":"w","conversation_id":"c","platform":"telegram","channel":{"kind":"telegram","external_id":"parley_demo_bot"},"contact":{"id":"k","sender_id":"1","name":"","profile_pic":""},"message":{"id":"m","text":"hi","type":"text","external_id":"43","created_at":null}}}`,
			want: &Event{ID: "d2", Kind: KindMessageReceived, CreatedAt: at("2026-11-22T10:00:00Z"), Data: &MessageReceived{
				WorkspaceID: "w", ConversationID: "c", Platform: "telegram", Channel: channelTG,
				Contact: parley.Contact{ID: "k", SenderID: "1"},
				Message: Message{ID: "m", Text: "hi", Type: "text", ExternalID: "43"},
			}},
		},
		{
			name: "postback.received",
			give: `{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a13","event":"postback.received","created_at":"2026-11-22T10:00:01.000Z","data":{"workspace_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","conversation_id":"0192f3a4-0000-7000-8000-000000000002","platform":"messenger","channel":{"kind":"messenger","external_id":"1029384756"},"contact":{"id":"0192f3a4-0000-7000-8000-0000000000c2","sender_id":"psid-77","name":"Bo","profile_pic":"https://cdn.example.com/bo.jpg"},"message":{"id":"0192f3a4-0000-7000-8000-0000000000a3","text":"Buy now","type":"postback","external_id":"mid.77","created_at":"2026-11-22T10:00:01.000Z"},"postback":{"payload":"BUY_SKU_42","received_at":"2026-11-22T10:00:01.000Z"}}}`,
			want: &Event{ID: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a13", Kind: KindPostbackReceived, CreatedAt: at("2026-11-22T10:00:01Z"), Data: &PostbackReceived{
				MessageReceived: MessageReceived{
					WorkspaceID: "7c9e6679-7425-40de-944b-e07fc1f90ae7", ConversationID: "0192f3a4-0000-7000-8000-000000000002", Platform: "messenger",
					Channel: Channel{Kind: "messenger", ExternalID: "1029384756"},
					Contact: parley.Contact{ID: "0192f3a4-0000-7000-8000-0000000000c2", SenderID: "psid-77", Name: "Bo", ProfilePic: "https://cdn.example.com/bo.jpg"},
					Message: Message{ID: "0192f3a4-0000-7000-8000-0000000000a3", Text: "Buy now", Type: "postback", ExternalID: "mid.77", CreatedAt: ptr(at("2026-11-22T10:00:01Z"))},
				},
				Postback: Postback{Payload: "BUY_SKU_42", ReceivedAt: ptr(at("2026-11-22T10:00:01Z"))},
			}},
		},
		{
			name: "comment.received",
			give: `{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a14","event":"comment.received","created_at":"2026-11-22T10:00:02.000Z","data":{"workspace_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","platform":"instagram","channel":{"kind":"instagram","external_id":"17841400000000000"},"comment":{"id":"17900000000000001","post_id":"17800000000000009","text":"price?","from":{"id":"17840000000000005","name":"carla"},"received_at":"2026-11-22T10:00:02.000Z"}}}`,
			want: &Event{ID: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a14", Kind: KindCommentReceived, CreatedAt: at("2026-11-22T10:00:02Z"), Data: &CommentReceived{
				WorkspaceID: "7c9e6679-7425-40de-944b-e07fc1f90ae7", Platform: "instagram",
				Channel: Channel{Kind: "instagram", ExternalID: "17841400000000000"},
				Comment: Comment{ID: "17900000000000001", PostID: "17800000000000009", Text: "price?",
					From: parley.CommentAuthor{ID: "17840000000000005", Name: "carla"}, ReceivedAt: ptr(at("2026-11-22T10:00:02Z"))},
			}},
		},
		{
			name: "test",
			give: `{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{"workspace_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","sent_at":"2026-11-22T10:00:00.000Z"}}`,
			want: &Event{ID: "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15", Kind: KindTest, CreatedAt: at("2026-11-22T10:00:00Z"), Data: &Test{
				WorkspaceID: "7c9e6679-7425-40de-944b-e07fc1f90ae7", SentAt: at("2026-11-22T10:00:00Z"),
			}},
		},
		{
			name: "a kind added later",
			give: `{"id":"d9","event":"reaction.received","created_at":"2027-01-01T00:00:00.000Z","data":{"emoji":"👍","new":[1,2]}}`,
			want: &Event{ID: "d9", Kind: "reaction.received", CreatedAt: at("2027-01-01T00:00:00Z"),
				Data: json.RawMessage(`{"emoji":"👍","new":[1,2]}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.give))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse =\n%#v\nwant\n%#v", got, tt.want)
			}
			// An Event marshals back into an envelope that parses the same.
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Parse(again); err != nil || !reflect.DeepEqual(back, tt.want) {
				t.Fatalf("Parse(json.Marshal(event)) = %#v, %v; want the event", back, err)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, give string }{
		{"not JSON", `{"id":`},
		{"an array", `[]`},
		{"no id", `{"event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{}}`},
		{"no event", `{"id":"d","created_at":"2026-11-22T10:00:00.000Z","data":{}}`},
		{"no created_at", `{"id":"d","event":"test","data":{}}`},
		{"created_at not a time", `{"id":"d","event":"test","created_at":"today","data":{}}`},
		{"no data", `{"id":"d","event":"test","created_at":"2026-11-22T10:00:00.000Z"}`},
		{"null data", `{"id":"d","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":null}`},
		{"data of the wrong shape", `{"id":"d","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{"sent_at":42}}`},
		{"message data not an object", `{"id":"d","event":"message.received","created_at":"2026-11-22T10:00:00.000Z","data":"hi"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ev, err := Parse([]byte(tt.give)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse = %#v, %v; want ErrMalformed", ev, err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"id":"d","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{"workspace_id":"w","sent_at":"2026-11-22T10:00:00.000Z"}}`))
	f.Add([]byte(`{"id":"d","event":"postback.received","created_at":"2026-11-22T10:00:00.000Z","data":{"postback":{"payload":"p","received_at":null}}}`))
	f.Add([]byte(`{"id":"d","event":"other","created_at":"2026-11-22T10:00:00.000Z","data":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := Parse(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if ev.ID == "" || ev.Kind == "" || ev.Data == nil {
			t.Fatalf("Parse = %#v without error", ev)
		}
	})
}
