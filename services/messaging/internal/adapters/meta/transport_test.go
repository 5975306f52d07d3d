package meta

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// graphCall is one request the fake Graph API received.
type graphCall struct {
	Method string
	Path   string
	Query  map[string]string
	Body   any
}

// fakeGraph answers like the Graph API: /me/messages with {recipient_id,
// message_id}, a profile read with the user's fields, and, when answer is
// set, that status and raw body instead.
type fakeGraph struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []graphCall
	status int
	answer string
}

func newFakeGraph(t *testing.T) *fakeGraph {
	f := &fakeGraph{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		call := graphCall{Method: r.Method, Path: r.URL.Path, Query: map[string]string{}}
		for k := range r.URL.Query() {
			call.Query[k] = r.URL.Query().Get(k)
		}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &call.Body); err != nil || r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"(#100) Invalid JSON","type":"OAuthException","code":100}}`)
				return
			}
		}
		f.mu.Lock()
		f.calls = append(f.calls, call)
		status, answer := f.status, f.answer
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case answer != "":
			w.WriteHeader(status)
			_, _ = io.WriteString(w, answer)
		case r.URL.Path == "/me/messages" && strings.Contains(string(raw), `"sender_action"`):
			_, _ = io.WriteString(w, `{"recipient_id":"6843201987654321"}`)
		case r.URL.Path == "/me/messages":
			_, _ = io.WriteString(w, `{"recipient_id":"6843201987654321","message_id":"m_sent_1"}`)
		case r.URL.Path == "/"+psid:
			_, _ = io.WriteString(w, `{"first_name":"Ada","last_name":"Lovelace","profile_pic":"https://platform-lookaside.fbsbx.com/platform/profilepic/?psid=6843201987654321","id":"6843201987654321"}`)
		case r.URL.Path == "/"+igsid:
			_, _ = io.WriteString(w, `{"username":"ada.codes","profile_pic":"https://scontent.cdninstagram.com/ada.jpg","id":"1104567890123456"}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"Unsupported get request.","type":"GraphMethodException","code":100,"error_subcode":33}}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGraph) fail(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.answer = status, body
}

func (f *fakeGraph) received() []graphCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]graphCall(nil), f.calls...)
}

func newTestTransport(t *testing.T) (*Transport, *fakeGraph) {
	f := newFakeGraph(t)
	return NewTransport(NewGraph(f.srv.URL, &http.Client{Timeout: 5 * time.Second})), f
}

func target(kind channel.Kind) conversation.Target {
	to := psid
	if kind == channel.KindInstagram {
		to = igsid
	}
	return conversation.Target{
		Channel:      channel.Channel{ID: "c1", Kind: kind, ExternalID: pageID, Token: "EAAG-page-token"},
		Conversation: conversation.Conversation{ID: "v1", Platform: kind, ReplyTo: to},
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad want JSON %s: %v", s, err)
	}
	return v
}

// wantOneSend checks that the fake received exactly one Send API call with
// the page token and the body want.
func wantOneSend(t *testing.T, f *fakeGraph, want string) {
	t.Helper()
	calls := f.received()
	if len(calls) != 1 {
		t.Fatalf("graph got %d calls, want 1: %+v", len(calls), calls)
	}
	c := calls[0]
	if c.Method != http.MethodPost || c.Path != "/me/messages" || c.Query["access_token"] != "EAAG-page-token" {
		t.Fatalf("call %s %s %v", c.Method, c.Path, c.Query)
	}
	if !reflect.DeepEqual(c.Body, jsonValue(t, want)) {
		got, _ := json.Marshal(c.Body)
		t.Fatalf("body = %s\nwant   %s", got, want)
	}
}

func TestSendText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind channel.Kind
		give conversation.OutboundText
		want string
	}{
		{
			name: "text",
			kind: channel.KindMessenger,
			give: conversation.OutboundText{Text: "It ships today."},
			want: `{"recipient":{"id":"6843201987654321"},"messaging_type":"RESPONSE","message":{"text":"It ships today."}}`,
		},
		{
			name: "quick replies carry their text as payload",
			kind: channel.KindInstagram,
			give: conversation.OutboundText{Text: "Which size?", QuickReplies: []string{"Small", "Large"}},
			want: `{"recipient":{"id":"1104567890123456"},"messaging_type":"RESPONSE","message":{"text":"Which size?","quick_replies":[
				{"content_type":"text","title":"Small","payload":"Small"},{"content_type":"text","title":"Large","payload":"Large"}]}}`,
		},
		{
			name: "buttons are a button template on messenger",
			kind: channel.KindMessenger,
			give: conversation.OutboundText{Text: "Your order", Buttons: []conversation.Button{
				{Type: "web_url", Title: "Track", URL: "https://shop.example/track/77"},
				{Type: "postback", Title: "Talk to us", Payload: "HUMAN"},
			}},
			want: `{"recipient":{"id":"6843201987654321"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"template","payload":{
				"template_type":"button","text":"Your order","buttons":[
				{"type":"web_url","url":"https://shop.example/track/77","title":"Track"},
				{"type":"postback","title":"Talk to us","payload":"HUMAN"}]}}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, f := newTestTransport(t)
			sent, err := tr.SendText(context.Background(), target(tt.kind), tt.give)
			if err != nil || sent.ExternalID != "m_sent_1" {
				t.Fatalf("sent %+v, %v", sent, err)
			}
			wantOneSend(t, f, tt.want)
		})
	}
}

func TestSendImageAndCarousel(t *testing.T) {
	t.Parallel()
	tr, f := newTestTransport(t)
	sent, err := tr.SendImage(context.Background(), target(channel.KindMessenger), "https://cdn.example/jacket.webp")
	if err != nil || sent.ExternalID != "m_sent_1" {
		t.Fatalf("image: %+v %v", sent, err)
	}
	wantOneSend(t, f, `{"recipient":{"id":"6843201987654321"},"messaging_type":"RESPONSE","message":{"attachment":{
		"type":"image","payload":{"url":"https://cdn.example/jacket.webp","is_reusable":true}}}}`)

	tr, f = newTestTransport(t)
	sents, err := tr.SendCarousel(context.Background(), target(channel.KindInstagram), conversation.OutboundCarousel{
		Ratio: "square",
		Elements: []conversation.Card{
			{Title: "Blue jacket", Subtitle: "$80", ImageURL: "https://cdn.example/blue.JPG", Buttons: []conversation.Button{
				{Type: "web_url", Title: "View", URL: "https://shop.example/blue"},
				{Type: "postback", Title: "Buy", Payload: "BUY_BLUE"},
			}},
			{Title: "Red jacket", Subtitle: "$75"},
		},
	})
	if err != nil || len(sents) != 1 || sents[0].ExternalID != "m_sent_1" {
		t.Fatalf("carousel: %+v %v", sents, err)
	}
	wantOneSend(t, f, `{"recipient":{"id":"1104567890123456"},"messaging_type":"RESPONSE","message":{"attachment":{
		"type":"template","payload":{"template_type":"generic","image_aspect_ratio":"square","elements":[
			{"title":"Blue jacket","subtitle":"$80","image_url":"https://cdn.example/blue.JPG","buttons":[
				{"type":"web_url","url":"https://shop.example/blue","title":"View"},
				{"type":"postback","title":"Buy","payload":"BUY_BLUE"}]},
			{"title":"Red jacket","subtitle":"$75"}]}}}}`)
}

func TestSendTyping(t *testing.T) {
	t.Parallel()
	tr, f := newTestTransport(t)
	if err := tr.SendTyping(context.Background(), target(channel.KindMessenger)); err != nil {
		t.Fatal(err)
	}
	wantOneSend(t, f, `{"recipient":{"id":"6843201987654321"},"sender_action":"typing_on"}`)
}

// TestSendRefusedBeforeSending covers input Meta would refuse: each is a
// field error naming the field, and nothing reaches Meta.
func TestSendRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name      string
		send      func(tr *Transport) error
		wantField string
		wantText  string
	}{
		{"instagram buttons", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindInstagram), conversation.OutboundText{Text: "x", Buttons: []conversation.Button{{Type: "postback", Title: "Buy", Payload: "B"}}})
			return err
		}, "buttons", "use quick_replies"},
		{"instagram gif image", func(tr *Transport) error {
			_, err := tr.SendImage(ctx, target(channel.KindInstagram), "https://cdn.example/dance.gif")
			return err
		}, "image_url", "JPEG or PNG"},
		{"instagram webp card image", func(tr *Transport) error {
			_, err := tr.SendCarousel(ctx, target(channel.KindInstagram), conversation.OutboundCarousel{Elements: []conversation.Card{
				{Title: "ok", ImageURL: "https://cdn.example/a.png"}, {Title: "bad", ImageURL: "https://cdn.example/b.WEBP?w=300"}}})
			return err
		}, "elements[1].image_url", "JPEG or PNG"},
		{"card with only a title", func(tr *Transport) error {
			_, err := tr.SendCarousel(ctx, target(channel.KindMessenger), conversation.OutboundCarousel{Elements: []conversation.Card{
				{Title: "ok", Subtitle: "fine"}, {Title: "bare"}}})
			return err
		}, "elements[1]", "subtitle, image_url or buttons"},
		{"messenger text over 2000 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: long(2001)})
			return err
		}, "text", "2000"},
		{"instagram text over 1000 bytes", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindInstagram), conversation.OutboundText{Text: strings.Repeat("é", 501)})
			return err
		}, "text", "1000 bytes"},
		{"button template text over 640 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: long(641), Buttons: []conversation.Button{{Type: "postback", Title: "Buy", Payload: "B"}}})
			return err
		}, "text", "640"},
		{"button title over 20 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: "x", Buttons: []conversation.Button{{Type: "postback", Title: long(21), Payload: "B"}}})
			return err
		}, "buttons[0].title", "20"},
		{"postback payload over 1000 characters", func(tr *Transport) error {
			_, err := tr.SendCarousel(ctx, target(channel.KindMessenger), conversation.OutboundCarousel{Elements: []conversation.Card{
				{Title: "t", Buttons: []conversation.Button{{Type: "web_url", Title: "W", URL: "https://x.example"}, {Type: "postback", Title: "P", Payload: long(1001)}}}}})
			return err
		}, "elements[0].buttons[1].payload", "1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, f := newTestTransport(t)
			err := tt.send(tr)
			var fe *conversation.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Error(), tt.wantText) {
				t.Fatalf("error = %v, want a field error on %s mentioning %q", err, tt.wantField, tt.wantText)
			}
			if n := len(f.received()); n != 0 {
				t.Fatalf("meta got %d calls", n)
			}
		})
	}
}

func TestInstagramImageRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url    string
		refuse string // the extension the refusal names; "": accepted
	}{
		{"https://cdn.example/a.jpg", ""},
		{"https://cdn.example/a.JPEG", ""},
		{"https://cdn.example/a.png?width=600", ""},
		{"https://cdn.example/photos/1234", ""},     // no extension: Meta decides
		{"https://cdn.example/render.php?id=7", ""}, // not a media extension: Meta decides
		{"https://cdn.example/a.gif", ".gif"},
		{"https://cdn.example/a.webp", ".webp"},
		{"https://cdn.example/a.HEIC", ".heic"},
		{"https://cdn.example/a.svg#x", ".svg"},
		{"https://cdn.example/clip.mp4", ".mp4"},
		{"https://cdn.example/a.avif", ".avif"},
		{"https://cdn.example/a%2Egif", ".gif"}, // the decoded path is what names the file
	}
	for _, tt := range tests {
		err := checkImage(channel.KindInstagram, tt.url, "image_url")
		want := "must be a JPEG or PNG image on instagram (the URL's file ends in " + tt.refuse + ")"
		if (err != nil) != (tt.refuse != "") || (err != nil && !strings.HasSuffix(err.Error(), want)) {
			t.Errorf("instagram %s: error %v, want refused=%v (%q)", tt.url, err, tt.refuse != "", want)
		}
		if err := checkImage(channel.KindMessenger, tt.url, "image_url"); err != nil {
			t.Errorf("messenger %s: %v, want any format accepted", tt.url, err)
		}
	}
}

func TestSendGraphRefusals(t *testing.T) {
	t.Parallel()
	tr, f := newTestTransport(t)
	ctx := context.Background()

	f.fail(http.StatusBadRequest, `{"error":{"message":"(#10) This message is sent outside of allowed window.","type":"OAuthException","code":10,"error_subcode":2018278,"fbtrace_id":"A1"}}`)
	if _, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: "hi"}); !errors.Is(err, conversation.ErrOutsideWindow) {
		t.Fatalf("meta's window refusal: %v, want ErrOutsideWindow", err)
	}

	f.fail(http.StatusBadRequest, `{"error":{"message":"(#551) This person isn't available right now.","type":"OAuthException","code":551,"error_subcode":1545041,"fbtrace_id":"A2"}}`)
	_, err := tr.SendImage(ctx, target(channel.KindInstagram), "https://cdn.example/a.png")
	var pe *conversation.PlatformError
	if !errors.As(err, &pe) || pe.Platform != channel.KindInstagram || pe.Code != 551 || !strings.Contains(pe.Description, "This person isn't available right now") {
		t.Fatalf("refusal: %v", err)
	}
	if strings.Contains(err.Error(), "EAAG-page-token") {
		t.Fatalf("the error leaks the page token: %v", err)
	}

	f.fail(http.StatusOK, `{"recipient_id":"6843201987654321"}`)
	if _, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: "hi"}); !errors.As(err, &pe) {
		t.Fatalf("an answer without message_id: %v, want a platform error", err)
	}

	if _, err := tr.SendText(ctx, target(channel.KindTelegram), conversation.OutboundText{Text: "hi"}); err == nil {
		t.Fatal("a telegram conversation was sent through meta")
	}
}

func TestProfile(t *testing.T) {
	t.Parallel()
	f := newFakeGraph(t)
	g := NewGraph(f.srv.URL, &http.Client{Timeout: 5 * time.Second})
	ctx := context.Background()

	p, err := g.Profile(ctx, channel.KindMessenger, "EAAG-page-token", psid)
	if err != nil || p.Name != "Ada Lovelace" || p.ProfilePic != "https://platform-lookaside.fbsbx.com/platform/profilepic/?psid=6843201987654321" {
		t.Fatalf("messenger profile %+v, %v", p, err)
	}
	p, err = g.Profile(ctx, channel.KindInstagram, "EAAG-page-token", igsid)
	if err != nil || p.Name != "ada.codes" || p.ProfilePic != "https://scontent.cdninstagram.com/ada.jpg" {
		t.Fatalf("instagram profile %+v, %v", p, err)
	}
	calls := f.received()
	if len(calls) != 2 {
		t.Fatalf("calls %+v", calls)
	}
	for i, want := range []struct{ path, fields string }{
		{"/" + psid, "first_name,last_name,profile_pic"},
		{"/" + igsid, "name,username,profile_pic"},
	} {
		c := calls[i]
		if c.Method != http.MethodGet || c.Path != want.path || c.Query["fields"] != want.fields || c.Query["access_token"] != "EAAG-page-token" {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
	if _, err := g.Profile(ctx, channel.KindMessenger, "EAAG-page-token", "unknown"); err == nil {
		t.Fatal("a refused profile read gave no error")
	}
}
