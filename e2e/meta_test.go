package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// The Meta app of these tests.
const (
	metaAppSecret   = "e2e-meta-app-secret-5b1f"
	metaVerifyToken = "e2e-verify-token"
	metaPageToken   = "EAAGe2ePageToken"
)

// metaSuite is a running Parley wired to a fake Graph API, with a workspace
// whose webhook is the developer's receiver and one Meta channel in mode
// external.
type metaSuite struct {
	*suite
	graph     *metafake.Server
	key       string
	workspace string
	secret    string // the webhook signing secret
	rcv       *receiver.Receiver
	channelID string
}

func startMetaSuite(t *testing.T, kind, pageID string, extra ...string) *metaSuite {
	t.Helper()
	graph, graphAPI := metafake.Start(t)
	s := startSuite(t, append([]string{
		"META_APP_SECRET=" + metaAppSecret,
		"META_VERIFY_TOKEN=" + metaVerifyToken,
		"META_GRAPH_API_BASE=" + graphAPI + "/v21.0",
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
	}, extra...)...)
	m := &metaSuite{suite: s, graph: graph, rcv: newReceiver(t)}

	m.workspace, m.key = s.developer(t)
	m.secret = s.saveWebhook(t, m.key, m.rcv.URL)
	ch := s.addChannel(t, m.workspace, "external", "--kind", kind, "--external-id", pageID, "--token", metaPageToken)
	if ch.ExternalID != pageID || ch.Kind != kind {
		t.Fatalf("channel create: %+v", ch)
	}
	m.channelID = ch.ID
	return m
}

// post sends a webhook notification to /ingress/meta with signature (none
// when empty) and returns the status.
func (m *metaSuite) post(t *testing.T, body []byte, signature string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, m.messagingURL+"/ingress/meta", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post to /ingress/meta: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// deliver posts body signed with the app secret, as Meta does.
func (m *metaSuite) deliver(t *testing.T, body []byte) {
	t.Helper()
	if status := m.post(t, body, metafake.Sign(metaAppSecret, body)); status != http.StatusOK {
		t.Fatalf("/ingress/meta = %d", status)
	}
}

// sends returns the Send API calls Meta received.
func (m *metaSuite) sends() []metafake.Call { return m.graph.CallsTo("/me/messages") }

// lastSend returns the last Send API call's body as JSON, after checking it
// carried the page token.
func (m *metaSuite) lastSend(t *testing.T) string {
	t.Helper()
	sends := m.sends()
	if len(sends) == 0 {
		t.Fatal("meta received no send")
	}
	c := sends[len(sends)-1]
	if c.Method != http.MethodPost || c.AccessToken != metaPageToken {
		t.Fatalf("send %s with token %q", c.Method, c.AccessToken)
	}
	b, _ := json.Marshal(c.Body)
	return string(b)
}

// wantJSON fails unless got and want are the same JSON value.
func wantJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s =\n%s\nwant\n%s", what, got, want)
	}
}

// metaPost renders a webhook notification with one entry.
func metaPost(object, pageID string, events ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"object": object, "entry": []any{
		map[string]any{"id": pageID, "time": time.Now().UnixMilli(), "messaging": events},
	}})
	return b
}

func metaMessage(pageID, sender string, at time.Time, message map[string]any) map[string]any {
	return map[string]any{"sender": map[string]any{"id": sender}, "recipient": map[string]any{"id": pageID}, "timestamp": at.UnixMilli(), "message": message}
}

// waitEvent waits for a delivery of event whose message.text is text.
func (m *metaSuite) waitEvent(t *testing.T, event, text string) customerEvent {
	t.Helper()
	var found customerEvent
	m.rcv.Await(t, fmt.Sprintf("%s with text %q", event, text), func(got []receiver.Request) bool {
		for _, req := range receiver.OfEvent(got, event) {
			var ev customerEvent
			if err := json.Unmarshal(req.Body, &ev); err != nil {
				t.Fatalf("%s body: %v\n%s", event, err, req.Body)
			}
			if ev.Data.Message["text"] == text {
				verifySignature(t, req, m.secret)
				checkDeliveryHeaders(t, req, event)
				if ev.ID != req.Header.Get("X-Service-Delivery") || ev.Event != event || !isUTCTimestamp(ev.CreatedAt) {
					t.Fatalf("envelope head %+v", ev)
				}
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// messageAt is Meta's millisecond timestamp as the API renders it.
func messageAt(at time.Time) string {
	return time.UnixMilli(at.UnixMilli()).UTC().Format(time.RFC3339Nano)
}

func sameTime(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}

// TestMessengerEndToEnd: a customer writes to the page on Messenger, the
// developer's webhook receives message.received with every field, the
// developer answers through the gateway and Meta receives the Send API
// calls; a tapped button comes back as postback.received; the 24-hour
// window and Meta's refusals give their codes with nothing sent.
func TestMessengerEndToEnd(t *testing.T) {
	t.Parallel()
	const pageID, psid = "106372195099001", "6843201900000001"
	m := startMetaSuite(t, "messenger", pageID, "MESSAGING_WINDOW=1h")
	m.graph.SetProfile(psid, metafake.Profile{FirstName: "Ada", LastName: "Lovelace", ProfilePic: "https://platform-lookaside.fbsbx.com/platform/profilepic/?psid=" + psid})

	// Meta's subscription check.
	resp, err := http.Get(m.messagingURL + "/ingress/meta?hub.mode=subscribe&hub.verify_token=" + metaVerifyToken + "&hub.challenge=4242")
	if err != nil {
		t.Fatal(err)
	}
	challenge, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(challenge) != "4242" {
		t.Fatalf("hub.challenge = %d %q", resp.StatusCode, challenge)
	}
	resp, err = http.Get(m.messagingURL + "/ingress/meta?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=4242")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("wrong verify token = %d, want 403", resp.StatusCode)
	}

	// The customer writes; a tampered copy of the post is refused.
	sentAt := time.Now().Add(-time.Minute)
	const mid = "m_e2e_AG5Hz2Uq7tuwNEhXfYYKj8mJEM"
	body := metaPost("page", pageID, metaMessage(pageID, psid, sentAt, map[string]any{"mid": mid, "text": "Is the blue jacket in stock?"}))
	tampered := bytes.Replace(body, []byte("blue jacket"), []byte("free jacket"), 1)
	if status := m.post(t, tampered, metafake.Sign(metaAppSecret, body)); status != http.StatusUnauthorized {
		t.Fatalf("tampered post = %d, want 401", status)
	}
	if status := m.post(t, body, ""); status != http.StatusUnauthorized {
		t.Fatalf("unsigned post = %d, want 401", status)
	}
	m.deliver(t, body)
	m.deliver(t, body) // Meta redelivers; stored and forwarded once

	ev := m.waitEvent(t, "message.received", "Is the blue jacket in stock?")
	d := ev.Data
	if d.WorkspaceID != m.workspace || d.ConversationID == "" || d.Platform != "messenger" {
		t.Fatalf("data = %+v", d)
	}
	if d.Channel["kind"] != "messenger" || d.Channel["external_id"] != pageID {
		t.Fatalf("data.channel = %v", d.Channel)
	}
	if d.Contact["id"] == "" || d.Contact["sender_id"] != psid || d.Contact["name"] != "Ada Lovelace" ||
		d.Contact["profile_pic"] != "https://platform-lookaside.fbsbx.com/platform/profilepic/?psid="+psid {
		t.Fatalf("data.contact = %v", d.Contact)
	}
	if d.Message["id"] == "" || d.Message["type"] != "text" || d.Message["external_id"] != mid ||
		!sameTime(fmt.Sprint(d.Message["created_at"]), messageAt(sentAt)) {
		t.Fatalf("data.message = %v, want created_at %s", d.Message, messageAt(sentAt))
	}
	if _, ok := d.Message["attachment"]; ok {
		t.Fatalf("a text message has an attachment: %v", d.Message)
	}
	if n := len(m.graph.CallsTo("/" + psid)); n != 1 {
		t.Fatalf("profile reads = %d, want 1", n)
	}
	conv := d.ConversationID

	// The developer answers: text with quick replies, then buttons.
	status, _, out := m.api(t, m.key, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": conv, "text": "Which size?", "quick_replies": []string{"Size M", "Size L"},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/messages = %d %v", status, out)
	}
	wantJSON(t, "quick replies send", m.lastSend(t), `{"recipient":{"id":"`+psid+`"},"messaging_type":"RESPONSE","message":{"text":"Which size?","quick_replies":[
		{"content_type":"text","title":"Size M","payload":"Size M"},{"content_type":"text","title":"Size L","payload":"Size L"}]}}`)
	if msg := out["message"].(map[string]any); msg["sender"] != "user" || !strings.HasPrefix(fmt.Sprint(msg["external_id"]), "m_fake_") {
		t.Fatalf("sent message = %v", msg)
	}
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": conv, "text": "Your order is on its way.",
		"buttons": []map[string]string{
			{"type": "web_url", "title": "Track", "url": "https://shop.example/track/77"},
			{"type": "postback", "title": "Talk to us", "payload": "HUMAN"},
		},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/messages with buttons = %d %v", status, out)
	}
	wantJSON(t, "button template send", m.lastSend(t), `{"recipient":{"id":"`+psid+`"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"template","payload":{
		"template_type":"button","text":"Your order is on its way.","buttons":[
			{"type":"web_url","url":"https://shop.example/track/77","title":"Track"},
			{"type":"postback","title":"Talk to us","payload":"HUMAN"}]}}}}`)

	// Typing, then an image with a text: two messages, both stored with
	// Meta's ids.
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": conv})
	if status != http.StatusOK || !reflect.DeepEqual(out, map[string]any{"ok": true}) {
		t.Fatalf("POST /v1/typing = %d %v", status, out)
	}
	wantJSON(t, "typing", m.lastSend(t), `{"recipient":{"id":"`+psid+`"},"sender_action":"typing_on"}`)
	before := len(m.sends())
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/image", map[string]any{
		"conversation_id": conv, "image_url": "https://cdn.example/jacket-blue.png", "text": "Here it is.",
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/image = %d %v", status, out)
	}
	sends := m.sends()[before:]
	if len(sends) != 2 {
		t.Fatalf("image sends = %+v, want the image then the text", sends)
	}
	img, _ := json.Marshal(sends[0].Body)
	txt, _ := json.Marshal(sends[1].Body)
	wantJSON(t, "image send", string(img), `{"recipient":{"id":"`+psid+`"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"image","payload":{"url":"https://cdn.example/jacket-blue.png","is_reusable":true}}}}`)
	wantJSON(t, "image text send", string(txt), `{"recipient":{"id":"`+psid+`"},"messaging_type":"RESPONSE","message":{"text":"Here it is."}}`)
	both, _ := out["messages"].([]any)
	if len(both) != 2 {
		t.Fatalf("image answer = %v", out)
	}
	status, _, list := m.api(t, m.key, http.MethodGet, "/v1/conversations/"+conv+"/messages", nil)
	stored := map[string]map[string]any{}
	for _, x := range list["messages"].([]any) {
		msg := x.(map[string]any)
		stored[fmt.Sprint(msg["id"])] = msg
	}
	for i, wantType := range []string{"image", "text"} {
		id := fmt.Sprint(both[i].(map[string]any)["id"])
		s := stored[id]
		if status != http.StatusOK || s == nil || s["type"] != wantType || s["sender"] != "user" || !strings.HasPrefix(fmt.Sprint(s["external_id"]), "m_fake_") {
			t.Fatalf("stored %s message %s = %v", wantType, id, s)
		}
	}

	// The customer taps the postback button and sends a photo.
	tapped := time.Now().Add(-30 * time.Second)
	m.deliver(t, metaPost("page", pageID, map[string]any{
		"sender": map[string]any{"id": psid}, "recipient": map[string]any{"id": pageID}, "timestamp": tapped.UnixMilli(),
		"postback": map[string]any{"mid": "m_e2e_postback_1", "title": "Talk to us", "payload": "HUMAN"},
	}))
	pb := m.waitEvent(t, "postback.received", "Talk to us")
	if pb.Data.Postback["payload"] != "HUMAN" || !sameTime(pb.Data.Postback["received_at"], messageAt(tapped)) {
		t.Fatalf("data.postback = %v", pb.Data.Postback)
	}
	if pb.Data.ConversationID != conv || pb.Data.Platform != "messenger" || pb.Data.Contact["sender_id"] != psid || pb.Data.Contact["name"] != "Ada Lovelace" ||
		pb.Data.Message["type"] != "postback" || pb.Data.Message["external_id"] != "m_e2e_postback_1" || pb.Data.Channel["external_id"] != pageID {
		t.Fatalf("postback.received data = %+v", pb.Data)
	}
	photo := "https://scontent.xx.fbcdn.net/v/t1.15752-9/photo.jpg?_nc_cat=1"
	m.deliver(t, metaPost("page", pageID, metaMessage(pageID, psid, time.Now(), map[string]any{
		"mid": "m_e2e_photo", "attachments": []any{map[string]any{"type": "image", "payload": map[string]any{"url": photo}}},
	})))
	att := m.waitEvent(t, "message.received", "")
	if a, _ := att.Data.Message["attachment"].(map[string]any); a["url"] != photo || a["type"] != "image" || att.Data.Message["type"] != "image" {
		t.Fatalf("attachment message = %v", att.Data.Message)
	}

	// Every limit of the send API, on Messenger: 400 with nothing sent.
	before = len(m.sends())
	button := map[string]string{"type": "postback", "title": "Go", "payload": "GO"}
	card := func(title string) map[string]any { return map[string]any{"title": title, "subtitle": "s"} }
	cards := make([]map[string]any, 11)
	for i := range cards {
		cards[i] = card(fmt.Sprintf("Card %d", i))
	}
	limits := []struct {
		name, path string
		body       map[string]any
		code, part string
	}{
		{"tag", "/v1/messages", map[string]any{"conversation_id": conv, "text": "x", "tag": "HUMAN_AGENT"}, "tag_unsupported", "tag"},
		{"tag on typing", "/v1/typing", map[string]any{"conversation_id": conv, "tag": "HUMAN_AGENT"}, "tag_unsupported", "tag"},
		{"quick replies with buttons", "/v1/messages", map[string]any{"conversation_id": conv, "text": "x", "quick_replies": []string{"a"}, "buttons": []any{button}}, "invalid_request", "quick_replies"},
		{"four buttons", "/v1/messages", map[string]any{"conversation_id": conv, "text": "x", "buttons": []any{button, button, button, button}}, "invalid_request", "buttons"},
		{"http button url", "/v1/messages", map[string]any{"conversation_id": conv, "text": "x", "buttons": []any{map[string]string{"type": "web_url", "title": "Go", "url": "http://shop.example"}}}, "invalid_request", "buttons[0].url"},
		{"14 quick replies", "/v1/messages", map[string]any{"conversation_id": conv, "text": "x", "quick_replies": strings.Split("a b c d e f g h i j k l m n", " ")}, "invalid_request", "quick_replies"},
		{"text over messenger's 2000 characters", "/v1/messages", map[string]any{"conversation_id": conv, "text": strings.Repeat("a", 2001)}, "invalid_request", "text"},
		{"http image", "/v1/image", map[string]any{"conversation_id": conv, "image_url": "http://cdn.example/a.png"}, "invalid_request", "image_url"},
		{"11 cards", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": cards}, "invalid_request", "elements"},
		{"card title over 80", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []any{card(strings.Repeat("t", 81))}}, "invalid_request", "elements[0].title"},
		{"four card buttons", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []any{map[string]any{"title": "t", "buttons": []any{button, button, button, button}}}}, "invalid_request", "elements[0].buttons"},
		{"card with only a title", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []any{map[string]any{"title": "bare"}}}, "invalid_request", "elements[0]"},
	}
	for _, l := range limits {
		status, _, out := m.api(t, m.key, http.MethodPost, l.path, l.body)
		if status != http.StatusBadRequest || out["code"] != l.code || !strings.Contains(fmt.Sprint(out["message"]), l.part) {
			t.Fatalf("%s: %d %v, want 400 %s naming %s", l.name, status, out, l.code, l.part)
		}
	}
	if n := len(m.sends()); n != before {
		t.Fatalf("meta got %d sends for refused requests", n-before)
	}

	// Meta's own window refusal (code 10, subcode 2018278) is 409.
	m.graph.FailNext("/me/messages", metafake.OutsideWindow())
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv, "text": "Hello?"})
	if status != http.StatusConflict || out["code"] != "outside_messaging_window" {
		t.Fatalf("meta's window refusal = %d %v, want 409 outside_messaging_window", status, out)
	}
	// Another refusal is 502 with Meta's message.
	m.graph.FailNext("/me/messages", metafake.GraphError{Status: 400, Message: "(#551) This person isn't available right now.", Type: "OAuthException", Code: 551, Subcode: 1545041})
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv, "text": "Hello?"})
	if status != http.StatusBadGateway || out["code"] != "platform_error" || !strings.Contains(fmt.Sprint(out["message"]), "This person isn't available right now") {
		t.Fatalf("graph refusal = %d %v, want 502 platform_error with Meta's message", status, out)
	}

	// The 24-hour window, shrunk to 1 h: a customer whose last message Meta
	// timestamped 2 h ago cannot be answered, and Meta hears nothing.
	const stalePSID = "6843201900000002"
	m.deliver(t, metaPost("page", pageID, metaMessage(pageID, stalePSID, time.Now().Add(-2*time.Hour), map[string]any{"mid": "m_e2e_stale", "text": "Anyone there?"})))
	stale := m.waitEvent(t, "message.received", "Anyone there?").Data.ConversationID
	before = len(m.sends())
	for _, send := range []struct{ path string }{{"/v1/messages"}, {"/v1/typing"}, {"/v1/image"}} {
		body := map[string]any{"conversation_id": stale, "text": "Sorry for the wait", "image_url": "https://cdn.example/a.png"}
		if send.path == "/v1/typing" {
			body = map[string]any{"conversation_id": stale}
		}
		status, _, out = m.api(t, m.key, http.MethodPost, send.path, body)
		if status != http.StatusConflict || out["code"] != "outside_messaging_window" {
			t.Fatalf("%s outside the window = %d %v, want 409 outside_messaging_window", send.path, status, out)
		}
	}
	if n := len(m.sends()); n != before {
		t.Fatalf("meta got %d sends outside the window", n-before)
	}

	// The redelivered and tampered posts and the developer's own replies
	// produced no events.
	time.Sleep(300 * time.Millisecond)
	if n := m.rcv.Count("message.received"); n != 3 {
		t.Fatalf("receiver got %d message.received, want 3 (first message, photo, stale customer)", n)
	}
	if n := m.rcv.Count("postback.received"); n != 1 {
		t.Fatalf("receiver got %d postback.received, want 1", n)
	}
}

// TestInstagramEndToEnd: the same on Instagram, where buttons and images
// other than JPEG or PNG are refused with nothing sent, and carousels are a
// generic template.
func TestInstagramEndToEnd(t *testing.T) {
	t.Parallel()
	const accountID, igsid = "17841400000099001", "1104567890999001"
	m := startMetaSuite(t, "instagram", accountID)
	m.graph.SetProfile(igsid, metafake.Profile{Username: "ada.codes", ProfilePic: "https://scontent.cdninstagram.com/ada.jpg"})

	sentAt := time.Now().Add(-5 * time.Minute)
	const mid = "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAw"
	m.deliver(t, metaPost("instagram", accountID, metaMessage(accountID, igsid, sentAt, map[string]any{"mid": mid, "text": "Do you ship abroad?"})))
	// The account's own echo is never forwarded.
	m.deliver(t, metaPost("instagram", accountID, metaMessage(accountID, accountID, time.Now(), map[string]any{"mid": "aWdf_echo", "text": "We do!", "is_echo": true})))

	ev := m.waitEvent(t, "message.received", "Do you ship abroad?")
	d := ev.Data
	if d.Platform != "instagram" || d.WorkspaceID != m.workspace || d.Channel["kind"] != "instagram" || d.Channel["external_id"] != accountID {
		t.Fatalf("data = %+v", d)
	}
	if d.Contact["sender_id"] != igsid || d.Contact["name"] != "ada.codes" || d.Contact["profile_pic"] != "https://scontent.cdninstagram.com/ada.jpg" || d.Contact["id"] == "" {
		t.Fatalf("data.contact = %v", d.Contact)
	}
	if d.Message["external_id"] != mid || d.Message["type"] != "text" || !sameTime(fmt.Sprint(d.Message["created_at"]), messageAt(sentAt)) {
		t.Fatalf("data.message = %v", d.Message)
	}
	reads := m.graph.CallsTo("/" + igsid)
	if len(reads) != 1 || reads[0].Method != http.MethodGet || reads[0].AccessToken != metaPageToken {
		t.Fatalf("profile reads = %+v", reads)
	}
	conv := d.ConversationID

	status, _, out := m.api(t, m.key, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": conv, "text": "Where to?", "quick_replies": []string{"Europe", "Asia"},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/messages = %d %v", status, out)
	}
	wantJSON(t, "quick replies send", m.lastSend(t), `{"recipient":{"id":"`+igsid+`"},"messaging_type":"RESPONSE","message":{"text":"Where to?","quick_replies":[
		{"content_type":"text","title":"Europe","payload":"Europe"},{"content_type":"text","title":"Asia","payload":"Asia"}]}}`)

	// Refused before anything is sent.
	before := len(m.sends())
	refusals := []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/v1/messages", map[string]any{"conversation_id": conv, "text": "Pick one", "buttons": []map[string]string{{"type": "postback", "title": "Europe", "payload": "EU"}}}, "buttons"},
		{"/v1/image", map[string]any{"conversation_id": conv, "image_url": "https://cdn.example/dance.gif"}, "image_url"},
		{"/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{{"title": "Anim", "image_url": "https://cdn.example/anim.GIF"}}}, "elements[0].image_url"},
	}
	for _, r := range refusals {
		status, _, out := m.api(t, m.key, http.MethodPost, r.path, r.body)
		if status != http.StatusBadRequest || out["code"] != "invalid_request" || !strings.Contains(fmt.Sprint(out["message"]), r.field) {
			t.Fatalf("%s = %d %v, want 400 invalid_request naming %s", r.path, status, out, r.field)
		}
	}
	if n := len(m.sends()); n != before {
		t.Fatalf("meta got %d sends for refused requests", n-before)
	}

	// A carousel: a generic template with square images.
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/carousel", map[string]any{
		"conversation_id": conv, "ratio": "square",
		"elements": []map[string]any{
			{"title": "Blue jacket", "subtitle": "$80", "image_url": "https://cdn.example/blue.jpg", "buttons": []map[string]string{
				{"type": "web_url", "title": "View", "url": "https://shop.example/blue"},
				{"type": "postback", "title": "Buy", "payload": "BUY_BLUE"},
			}},
			{"title": "Red jacket", "image_url": "https://cdn.example/red.png"},
		},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/carousel = %d %v", status, out)
	}
	wantJSON(t, "carousel send", m.lastSend(t), `{"recipient":{"id":"`+igsid+`"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"template","payload":{
		"template_type":"generic","image_aspect_ratio":"square","elements":[
			{"title":"Blue jacket","subtitle":"$80","image_url":"https://cdn.example/blue.jpg","buttons":[
				{"type":"web_url","url":"https://shop.example/blue","title":"View"},
				{"type":"postback","title":"Buy","payload":"BUY_BLUE"}]},
			{"title":"Red jacket","image_url":"https://cdn.example/red.png"}]}}}}`)
	if msg := out["message"].(map[string]any); msg["type"] != "carousel" || !strings.HasPrefix(fmt.Sprint(msg["external_id"]), "m_fake_") {
		t.Fatalf("carousel message = %v", msg)
	}

	// A JPEG image, and typing.
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/image", map[string]any{"conversation_id": conv, "image_url": "https://cdn.example/map.JPEG?v=2"})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/image = %d %v", status, out)
	}
	wantJSON(t, "image send", m.lastSend(t), `{"recipient":{"id":"`+igsid+`"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"image","payload":{"url":"https://cdn.example/map.JPEG?v=2","is_reusable":true}}}}`)
	status, _, out = m.api(t, m.key, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": conv})
	if status != http.StatusOK || out["ok"] != true {
		t.Fatalf("POST /v1/typing = %d %v", status, out)
	}
	wantJSON(t, "typing", m.lastSend(t), `{"recipient":{"id":"`+igsid+`"},"sender_action":"typing_on"}`)

	// The customer taps the carousel's postback button.
	m.deliver(t, metaPost("instagram", accountID, map[string]any{
		"sender": map[string]any{"id": igsid}, "recipient": map[string]any{"id": accountID}, "timestamp": time.Now().UnixMilli(),
		"postback": map[string]any{"mid": "aWdf_postback", "title": "Buy", "payload": "BUY_BLUE"},
	}))
	if pb := m.waitEvent(t, "postback.received", "Buy"); pb.Data.Postback["payload"] != "BUY_BLUE" || pb.Data.Platform != "instagram" || pb.Data.ConversationID != conv {
		t.Fatalf("postback.received = %+v", pb.Data)
	}
	time.Sleep(300 * time.Millisecond)
	if n := m.rcv.Count("message.received"); n != 1 {
		t.Fatalf("receiver got %d message.received, want 1 (the echo is never forwarded)", n)
	}
}
