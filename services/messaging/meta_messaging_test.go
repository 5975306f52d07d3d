package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
)

// The app's webhook settings in these tests.
const (
	metaAppSecret   = "3f1c0a9e7b2d4c6e8f0a1b2c3d4e5f60"
	metaVerifyToken = "parley-verify-7Qw"
	metaPageToken   = "EAAGm0PX4ZCpsBAPageToken"
	// testdata payloads of the meta adapter: real Meta notifications.
	metaTestdata = "internal/adapters/meta/testdata"
	testPageID   = "106372195012345"
	testPSID     = "6843201987654321"
	testIGID     = "17841400000000001"
	testIGSID    = "1104567890123456"
)

// metaGraph is the fake Graph API (the test kit's, speaking Meta's JSON)
// and where it is served.
type metaGraph struct {
	*metafake.Server
	URL string
}

func newMetaGraph(t *testing.T) *metaGraph {
	g := &metaGraph{Server: metafake.New()}
	srv := httptest.NewServer(g.Server)
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// profileReads returns the profile reads of userID.
func (g *metaGraph) profileReads(userID string) []metafake.Call {
	var out []metafake.Call
	for _, c := range g.Calls() {
		if c.Method == http.MethodGet && c.Path == "/"+userID {
			out = append(out, c)
		}
	}
	return out
}

// sends returns the Send API calls.
func (g *metaGraph) sends() []metafake.Call { return g.CallsTo("/me/messages") }

func withMeta(f *metaGraph) harnessOption {
	return func(c *svcconfig.Config) {
		c.MetaGraphAPIBase = f.URL
		c.MetaAppSecret = metaAppSecret
		c.MetaVerifyToken = metaVerifyToken
	}
}

func withWindow(d time.Duration) harnessOption {
	return func(c *svcconfig.Config) { c.MessagingWindow = d }
}

// metaChannel creates a messenger or instagram channel for the page or
// account pageID, with the page token, in mode.
func (h *harness) metaChannel(ws, kind, pageID, mode string) messagingapi.AdminChannel {
	h.t.Helper()
	var out messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{
		"workspace_id": ws, "kind": kind, "external_id": pageID, "token": metaPageToken,
	}, &out); err != nil {
		h.t.Fatalf("create %s channel: %v", kind, err)
	}
	if mode != "auto" {
		h.setMode(out.Channel.ID, mode)
		out.Channel.AIMode = mode
	}
	return out.Channel
}

// postMeta posts body to /ingress/meta with the X-Hub-Signature-256 header
// signature (none when empty).
func (h *harness) postMeta(body []byte, signature string) reply {
	h.t.Helper()
	header := map[string]string{}
	if signature != "" {
		header["X-Hub-Signature-256"] = signature
	}
	return h.post("/ingress/meta", string(body), header)
}

// sendMeta signs body with the app secret, as Meta does, posts it and
// requires 200.
func (h *harness) sendMeta(body []byte) {
	h.t.Helper()
	if rec := h.postMeta(body, meta.Sign(metaAppSecret, body)); rec.Code != http.StatusOK {
		h.t.Fatalf("meta ingress: %d %s", rec.Code, rec.Body)
	}
}

func metaTestdataFile(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(metaTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// metaEvent is one messaging event in Meta's JSON.
type metaEvent map[string]any

// notification renders events as one entry of a webhook post.
func notification(object, pageID string, events ...metaEvent) []byte {
	b, _ := json.Marshal(map[string]any{
		"object": object,
		"entry":  []any{map[string]any{"id": pageID, "time": time.Now().UnixMilli(), "messaging": events}},
	})
	return b
}

func textEvent(pageID, sender, mid, text string, at time.Time) metaEvent {
	return metaEvent{
		"sender": map[string]any{"id": sender}, "recipient": map[string]any{"id": pageID},
		"timestamp": at.UnixMilli(), "message": map[string]any{"mid": mid, "text": text},
	}
}

// streamEvents waits until the test's stream holds n events and returns
// them decoded.
func streamEvents(t *testing.T, js jetstream.JetStream, h *harness, n int) []*eventsv1.Event {
	t.Helper()
	var msgs []*jetstream.RawStreamMsg
	wait.Until(t, 5*time.Second, fmt.Sprintf("%d events in the stream", n), func() bool {
		msgs = streamMessages(t, js, h.env.Stream.Name)
		return len(msgs) >= n
	})
	out := make([]*eventsv1.Event, len(msgs))
	for i, m := range msgs {
		var ev eventsv1.Event
		if err := proto.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if m.Subject != h.env.Stream.Subject(ev.GetWorkspaceId(), ev.GetType()) || m.Header.Get("Nats-Msg-Id") != ev.GetId() {
			t.Fatalf("event %d on subject %s with id %s: %v", i, m.Subject, m.Header.Get("Nats-Msg-Id"), &ev)
		}
		out[i] = &ev
	}
	return out
}

func TestMetaVerifyChallenge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	get := func(query string) reply { return h.get("/ingress/meta?" + query) }
	rec := get("hub.mode=subscribe&hub.verify_token=" + metaVerifyToken + "&hub.challenge=1158201444")
	if rec.Code != http.StatusOK || rec.Body.String() != "1158201444" {
		t.Fatalf("right token: %d %q, want 200 echoing the challenge", rec.Code, rec.Body)
	}
	for _, q := range []string{
		"hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1158201444",
		"hub.mode=subscribe&hub.challenge=1158201444",
		"hub.mode=unsubscribe&hub.verify_token=" + metaVerifyToken + "&hub.challenge=1158201444",
	} {
		rec := get(q)
		if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), "1158201444") {
			t.Fatalf("%s: %d %s, want 403 without the challenge", q, rec.Code, rec.Body)
		}
	}
}

// TestMetaIngressSignature posts a real Messenger notification signed with
// the app secret, then the same body tampered with, then unsigned or signed
// otherwise: only the first is taken.
func TestMetaIngressSignature(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	body := metaTestdataFile(t, "messenger_text.json")
	signature := meta.Sign(metaAppSecret, body)

	tampered := []byte(strings.Replace(string(body), "blue jacket", "red jacket", 1))
	refusals := []struct {
		name      string
		body      []byte
		signature string
	}{
		{"tampered body", tampered, signature},
		{"missing signature", body, ""},
		{"signed with another secret", body, meta.Sign("another-app-secret", body)},
		{"sha1 form", body, "sha1=" + strings.TrimPrefix(signature, "sha256=")},
		{"not hex", body, "sha256=zz"},
	}
	for _, tt := range refusals {
		rec := h.postMeta(tt.body, tt.signature)
		if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != http.StatusUnauthorized || code != "unauthorized" {
			t.Fatalf("%s: %d %s, want 401 unauthorized", tt.name, rec.Code, rec.Body)
		}
	}
	if n := h.count("messages", ""); n != 0 {
		t.Fatalf("refused posts stored %d messages", n)
	}
	if n := h.count("ingress_receipts", ""); n != 0 {
		t.Fatalf("refused posts claimed %d deliveries", n)
	}
	if n := len(graph.Calls()); n != 0 {
		t.Fatalf("refused posts made %d Graph calls", n)
	}

	if rec := h.postMeta(body, signature); rec.Code != http.StatusOK {
		t.Fatalf("signed post: %d %s", rec.Code, rec.Body)
	}
	if n := h.count("messages", "content = 'Hi, is the blue jacket in stock?'"); n != 1 {
		t.Fatalf("stored %d messages from the signed post, want 1", n)
	}
	// The tampered text never arrived.
	if n := h.count("messages", "content LIKE '%red jacket%'"); n != 0 {
		t.Fatalf("the tampered text was stored")
	}
}

// TestMetaIngressRoutesByEntryID: each entry goes to the channel of its id
// and object; entries of unknown pages are skipped with 200.
func TestMetaIngressRoutesByEntryID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	ws := uuid.NewString()
	page := h.metaChannel(ws, "messenger", testPageID, "auto")
	ig := h.metaChannel(ws, "instagram", testIGID, "auto")
	now := time.Now()

	// One post, two entries: an unknown page's and ours.
	body, _ := json.Marshal(map[string]any{"object": "page", "entry": []any{
		map[string]any{"id": "999000111", "time": now.UnixMilli(), "messaging": []any{textEvent("999000111", "55", "m_other", "not ours", now)}},
		map[string]any{"id": testPageID, "time": now.UnixMilli(), "messaging": []any{textEvent(testPageID, testPSID, "m_ours", "ours", now)}},
	}})
	h.sendMeta(body)
	// The Instagram account's id under object "page" addresses no channel,
	// nor does the page's id under "instagram".
	h.sendMeta(notification("page", testIGID, textEvent(testIGID, testIGSID, "m_wrong_1", "wrong object", now)))
	h.sendMeta(notification("instagram", testPageID, textEvent(testPageID, testPSID, "m_wrong_2", "wrong object", now)))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, testIGSID, "m_ig", "on instagram", now)))
	// Other products' notifications are acknowledged and ignored.
	h.sendMeta([]byte(`{"object":"user","entry":[{"id":"1","time":1,"changes":[{"field":"email","value":"x"}]}]}`))

	convs := h.conversations(ws, "").Conversations
	if len(convs) != 2 {
		t.Fatalf("conversations = %+v, want one on the page and one on instagram", convs)
	}
	for _, c := range convs {
		msgs := h.messages(ws, c.ID, "").Messages
		switch {
		case c.ChannelID == page.ID && c.Platform == "messenger" && c.Contact.SenderID == testPSID && len(msgs) == 1 && msgs[0].Content == "ours":
		case c.ChannelID == ig.ID && c.Platform == "instagram" && c.Contact.SenderID == testIGSID && len(msgs) == 1 && msgs[0].Content == "on instagram":
		default:
			t.Fatalf("conversation %+v with %+v", c, msgs)
		}
	}
}

// A NUL character in a customer's text (docs/channels.md "What Parley keeps
// of a customer's text") is stored as U+FFFD, after the signature is
// checked over the body Meta sent, and the post is accepted.
func TestMetaIngressKeepsATextWithANUL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_nul", "hi\x00there", time.Now())))
	convs := h.conversations(ws, "").Conversations
	if len(convs) != 1 {
		t.Fatalf("conversations = %+v", convs)
	}
	if msgs := h.messages(ws, convs[0].ID, "").Messages; len(msgs) != 1 || msgs[0].Content != "hi\ufffdthere" {
		t.Fatalf("messages = %+v", msgs)
	}
}

// TestMetaIngressMessages drives every kind of messaging event through an
// external Messenger channel and checks what is stored and what reaches the
// stream, with every data field.
func TestMetaIngressMessages(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	graph.SetProfile(testPSID, metafake.Profile{FirstName: "Ada", LastName: "Lovelace", ProfilePic: "https://platform-lookaside.fbsbx.com/platform/profilepic/?psid=6843201987654321&eai=x", ID: "6843201987654321"})
	h := newHarness(t, withMeta(graph))
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	ch := h.metaChannel(ws, "messenger", testPageID, "external")

	// Real notifications, each posted twice as Meta does when it gets no
	// timely answer: text, echo, quick reply, attachments, postbacks,
	// receipts. Redeliveries store nothing twice.
	for _, file := range []string{
		"messenger_text.json", "messenger_echo.json", "messenger_quick_reply.json",
		"messenger_attachments.json", "messenger_postback.json", "messenger_receipts.json",
	} {
		body := metaTestdataFile(t, file)
		h.sendMeta(body)
		h.sendMeta(body)
	}

	// text, quick reply, 3 + 1 attachments, 2 postbacks; no echo.
	const want = 8
	if n := h.count("messages", ""); n != want {
		t.Fatalf("stored %d messages, want %d", n, want)
	}
	if n := h.count("messages", "content = 'Yes, in sizes M and L.'"); n != 0 {
		t.Fatal("the page's echo was stored")
	}
	convs := h.conversations(ws, "").Conversations
	if len(convs) != 1 {
		t.Fatalf("conversations = %+v", convs)
	}
	conv := convs[0]
	wantPic := "https://platform-lookaside.fbsbx.com/platform/profilepic/?psid=6843201987654321&eai=x"
	if conv.Contact.SenderID != testPSID || conv.Contact.Name != "Ada Lovelace" || conv.Contact.ProfilePic != wantPic || conv.Platform != "messenger" {
		t.Fatalf("conversation = %+v", conv)
	}
	// The profile is read once, for the new customer, with the page token.
	reads := graph.profileReads(testPSID)
	if len(reads) != 1 || reads[0].Query.Get("fields") != "first_name,last_name,profile_pic" || reads[0].Query.Get("access_token") != metaPageToken {
		t.Fatalf("profile reads = %+v, want one with the messenger fields and the page token", reads)
	}
	// Replies go to the PSID; the window runs from Meta's latest timestamp.
	var replyTo string
	var lastCustomer time.Time
	h.db.Raw(`SELECT reply_to, last_customer_message_at FROM messaging.conversations WHERE id = ?`, conv.ID).Row().Scan(&replyTo, &lastCustomer)
	if replyTo != testPSID || !lastCustomer.Equal(time.UnixMilli(1768471499999)) {
		t.Fatalf("reply_to %q, last_customer_message_at %v", replyTo, lastCustomer)
	}

	stored := map[string]messagingapi.Message{}
	for _, m := range h.messages(ws, conv.ID, "").Messages {
		stored[m.ExternalID+"|"+m.Type+"|"+fmt.Sprint(m.Metadata["attachment_index"])] = m
	}
	check := func(key, typ, content, createdAt string, metadata map[string]any) messagingapi.Message {
		t.Helper()
		m, ok := stored[key]
		if !ok {
			t.Fatalf("no stored message %s in %v", key, stored)
		}
		got, _ := json.Marshal(m.Metadata)
		wantMD, _ := json.Marshal(metadata)
		if m.Sender != "contact" || m.Type != typ || m.Content != content || m.CreatedAt != createdAt || string(got) != string(wantMD) {
			t.Fatalf("message %s = %+v, want type %s content %q at %s metadata %s", key, m, typ, content, createdAt, wantMD)
		}
		return m
	}
	text := check("m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P|text|<nil>",
		"text", "Hi, is the blue jacket in stock?", "2026-01-15T10:00:00.123Z", map[string]any{})
	check("m_qr_9hQ2cX1bVnLk3sT0|text|<nil>", "text", "Size M", "2026-01-15T10:01:39.5Z", map[string]any{"quick_reply_payload": "Size M"})
	front := "https://scontent.xx.fbcdn.net/v/t1.15752-9/receipt-front.jpg?_nc_cat=1&oh=00_AfA"
	check("m_att_Jk2nB7vQ0pLx|image|0", "image", "", "2026-01-15T10:03:19.001Z", map[string]any{
		"attachment": map[string]any{"type": "image", "url": front}, "attachment_count": 3, "attachment_index": 0})
	check("m_att_Jk2nB7vQ0pLx|file|2", "file", "", "2026-01-15T10:03:19.001Z", map[string]any{
		"attachment": map[string]any{"type": "file", "url": "https://cdn.fbsbx.com/v/t59.2708-21/invoice.pdf?_nc_cat=1"}, "attachment_count": 3, "attachment_index": 2})
	check("m_pb_Xr4tY7uI|postback|<nil>", "postback", "Talk to us", "2026-01-15T10:04:59.75Z", map[string]any{"payload": "HUMAN"})
	check("|postback|<nil>", "postback", "Get Started", "2026-01-15T10:04:59.999Z", map[string]any{"payload": "GET_STARTED"})

	// The stream: one event per stored message, in order, each once.
	events := streamEvents(t, js, h, want)
	time.Sleep(300 * time.Millisecond) // a redelivery's event, were there one, would follow
	if events = streamEvents(t, js, h, want); len(events) != want {
		t.Fatalf("stream holds %d events, want %d", len(events), want)
	}
	contact := &eventsv1.Contact{Id: conv.Contact.ID, SenderId: testPSID, Name: "Ada Lovelace", ProfilePic: wantPic}
	channel := &eventsv1.Channel{Kind: "messenger", ExternalId: testPageID}
	first := events[0]
	wantFirst := &eventsv1.MessageReceived{
		WorkspaceId: ws, ConversationId: conv.ID, Platform: "messenger", Channel: channel, Contact: contact,
		Message: &eventsv1.Message{Id: text.ID, Text: "Hi, is the blue jacket in stock?", Type: "text", ExternalId: text.ExternalID,
			CreatedAt: first.GetMessageReceived().GetMessage().GetCreatedAt()},
	}
	if first.GetType() != "message.received" || first.GetWorkspaceId() != ws || !proto.Equal(first.GetMessageReceived(), wantFirst) {
		t.Fatalf("first event = %v\nwant data %v", first, wantFirst)
	}
	if got := first.GetMessageReceived().GetMessage().GetCreatedAt().AsTime(); !got.Equal(time.UnixMilli(1768471200123)) {
		t.Fatalf("message.created_at = %v, want Meta's timestamp", got)
	}
	var types []string
	for _, ev := range events {
		types = append(types, ev.GetType())
	}
	wantTypes := "message.received message.received message.received message.received message.received message.received postback.received postback.received"
	if strings.Join(types, " ") != wantTypes {
		t.Fatalf("event types = %v", types)
	}
	if qr := events[1].GetMessageReceived().GetMessage(); qr.GetText() != "Size M" || qr.GetType() != "text" || qr.GetAttachment() != nil {
		t.Fatalf("quick reply event message = %v", qr)
	}
	att := events[2].GetMessageReceived().GetMessage()
	if att.GetType() != "image" || !proto.Equal(att.GetAttachment(), &eventsv1.Attachment{Url: front, Type: "image"}) || att.GetExternalId() != "m_att_Jk2nB7vQ0pLx" {
		t.Fatalf("attachment event message = %v", att)
	}
	if a := events[5].GetMessageReceived().GetMessage().GetAttachment(); a.GetType() != "audio" || !strings.Contains(a.GetUrl(), "audioclip") {
		t.Fatalf("audio event attachment = %v", a)
	}
	pb := events[6].GetPostbackReceived()
	if !proto.Equal(pb.GetContact(), contact) || !proto.Equal(pb.GetChannel(), channel) || pb.GetConversationId() != conv.ID || pb.GetPlatform() != "messenger" || pb.GetWorkspaceId() != ws {
		t.Fatalf("postback event = %v", pb)
	}
	if pb.GetPostback().GetPayload() != "HUMAN" || !pb.GetPostback().GetReceivedAt().AsTime().Equal(time.UnixMilli(1768471499750)) {
		t.Fatalf("postback = %v", pb.GetPostback())
	}
	if m := pb.GetMessage(); m.GetText() != "Talk to us" || m.GetType() != "postback" || m.GetExternalId() != "m_pb_Xr4tY7uI" || m.GetId() == "" {
		t.Fatalf("postback message = %v", m)
	}
	if p := events[7].GetPostbackReceived().GetPostback(); p.GetPayload() != "GET_STARTED" {
		t.Fatalf("postback without mid = %v", p)
	}
	if ch.ExternalID != testPageID {
		t.Fatalf("channel external_id %q", ch.ExternalID)
	}
}

// TestMetaIngressForwardsOnlyExternal: auto and suggest channels keep the
// inbox and publish nothing; Instagram profiles use Instagram's fields.
func TestMetaIngressForwardsOnlyExternal(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	graph.SetProfile(testIGSID, metafake.Profile{Name: "Ada L.", Username: "ada.codes", ProfilePic: "https://scontent.cdninstagram.com/ada.jpg", ID: "1104567890123456"})
	h := newHarness(t, withMeta(graph))
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "suggest")
	h.metaChannel(ws, "instagram", testIGID, "auto")
	now := time.Now()

	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_1", "to suggest", now)))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, testIGSID, "m_2", "to auto", now)))
	if n := h.count("messages", ""); n != 2 {
		t.Fatalf("stored %d messages, want 2", n)
	}
	// The customer without a profile (Meta refuses the read) is stored
	// without a name; the ingress does not fail.
	convs := h.conversations(ws, "").Conversations
	for _, c := range convs {
		switch c.Platform {
		case "instagram":
			if c.Contact.Name != "Ada L." || c.Contact.ProfilePic != "https://scontent.cdninstagram.com/ada.jpg" {
				t.Fatalf("instagram contact = %+v", c.Contact)
			}
		case "messenger":
			if c.Contact.Name != "" || c.Contact.ProfilePic != "" {
				t.Fatalf("messenger contact = %+v", c.Contact)
			}
		}
	}
	if r := graph.profileReads(testIGSID); len(r) != 1 || r[0].Query.Get("fields") != "name,username,profile_pic" {
		t.Fatalf("instagram profile reads = %+v", r)
	}
	// A known customer's profile is not read again, even when the first
	// read failed.
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_3", "again", now.Add(time.Second))))
	if r := graph.profileReads(testPSID); len(r) != 1 {
		t.Fatalf("messenger profile reads = %d, want 1", len(r))
	}

	// Switched to external, the next message is forwarded.
	h.setMode(h.conversationsChannel(ws, "instagram"), "external")
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, testIGSID, "m_4", "now external", now.Add(2*time.Second))))
	events := streamEvents(t, js, h, 1)
	time.Sleep(200 * time.Millisecond)
	if events = streamEvents(t, js, h, 1); len(events) != 1 || events[0].GetMessageReceived().GetMessage().GetText() != "now external" {
		t.Fatalf("events = %v, want only the external channel's message", events)
	}
}

// conversationsChannel returns the channel id of the workspace's only
// conversation on platform.
func (h *harness) conversationsChannel(ws, platform string) string {
	h.t.Helper()
	c := h.conversations(ws, "?platform="+platform).Conversations
	if len(c) != 1 {
		h.t.Fatalf("%s conversations: %+v", platform, c)
	}
	return c[0].ChannelID
}

// TestMetaSend answers Messenger and Instagram customers through the api
// endpoint and checks what Meta received.
func TestMetaSend(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph), withWindow(time.Hour))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	h.metaChannel(ws, "instagram", testIGID, "external")
	now := time.Now()
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_fresh", "hello", now.Add(-time.Minute))))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, testIGSID, "m_ig", "hello", now.Add(-time.Minute))))
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, "7000000000000002", "m_old", "hello", now.Add(-2*time.Hour))))
	conv := func(platform, sender string) string {
		for _, c := range h.conversations(ws, "").Conversations {
			if c.Platform == platform && c.Contact.SenderID == sender {
				return c.ID
			}
		}
		t.Fatalf("no %s conversation with %s", platform, sender)
		return ""
	}
	messenger, instagram, stale := conv("messenger", testPSID), conv("instagram", testIGSID), conv("messenger", "7000000000000002")
	sentBefore := len(graph.sends())

	var out messagingapi.MessageSent
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": messenger, "text": "Which size?", "quick_replies": []string{"M", "L"}}, &out); err != nil {
		t.Fatal(err)
	}
	sends := graph.sends()
	if len(sends) != sentBefore+1 {
		t.Fatalf("sends = %+v", sends)
	}
	last := sends[len(sends)-1]
	body, _ := json.Marshal(last.Body)
	if string(body) != `{"message":{"quick_replies":[{"content_type":"text","payload":"M","title":"M"},{"content_type":"text","payload":"L","title":"L"}],"text":"Which size?"},"messaging_type":"RESPONSE","recipient":{"id":"6843201987654321"}}` ||
		last.Query.Get("access_token") != metaPageToken {
		t.Fatalf("send body %s token %q", body, last.Query.Get("access_token"))
	}
	if out.Message.ExternalID == "" || !strings.HasPrefix(out.Message.ExternalID, "m_fake_") || out.Message.Sender != "user" {
		t.Fatalf("sent message = %+v", out.Message)
	}

	// The window: the stale customer wrote 2 h ago with MESSAGING_WINDOW=1h.
	before := len(graph.sends())
	err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": stale, "text": "still there?"}, nil)
	wantErr(t, err, http.StatusConflict, "outside_messaging_window", "")
	// Meta's own window refusal is the same answer.
	graph.FailNext("/", metafake.GraphError{Status: http.StatusBadRequest, Message: "(#10) This message is sent outside of allowed window.", Type: "OAuthException", Code: 10, Subcode: 2018278, FBTrace: "AbC"})
	err = h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": messenger, "text": "hi"}, nil)
	wantErr(t, err, http.StatusConflict, "outside_messaging_window", "")
	// Other refusals are platform errors with Meta's message.
	graph.FailNext("/", metafake.GraphError{Status: http.StatusBadRequest, Message: "(#551) This person isn't available right now.", Type: "OAuthException", Code: 551, Subcode: 1545041, FBTrace: "AbD"})
	err = h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": messenger, "text": "hi"}, nil)
	wantErr(t, err, http.StatusBadGateway, "platform_error", "This person isn't available right now")
	// Instagram refuses buttons and GIFs before anything is sent.
	err = h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": instagram, "text": "Buy?", "buttons": []map[string]string{{"type": "postback", "title": "Buy", "payload": "BUY"}}}, nil)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "use quick_replies")
	err = h.api(ws, http.MethodPost, "/v1/image", map[string]any{"conversation_id": instagram, "image_url": "https://cdn.example/dance.gif"}, nil)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "image_url")
	// An image whose text Instagram would refuse: refused before the image
	// goes out, so the customer never gets half of it.
	err = h.api(ws, http.MethodPost, "/v1/image", map[string]any{"conversation_id": instagram, "image_url": "https://cdn.example/ok.png", "text": strings.Repeat("é", 600)}, nil)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "text")
	if n := len(graph.sends()); n != before+2 {
		t.Fatalf("meta got %d sends, want only the two Meta refused", n-before)
	}
	if n := h.count("messages", "sender = 'user'"); n != 1 {
		t.Fatalf("stored %d sent messages, want 1", n)
	}

	// Typing: typing_on, {"ok": true}, nothing stored.
	var ok map[string]any
	if err := h.api(ws, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": instagram}, &ok); err != nil || ok["ok"] != true {
		t.Fatalf("typing: %v %v", ok, err)
	}
	typing := graph.sends()[len(graph.sends())-1]
	if b, _ := json.Marshal(typing.Body); string(b) != `{"recipient":{"id":"1104567890123456"},"sender_action":"typing_on"}` {
		t.Fatalf("typing body %s", b)
	}
}

// TestMetaIngressWithoutMIDOrTimestamp: a message or postback Meta sends
// without mid and without timestamp is keyed by its content, so distinct
// ones of one customer are each stored, and a redelivery of one (even
// with its keys reordered and spaced) is stored once.
func TestMetaIngressWithoutMIDOrTimestamp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withMeta(newMetaGraph(t)))
	h.metaChannel(uuid.NewString(), "messenger", testPageID, "external")
	bare := func(sender string, fields map[string]any) metaEvent {
		e := metaEvent{"sender": map[string]any{"id": sender}, "recipient": map[string]any{"id": testPageID}}
		for k, v := range fields {
			e[k] = v
		}
		return e
	}
	text := func(sender, s string) metaEvent {
		return bare(sender, map[string]any{"message": map[string]any{"text": s}})
	}
	postback := func(sender, title string) metaEvent {
		return bare(sender, map[string]any{"postback": map[string]any{"title": title, "payload": title}})
	}
	posts := [][]byte{
		notification("page", testPageID, text(testPSID, "first")),
		notification("page", testPageID, text(testPSID, "second")),
		notification("page", testPageID, text(testPSID, "third"), text(testPSID, "fourth")),
		notification("page", testPageID, text("7000000000000001", "first")),
		notification("page", testPageID, postback(testPSID, "Yes"), postback(testPSID, "No")),
	}
	for round := 0; round < 2; round++ { // the second round redelivers
		for _, body := range posts {
			h.sendMeta(body)
		}
	}
	// A redelivery is the same event whatever its JSON's key order and spacing.
	h.sendMeta([]byte(`{"entry": [{"messaging": [{"message": {"text": "second"}, "recipient": {"id": "` + testPageID +
		`"}, "sender": {"id": "` + testPSID + `"}}], "id": "` + testPageID + `"}], "object": "page"}`))

	for text, want := range map[string]int64{"first": 2, "second": 1, "third": 1, "fourth": 1, "Yes": 1, "No": 1} {
		if n := h.count("messages", "content = ?", text); n != want {
			t.Errorf("%q stored %d times, want %d", text, n, want)
		}
	}
	if w, m := int64(len(h.written())), h.count("messages", "sender = 'contact'"); w != m || m != 7 {
		t.Fatalf("%d events written for %d stored messages, want 7 of each", w, m)
	}
}

// TestMetaIngressReadsProfilesAtOnce: a post's new customers' profiles are
// read at once and within one bound, before their messages are stored: a
// customer whose profile comes is named in their first event, and the
// reads that hang cost the post that one bound, not a wait each; their
// customers are stored without a name.
func TestMetaIngressReadsProfilesAtOnce(t *testing.T) {
	t.Parallel()
	const quick = "7000000000000000"
	fake := metafake.New()
	fake.SetProfile(quick, metafake.Profile{ID: quick, FirstName: "Quick", LastName: "Reply"})
	hanging := map[string]bool{}
	for i := 1; i <= 4; i++ {
		hanging[fmt.Sprintf("/700000000000000%d", i)] = true
	}
	var givenUp, quickReads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && hanging[r.URL.Path] {
			<-r.Context().Done()
			givenUp.Add(1)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/"+quick {
			quickReads.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, withMeta(&metaGraph{Server: fake, URL: srv.URL}))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	now := time.Now()
	var events []metaEvent
	for i := 1; i <= 4; i++ {
		events = append(events, textEvent(testPageID, fmt.Sprintf("700000000000000%d", i), fmt.Sprintf("m_hang_%d", i), "held?", now))
	}
	events = append(events,
		textEvent(testPageID, quick, "m_quick_1", "quick", now),
		textEvent(testPageID, quick, "m_quick_2", "again", now))

	start := time.Now()
	h.sendMeta(notification("page", testPageID, events...))
	// Read one after another, the four hanging reads took 4 × 5 s; at once,
	// the post waits for the documented 2 s in all.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("answered after %v: the post waited for each profile read in turn", d)
	}
	if n := h.count("messages", ""); n != 6 {
		t.Fatalf("stored %d messages when answered, want 6", n)
	}
	if n := quickReads.Load(); n != 1 {
		t.Fatalf("the customer with two messages in the post was read %d times, want once", n)
	}
	wait.Until(t, 5*time.Second, "the hanging reads given up", func() bool { return givenUp.Load() == 4 })
	if n := h.count("contacts", "name = ''"); n != 4 {
		t.Fatalf("%d contacts without a name, want the 4 whose reads hung", n)
	}
	named := 0
	for _, w := range h.written() {
		var ev eventsv1.Event
		if err := proto.Unmarshal(w.payload, &ev); err != nil {
			t.Fatal(err)
		}
		c := ev.GetMessageReceived().GetContact()
		switch {
		case c.GetSenderId() == quick && c.GetName() == "Quick Reply":
			named++
		case c.GetSenderId() == quick:
			t.Fatalf("the quick customer's event names %q", c.GetName())
		case c.GetName() != "":
			t.Fatalf("a customer whose read hung is named %q", c.GetName())
		}
	}
	if named != 2 {
		t.Fatalf("%d events of the quick customer name them, want both", named)
	}
}

// TestMetaIngressReadsAtMost16ProfilesAtOnce: a post with more new
// customers than readers starts 16 reads; when they all hang, the others
// never start, and every message is stored once the 2 s bound passes.
func TestMetaIngressReadsAtMost16ProfilesAtOnce(t *testing.T) {
	t.Parallel()
	var started, inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		started.Add(1)
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-r.Context().Done()
		inFlight.Add(-1)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, withMeta(&metaGraph{Server: metafake.New(), URL: srv.URL}))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	now := time.Now()
	var events []metaEvent
	for i := range 20 {
		events = append(events, textEvent(testPageID, fmt.Sprintf("71000000000000%02d", i), fmt.Sprintf("m_many_%d", i), "hello", now))
	}
	h.sendMeta(notification("page", testPageID, events...))
	if n := h.count("messages", ""); n != 20 {
		t.Fatalf("stored %d messages when answered, want 20", n)
	}
	if s, m := started.Load(), most.Load(); s != 16 || m != 16 {
		t.Fatalf("%d reads started, at most %d at once; want 16 and 16", s, m)
	}
}
