package messaging

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// AppendJSON writes what encoding/json writes, byte for byte, whatever
// the strings hold.
func TestConversationPageAppendJSONIsEncodingJSON(t *testing.T) {
	t.Parallel()
	next := "2026-01-02T03:04:05.123456Z"
	odd := []string{
		"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\rcr\bbs\fff",
		"\x00\x01\x1f\x7f", "héllo 世界 🙂", "\u2028\u2029", "bad \xff\xfe utf-8 \xc3", "\xe2\x80",
	}
	conv := func(s string) Conversation {
		return Conversation{ID: s, Platform: s, ChannelID: s, Contact: Contact{ID: s, SenderID: s, Name: s, ProfilePic: s}, LastMessageAt: s, CreatedAt: s}
	}
	pages := []ConversationPage{
		{},
		{Conversations: []Conversation{}},
		{Conversations: []Conversation{conv("a")}, NextBefore: &next},
	}
	for _, s := range odd {
		pages = append(pages, ConversationPage{Conversations: []Conversation{conv(s), conv(s + s)}, NextBefore: &s})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		raw := make([]byte, rng.IntN(24))
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		s := string(raw)
		pages = append(pages, ConversationPage{Conversations: []Conversation{conv(s)}, NextBefore: &s})
	}
	for _, p := range pages {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON =\n%s\nencoding/json =\n%s", got, want)
		}
	}
}

// AppendJSON writes the fields it knows; a field added to the types, even
// one omitted when empty, must be added to it too.
func TestAppendJSONKnowsEveryField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		give any
		want int
	}{{ConversationPage{}, 2}, {Conversation{}, 6}, {Contact{}, 4}} {
		if got := reflect.TypeOf(tt.give).NumField(); got != tt.want {
			t.Errorf("%T has %d fields, AppendJSON writes %d: add the new ones to it", tt.give, got, tt.want)
		}
	}
}
