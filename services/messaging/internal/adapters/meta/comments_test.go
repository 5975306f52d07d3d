package meta

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// commentsOf parses every change of a testdata notification.
func commentsOf(t *testing.T, name string) ([]*comment.Inbound, []error) {
	t.Helper()
	var out []*comment.Inbound
	var errs []error
	for _, e := range readEntries(t, name) {
		for _, rc := range e.Changes {
			c, err := ParseChange(rc)
			if err != nil {
				t.Fatal(err)
			}
			in, err := ParseCommentChange(e, c, time.Now())
			out = append(out, in)
			errs = append(errs, err)
		}
	}
	return out, errs
}

func TestParseFeedComments(t *testing.T) {
	t.Parallel()
	got, errs := commentsOf(t, "feed_comments.json")
	at := func(secs int64) time.Time { return time.Unix(secs, 0).UTC() }
	want := []*comment.Inbound{
		{ExternalID: "882211_1500001", PostID: "106372195012345_882211", Text: "Do you ship to Darkhan?",
			FromID: "24609691832002", FromName: "Ada Lovelace", CreatedAt: at(1763805600)},
		// A reply to a comment keeps the comment as its parent.
		{ExternalID: "882211_1500002", PostID: "106372195012345_882211", ParentID: "882211_1500001", Text: "Same question!",
			FromID: "24609691832003", FromName: "Bo Erdene", CreatedAt: at(1763805660)},
		// The page's own comment is parsed; the app drops it by its author.
		{ExternalID: "882211_1500003", PostID: "106372195012345_882211", ParentID: "882211_1500001", Text: "Yes, in two days!",
			FromID: "106372195012345", FromName: "Darkhan Shop", CreatedAt: at(1763805720)},
		nil, // edited
		nil, // reaction
		nil, // removed
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			t.Logf("%d: %+v", i, got[i])
		}
		t.Fatal("parsed feed comments differ")
	}
}

func TestParseInstagramComments(t *testing.T) {
	t.Parallel()
	got, errs := commentsOf(t, "instagram_comments.json")
	at := time.Unix(1763805600, 0).UTC()
	want := []*comment.Inbound{
		{ExternalID: "17858893269000001", PostID: "17895695668004550", Text: "Price?", FromID: "17841455555", FromName: "ada.codes", CreatedAt: at},
		{ExternalID: "17858893269000002", PostID: "17895695668004550", ParentID: "17858893269000001", Text: "+1", FromID: "17841466666", FromName: "bo.erdene", CreatedAt: at},
		nil, // live_comments is another field
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			t.Logf("%d: %+v", i, got[i])
		}
		t.Fatal("parsed instagram comments differ")
	}
}

func TestParseCommentChangeEdges(t *testing.T) {
	t.Parallel()
	feed := func(value string) Change { return Change{Field: FieldFeed, Value: json.RawMessage(value)} }
	ig := func(value string) Change { return Change{Field: FieldComments, Value: json.RawMessage(value)} }
	entry := Entry{ID: "1", Time: 1763805600}
	arrival := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		entry     Entry
		change    Change
		wantTime  time.Time
		wantNil   bool
		malformed bool
	}{
		{"created_time as ISO 8601", entry, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":"2025-11-22T10:00:00+0000"}`), time.Date(2025, 11, 22, 10, 0, 0, 0, time.UTC), false, false},
		{"created_time as a numeric string", entry, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":"1763805600"}`), time.Unix(1763805600, 0).UTC(), false, false},
		{"no created_time: the entry's", entry, feed(`{"item":"comment","verb":"add","comment_id":"c"}`), time.Unix(1763805600, 0).UTC(), false, false},
		{"entry time in milliseconds", Entry{ID: "1", Time: 1763805600123}, ig(`{"id":"c","text":"x"}`), time.UnixMilli(1763805600123).UTC(), false, false},
		{"no from", entry, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":1763805600}`), time.Unix(1763805600, 0).UTC(), false, false},
		{"feed comment without id", entry, feed(`{"item":"comment","verb":"add","created_time":1763805600}`), time.Time{}, true, true},
		// A time missing or not positive is taken as the entry's, or
		// without one as the arrival (docs/channels.md "Messenger and
		// Instagram"): the comment is kept, not dropped.
		{"feed created_time 0: the entry's", entry, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":0}`), time.Unix(1763805600, 0).UTC(), false, false},
		{"feed created_time negative: the arrival", Entry{ID: "1"}, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":-5}`), arrival, false, false},
		{"feed created_time at year 1: the arrival", Entry{ID: "1"}, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":"0001-01-01T00:00:00+0000"}`), arrival, false, false},
		{"feed created_time as a string 0: the arrival", Entry{ID: "1", Time: -1}, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":"0"}`), arrival, false, false},
		{"feed created_time garbage", Entry{ID: "1"}, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":"soon"}`), time.Time{}, true, true},
		{"feed created_time an object", entry, feed(`{"item":"comment","verb":"add","comment_id":"c","created_time":{}}`), time.Time{}, true, true},
		{"feed without any time: the arrival", Entry{ID: "1"}, feed(`{"item":"comment","verb":"add","comment_id":"c"}`), arrival, false, false},
		{"feed value not an object", entry, feed(`[1,2]`), time.Time{}, true, true},
		{"instagram without id", entry, ig(`{"text":"x"}`), time.Time{}, true, true},
		{"instagram without entry time: the arrival", Entry{ID: "1"}, ig(`{"id":"c"}`), arrival, false, false},
		{"instagram with a negative entry time: the arrival", Entry{ID: "1", Time: -7}, ig(`{"id":"c"}`), arrival, false, false},
		{"instagram value not an object", entry, ig(`"x"`), time.Time{}, true, true},
		{"post added", entry, feed(`{"item":"status","verb":"add","post_id":"p"}`), time.Time{}, true, false},
		{"comment hidden", entry, feed(`{"item":"comment","verb":"hide","comment_id":"c"}`), time.Time{}, true, false},
		{"mention field", entry, Change{Field: "mention", Value: json.RawMessage(`{}`)}, time.Time{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, err := ParseCommentChange(tt.entry, tt.change, arrival)
			if tt.malformed != errors.Is(err, ErrMalformedChange) {
				t.Fatalf("err = %v, malformed %v", err, tt.malformed)
			}
			if !tt.malformed && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantNil != (in == nil) {
				t.Fatalf("in = %+v, want nil %v", in, tt.wantNil)
			}
			if in != nil && !in.CreatedAt.Equal(tt.wantTime) {
				t.Fatalf("CreatedAt = %v, want %v", in.CreatedAt, tt.wantTime)
			}
		})
	}
}

// FuzzParseCommentChange: whatever Meta (or anyone holding the app secret)
// sends, parsing never panics, and a comment always has an id and a time.
func FuzzParseCommentChange(f *testing.F) {
	for _, name := range []string{"feed_comments.json", "instagram_comments.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range mustEntries(f, raw) {
			for _, rc := range e.Changes {
				c, err := ParseChange(rc)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(c.Field, []byte(c.Value), e.Time)
			}
		}
	}
	f.Add("feed", []byte(`{"item":"comment","verb":"add","comment_id":"x","created_time":"2025-11-22T10:00:00+0000"}`), int64(0))
	f.Add("comments", []byte(`{"id":"1"}`), int64(-1))
	f.Add("feed", []byte(`null`), int64(0))
	f.Fuzz(func(t *testing.T, field string, value []byte, entryTime int64) {
		in, err := ParseCommentChange(Entry{ID: "1", Time: entryTime}, Change{Field: field, Value: value}, time.Now())
		if err != nil && !errors.Is(err, ErrMalformedChange) {
			t.Fatalf("error %v is not ErrMalformedChange", err)
		}
		if in != nil && (in.ExternalID == "" || in.CreatedAt.IsZero()) {
			t.Fatalf("comment without id or time: %+v", in)
		}
	})
}

// graphStub answers one Graph call with status and body and records it.
type graphStub struct {
	method, path, token string
	body                map[string]any
}

func stubGraph(t *testing.T, status int, answer string) (*Comments, *graphStub) {
	t.Helper()
	got := &graphStub{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got.method, got.path, got.token = r.Method, r.URL.Path, r.URL.Query().Get("access_token")
		_ = json.Unmarshal(raw, &got.body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return NewComments(NewGraph(srv.URL+"/v21.0", srv.Client())), got
}

func TestReplyPublicPerPlatform(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind channel.Kind
		path string
	}{
		{channel.KindMessenger, "/v21.0/882211_1500001/comments"},
		{channel.KindInstagram, "/v21.0/882211_1500001/replies"},
	} {
		c, got := stubGraph(t, 200, `{"id":"882211_1500009"}`)
		id, err := c.ReplyPublic(context.Background(), channel.Channel{Kind: tt.kind, Token: "tok"}, "882211_1500001", "Thanks!")
		if err != nil || id != "882211_1500009" {
			t.Fatalf("%s: %q %v", tt.kind, id, err)
		}
		if got.method != http.MethodPost || got.path != tt.path || got.token != "tok" || !reflect.DeepEqual(got.body, map[string]any{"message": "Thanks!"}) {
			t.Fatalf("%s: graph got %+v", tt.kind, got)
		}
	}
	c, _ := stubGraph(t, 200, `{}`)
	var pe *conversation.PlatformError
	if _, err := c.ReplyPublic(context.Background(), channel.Channel{Kind: channel.KindMessenger}, "c", "x"); !errors.As(err, &pe) {
		t.Fatalf("answer without id: %v", err)
	}
}

func TestReplyPrivate(t *testing.T) {
	t.Parallel()
	c, got := stubGraph(t, 200, `{"recipient_id":"6843201987654321","message_id":"m_AbC"}`)
	sent, err := c.ReplyPrivate(context.Background(), channel.Channel{Kind: channel.KindMessenger, Token: "tok"}, "882211_1500001", "Hi Ada")
	if err != nil || sent != (comment.PrivateSent{RecipientID: "6843201987654321", MessageID: "m_AbC"}) {
		t.Fatalf("sent = %+v, %v", sent, err)
	}
	want := map[string]any{"recipient": map[string]any{"comment_id": "882211_1500001"}, "message": map[string]any{"text": "Hi Ada"}}
	if got.path != "/v21.0/me/messages" || got.token != "tok" || !reflect.DeepEqual(got.body, want) {
		t.Fatalf("graph got %+v", got)
	}

	tests := []struct {
		name   string
		status int
		answer string
		check  func(error) bool
	}{
		{"meta's window refusal is an expired comment", 400,
			`{"error":{"message":"(#10) This message is sent outside of allowed window.","type":"OAuthException","code":10,"error_subcode":2018278}}`,
			func(err error) bool { return errors.Is(err, comment.ErrPrivateReplyExpired) }},
		{"other refusals are platform errors", 400,
			`{"error":{"message":"(#10903) This user cant reply to this activity","type":"OAuthException","code":10903}}`,
			func(err error) bool {
				var pe *conversation.PlatformError
				return errors.As(err, &pe) && strings.Contains(pe.Description, "cant reply")
			}},
		{"an answer without message_id", 200, `{"recipient_id":"1"}`,
			func(err error) bool { var pe *conversation.PlatformError; return errors.As(err, &pe) }},
	}
	for _, tt := range tests {
		c, _ := stubGraph(t, tt.status, tt.answer)
		if _, err := c.ReplyPrivate(context.Background(), channel.Channel{Kind: channel.KindInstagram}, "c", "x"); !tt.check(err) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
	}
}
