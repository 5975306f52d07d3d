package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/meta"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
)

// The comment tests drive /ingress/meta with real-format feed and
// Instagram comments payloads, signed as Meta signs them, and the comment
// routes over the api endpoint, against a fake Graph API.

const cmtAppSecret = "comments-app-secret"

// newCommentHarness is a harness whose Graph API is g and whose Meta app
// secret is cmtAppSecret.
func newCommentHarness(t *testing.T, g *metaGraph, opts ...harnessOption) *harness {
	return newHarness(t, append([]harnessOption{func(c *svcconfig.Config) {
		c.MetaGraphAPIBase = g.URL
		c.MetaAppSecret = cmtAppSecret
	}}, opts...)...)
}

// cmtChannel creates a Messenger or Instagram channel for page id pageID.
func (h *harness) cmtChannel(ws, kind, pageID, mode string) messagingapi.AdminChannel {
	h.t.Helper()
	var out messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{
		"workspace_id": ws, "kind": kind, "external_id": pageID, "token": "page-token-" + pageID,
	}, &out); err != nil {
		h.t.Fatalf("create channel: %v", err)
	}
	if mode != "auto" {
		h.setMode(out.Channel.ID, mode)
		out.Channel.AIMode = mode
	}
	return out.Channel
}

// cmtPost signs body with the app secret and posts it to /ingress/meta.
func (h *harness) cmtPost(body string) int {
	h.t.Helper()
	return h.post("/ingress/meta", body, map[string]string{meta.SignatureHeader: meta.Sign(cmtAppSecret, []byte(body))}).Code
}

// feedComment is a Facebook page feed webhook carrying one change, in
// Meta's format.
func feedComment(pageID, commentID, fromID, fromName, message string, created time.Time, verb string) string {
	postID := pageID + "_5550001"
	b, _ := json.Marshal(map[string]any{
		"object": "page",
		"entry": []any{map[string]any{
			"id":   pageID,
			"time": created.Unix() + 2,
			"changes": []any{map[string]any{
				"field": "feed",
				"value": map[string]any{
					"from": map[string]any{"id": fromID, "name": fromName},
					"post": map[string]any{
						"status_type": "added_photos", "is_published": true,
						"updated_time":  created.Format("2006-01-02T15:04:05-0700"),
						"permalink_url": "https://www.facebook.com/" + postID, "promotion_status": "inactive", "id": postID,
					},
					"message":      message,
					"post_id":      postID,
					"comment_id":   commentID,
					"created_time": created.Unix(),
					"item":         "comment",
					"parent_id":    postID,
					"verb":         verb,
				},
			}},
		}},
	})
	return string(b)
}

// instagramComment is an Instagram comments webhook in Meta's format; the
// entry's time is the comment's.
func instagramComment(accountID, commentID, fromID, username, text, mediaID string, at time.Time) string {
	b, _ := json.Marshal(map[string]any{
		"object": "instagram",
		"entry": []any{map[string]any{
			"id":   accountID,
			"time": at.Unix(),
			"changes": []any{map[string]any{
				"field": "comments",
				"value": map[string]any{
					"from":  map[string]any{"id": fromID, "username": username},
					"media": map[string]any{"id": mediaID, "media_product_type": "FEED"},
					"id":    commentID,
					"text":  text,
				},
			}},
		}},
	})
	return string(b)
}

// cmtEvents decodes the comment.received events written, oldest first.
func (h *harness) cmtEvents() []*eventsv1.Event {
	h.t.Helper()
	var out []*eventsv1.Event
	for _, w := range h.written() {
		var ev eventsv1.Event
		if err := proto.Unmarshal(w.payload, &ev); err != nil {
			h.t.Fatal(err)
		}
		if ev.GetType() == "comment.received" {
			out = append(out, &ev)
		}
	}
	return out
}

func TestFeedCommentStoredOnceAndForwarded(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "1" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	ch := h.cmtChannel(ws, "messenger", page, "external")
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	body := feedComment(page, page+"_9001", "24609691832002", "Ada Lovelace", "Is this in stock?", created, "add")

	for range 2 { // Meta redelivers until it gets a 200
		if code := h.cmtPost(body); code != http.StatusOK {
			t.Fatalf("ingress = %d", code)
		}
	}
	if n := h.count("comments", "channel_id = ?", ch.ID); n != 1 {
		t.Fatalf("comments stored = %d, want 1", n)
	}
	evs := h.cmtEvents()
	if len(evs) != 1 {
		t.Fatalf("comment.received events = %d, want 1", len(evs))
	}
	ev := evs[0]
	if ev.GetWorkspaceId() != ws || ev.GetId() == "" || ev.GetCreatedAt() == nil {
		t.Fatalf("event = %v", ev)
	}
	want := &eventsv1.CommentReceived{
		WorkspaceId: ws, Platform: "messenger",
		Channel: &eventsv1.Channel{Kind: "messenger", ExternalId: page},
		Comment: &eventsv1.Comment{
			Id: page + "_9001", PostId: page + "_5550001", Text: "Is this in stock?",
			From:       &eventsv1.CommentAuthor{Id: "24609691832002", Name: "Ada Lovelace"},
			ReceivedAt: ev.GetCommentReceived().GetComment().GetReceivedAt(),
		},
	}
	if !proto.Equal(ev.GetCommentReceived(), want) {
		t.Fatalf("data =\n%v\nwant\n%v", ev.GetCommentReceived(), want)
	}
	if got := ev.GetCommentReceived().GetComment().GetReceivedAt().AsTime(); !got.Equal(created) {
		t.Fatalf("received_at = %v, want the comment's created_time %v", got, created)
	}

	// The developer reads it back by the id the event carries.
	var got struct{ Comment map[string]any }
	if err := h.api(ws, http.MethodGet, "/v1/comments/"+page+"_9001", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Comment["status"] != "received" || got.Comment["received_at"] != "2026-11-22T10:00:00Z" ||
		got.Comment["text"] != "Is this in stock?" || got.Comment["channel_id"] != ch.ID || got.Comment["platform"] != "messenger" {
		t.Fatalf("GET comment = %v", got.Comment)
	}
}

func TestFeedChangesThatAreNotNewCommentsAreIgnored(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "2" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	ch := h.cmtChannel(ws, "messenger", page, "external")
	at := time.Now().Add(-time.Minute)

	reaction := fmt.Sprintf(`{"object":"page","entry":[{"id":%q,"time":%d,"changes":[{"field":"feed","value":
		{"from":{"id":"111","name":"Bo"},"post_id":"%s_1","created_time":%d,"item":"reaction","parent_id":"%s_1","reaction_type":"like","verb":"add"}}]}]}`,
		page, at.Unix(), page, at.Unix(), page)
	post := fmt.Sprintf(`{"object":"page","entry":[{"id":%q,"time":%d,"changes":[{"field":"feed","value":
		{"from":{"id":%q,"name":"The Page"},"message":"New arrivals","post_id":"%s_2","created_time":%d,"item":"status","published":1,"verb":"add"}}]}]}`,
		page, at.Unix(), page, page, at.Unix())
	malformed := fmt.Sprintf(`{"object":"page","entry":[{"id":%q,"time":%d,"changes":[{"field":"feed","value":{"item":"comment","verb":"add","message":"no id"}}]}]}`, page, at.Unix())
	other := fmt.Sprintf(`{"object":"page","entry":[{"id":%q,"time":%d,"changes":[{"field":"ratings","value":{"review_text":"great"}}]}]}`, page, at.Unix())
	for name, body := range map[string]string{
		"edited":          feedComment(page, page+"_1", "111", "Bo", "edited text", at, "edited"),
		"removed":         feedComment(page, page+"_2", "111", "Bo", "", at, "remove"),
		"hidden":          feedComment(page, page+"_3", "111", "Bo", "x", at, "hide"),
		"page's own":      feedComment(page, page+"_4", page, "The Page", "Thanks!", at, "add"),
		"reaction":        reaction,
		"post":            post,
		"malformed":       malformed,
		"other field":     other,
		"unknown channel": feedComment("999000111", "999000111_5", "111", "Bo", "hi", at, "add"),
	} {
		if code := h.cmtPost(body); code != http.StatusOK {
			t.Errorf("%s: ingress = %d, want 200", name, code)
		}
	}
	if n := h.count("comments", ""); n != 0 {
		t.Fatalf("comments stored = %d, want 0", n)
	}
	if n := len(h.written()); n != 0 {
		t.Fatalf("events written = %d, want 0", n)
	}
	// The page's own comment left no dedupe receipt behind either: it was
	// not taken as a delivery at all.
	if n := h.count("ingress_receipts", "channel_id = ?", ch.ID); n != 0 {
		t.Fatalf("receipts = %d, want 0", n)
	}
	// A tampered body is refused before anything is read.
	body := feedComment(page, page+"_6", "111", "Bo", "hi", at, "add")
	rec := h.post("/ingress/meta", strings.Replace(body, "hi", "HI", 1), map[string]string{meta.SignatureHeader: meta.Sign(cmtAppSecret, []byte(body))})
	if rec.Code != http.StatusUnauthorized || h.count("comments", "") != 0 {
		t.Fatalf("tampered: %d, comments %d", rec.Code, h.count("comments", ""))
	}
}

func TestCommentsOfNonExternalChannelsAreStoredNotForwarded(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "3" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	ch := h.cmtChannel(ws, "messenger", page, "auto")
	if code := h.cmtPost(feedComment(page, page+"_1", "111", "Bo", "hello", time.Now(), "add")); code != http.StatusOK {
		t.Fatalf("ingress = %d", code)
	}
	if h.count("comments", "channel_id = ?", ch.ID) != 1 || len(h.cmtEvents()) != 0 {
		t.Fatalf("auto channel: comments %d, events %d", h.count("comments", ""), len(h.cmtEvents()))
	}
	// The mode applies from the next comment.
	h.setMode(ch.ID, "external")
	if code := h.cmtPost(feedComment(page, page+"_2", "111", "Bo", "again", time.Now(), "add")); code != http.StatusOK {
		t.Fatalf("ingress = %d", code)
	}
	if evs := h.cmtEvents(); len(evs) != 1 || evs[0].GetCommentReceived().GetComment().GetId() != page+"_2" {
		t.Fatalf("events after switching to external = %v", evs)
	}
}

func TestInstagramCommentStoredAndForwarded(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	account := "1784" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "instagram", account, "external")
	at := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	body := instagramComment(account, "17865799348089039", "232323232", "ada.codes", "Price?", "17887498072083520", at)
	for range 2 {
		if code := h.cmtPost(body); code != http.StatusOK {
			t.Fatalf("ingress = %d", code)
		}
	}
	// The account's own comment is not forwarded.
	if code := h.cmtPost(instagramComment(account, "17865799348089040", account, "shop", "DM'd you", "17887498072083520", at)); code != http.StatusOK {
		t.Fatalf("own comment = %d", code)
	}
	evs := h.cmtEvents()
	if len(evs) != 1 || h.count("comments", "") != 1 {
		t.Fatalf("events = %d, comments = %d; want 1 and 1", len(evs), h.count("comments", ""))
	}
	want := &eventsv1.CommentReceived{
		WorkspaceId: ws, Platform: "instagram",
		Channel: &eventsv1.Channel{Kind: "instagram", ExternalId: account},
		Comment: &eventsv1.Comment{
			Id: "17865799348089039", PostId: "17887498072083520", Text: "Price?",
			From:       &eventsv1.CommentAuthor{Id: "232323232", Name: "ada.codes"},
			ReceivedAt: evs[0].GetCommentReceived().GetComment().GetReceivedAt(),
		},
	}
	if !proto.Equal(evs[0].GetCommentReceived(), want) {
		t.Fatalf("data =\n%v\nwant\n%v", evs[0].GetCommentReceived(), want)
	}
	if got := want.GetComment().GetReceivedAt().AsTime(); !got.Equal(at) {
		t.Fatalf("received_at = %v, want entry.time %v", got, at)
	}
}

// TestCommentWithoutATimeIsKeptAtItsArrival: a comment Meta gives no
// positive time (no entry time on Instagram, no created_time nor entry time
// on a page's feed) is stored and forwarded, stamped with its arrival, as
// a message is (docs/channels.md "Messenger and Instagram"), not dropped.
func TestCommentWithoutATimeIsKeptAtItsArrival(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	account := "1785" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	page := "4" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "instagram", account, "external")
	h.cmtChannel(ws, "messenger", page, "external")
	igBody := fmt.Sprintf(`{"object":"instagram","entry":[{"id":%q,"changes":[{"field":"comments","value":
		{"from":{"id":"232323233","username":"bo.codes"},"media":{"id":"17887498072083521"},"id":"%s_1","text":"In blue?"}}]}]}`, account, account)
	feedBody := fmt.Sprintf(`{"object":"page","entry":[{"id":%q,"time":0,"changes":[{"field":"feed","value":
		{"from":{"id":"111","name":"Bo"},"post_id":"%s_1","comment_id":"%s_7","message":"In red?","item":"comment","verb":"add","created_time":-1}}]}]}`, page, page, page)

	before := time.Now().UTC().Truncate(time.Microsecond)
	for _, body := range []string{igBody, feedBody} {
		if code := h.cmtPost(body); code != http.StatusOK {
			t.Fatalf("ingress = %d", code)
		}
	}
	after := time.Now().UTC()
	evs := h.cmtEvents()
	if len(evs) != 2 || h.count("comments", "") != 2 {
		t.Fatalf("events = %d, comments = %d; want 2 and 2", len(evs), h.count("comments", ""))
	}
	for i, id := range []string{account + "_1", page + "_7"} {
		at := evs[i].GetCommentReceived().GetComment().GetReceivedAt().AsTime()
		if evs[i].GetCommentReceived().GetComment().GetId() != id || at.Before(before) || at.After(after) {
			t.Fatalf("event %d: comment %s received_at %v, want %s between %v and %v", i,
				evs[i].GetCommentReceived().GetComment().GetId(), at, id, before, after)
		}
		var got struct{ Comment messagingapi.Comment }
		if err := h.api(ws, http.MethodGet, "/v1/comments/"+id, nil, &got); err != nil {
			t.Fatal(err)
		}
		if stored, err := time.Parse(time.RFC3339Nano, got.Comment.ReceivedAt); err != nil || !stored.Equal(at) {
			t.Fatalf("GET %s: received_at %q, want the event's %v (%v)", id, got.Comment.ReceivedAt, at, err)
		}
	}
}

// cmtAPI posts a raw body to a comment route as the gateway does and
// returns the status and the decoded body. A 429 must not carry
// Retry-After (docs/comments.md "Its limits"): the private-reply caps are not a
// per-minute limit.
func (h *harness) cmtAPI(ws, path, body string) (int, map[string]any) {
	h.t.Helper()
	req := &rpcv1.Request{WorkspaceId: ws, Method: http.MethodPost, Path: path, Body: []byte(body),
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}}
	resp, err := h.client.Do(context.Background(), rpc.ServiceMessaging, rpc.EndpointAPI, req)
	if err != nil {
		h.t.Errorf("rpc %s: %v", path, err)
		return 0, nil
	}
	for _, hd := range resp.GetHeaders() {
		if strings.EqualFold(hd.GetName(), "Retry-After") {
			h.t.Errorf("%s answered %d with Retry-After: %s", path, resp.GetStatus(), hd.GetValue())
		}
	}
	out := map[string]any{}
	if err := json.Unmarshal(resp.GetBody(), &out); err != nil {
		h.t.Errorf("%s: body %q: %v", path, resp.GetBody(), err)
	}
	return int(resp.GetStatus()), out
}

func TestPublicReplyThenPrivateReply(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "4" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	ch := h.cmtChannel(ws, "messenger", page, "external")
	cid := page + "_7001"
	g.SetCommenter(cid, "psid-ada")
	h.cmtPost(feedComment(page, cid, "24609691832002", "Ada Lovelace", "Do you ship?", time.Now().Add(-time.Hour), "add"))

	status, body := h.cmtAPI(ws, "/v1/comments/"+cid+"/reply", `{"text":"Yes! Sent you a DM."}`)
	if status != http.StatusOK || body["ok"] != true || body["external_id"] == "" {
		t.Fatalf("reply = %d %v", status, body)
	}
	if c := body["comment"].(map[string]any); c["status"] != "replied" || c["id"] != cid {
		t.Fatalf("comment after public reply = %v", c)
	}
	calls := g.Calls()
	if len(calls) != 1 || calls[0].Method != http.MethodPost || calls[0].Path != "/"+cid+"/comments" ||
		calls[0].Body["message"] != "Yes! Sent you a DM." || calls[0].AccessToken != "page-token-"+page {
		t.Fatalf("graph calls = %+v", calls)
	}
	if calls[0].Body["message"] == nil || body["external_id"] != "reply_1" {
		t.Fatalf("reply id = %v", body["external_id"])
	}

	status, body = h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"Hi Ada, we ship worldwide."}`)
	if status != http.StatusOK || body["ok"] != true || body["recipient_id"] != "psid-ada" || body["external_id"] != "m_fake_2" {
		t.Fatalf("private reply = %d %v", status, body)
	}
	if c := body["comment"].(map[string]any); c["status"] != "both_sent" {
		t.Fatalf("status after public then private = %v", c["status"])
	}
	calls = g.Calls()
	dm := calls[1]
	if dm.Path != "/me/messages" || dm.AccessToken != "page-token-"+page {
		t.Fatalf("dm call = %+v", dm)
	}
	if rc := dm.Body["recipient"].(map[string]any); rc["comment_id"] != cid || len(rc) != 1 {
		t.Fatalf("recipient = %v", rc)
	}
	if m := dm.Body["message"].(map[string]any); m["text"] != "Hi Ada, we ship worldwide." {
		t.Fatalf("message = %v", m)
	}

	// The DM is in the commenter's inbox conversation, sent by a user.
	convID, _ := body["conversation_id"].(string)
	convs := h.conversations(ws, "")
	if len(convs.Conversations) != 1 || convs.Conversations[0].ID != convID ||
		convs.Conversations[0].Contact.SenderID != "psid-ada" || convs.Conversations[0].Contact.Name != "Ada Lovelace" ||
		convs.Conversations[0].ChannelID != ch.ID || convs.Conversations[0].Platform != "messenger" {
		t.Fatalf("conversations = %+v", convs)
	}
	msgs := h.messages(ws, convID, "").Messages
	if len(msgs) != 1 || msgs[0].Sender != "user" || msgs[0].Type != "text" || msgs[0].Content != "Hi Ada, we ship worldwide." ||
		msgs[0].ExternalID != "m_fake_2" {
		t.Fatalf("messages = %+v", msgs)
	}
	if pr, _ := msgs[0].Metadata["private_reply"].(map[string]any); pr["comment_id"] != cid {
		t.Fatalf("metadata = %v", msgs[0].Metadata)
	}
	// The DM does not open the 24-hour window: only the customer's own
	// messages do.
	var lastCustomer *time.Time
	h.db.Raw(`SELECT last_customer_message_at FROM messaging.conversations WHERE id = ?`, convID).Row().Scan(&lastCustomer)
	if lastCustomer != nil {
		t.Fatalf("last_customer_message_at = %v after a private reply", lastCustomer)
	}

	// A second private reply on the comment is refused; nothing is sent.
	status, body = h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"again"}`)
	if status != http.StatusConflict || body["code"] != "private_reply_used" {
		t.Fatalf("second private reply = %d %v", status, body)
	}
	if n := len(g.Calls()); n != 2 {
		t.Fatalf("graph calls = %d after the refusal, want 2", n)
	}
}

func TestPrivateReplyStatusAndInstagramReplies(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	account := "1785" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "instagram", account, "external")
	h.cmtPost(instagramComment(account, "178001", "ig-user-1", "ada.codes", "Price?", "media-1", time.Now().Add(-time.Minute)))

	// Private first: dm_sent; a public reply afterwards makes it both_sent.
	status, body := h.cmtAPI(ws, "/v1/comments/178001/private-reply", `{"text":"Sent you the price list"}`)
	if status != http.StatusOK || body["comment"].(map[string]any)["status"] != "dm_sent" {
		t.Fatalf("private reply = %d %v", status, body)
	}
	status, body = h.cmtAPI(ws, "/v1/comments/178001/reply", `{"text":"Check your DMs!"}`)
	if status != http.StatusOK || body["comment"].(map[string]any)["status"] != "both_sent" {
		t.Fatalf("public reply = %d %v", status, body)
	}
	calls := g.Calls()
	if len(calls) != 2 || calls[1].Path != "/178001/replies" || calls[1].Body["message"] != "Check your DMs!" {
		t.Fatalf("instagram public reply went to %+v", calls)
	}
	var got struct{ Comment map[string]any }
	if err := h.api(ws, http.MethodGet, "/v1/comments/178001", nil, &got); err != nil || got.Comment["status"] != "both_sent" {
		t.Fatalf("GET comment = %v %v", got, err)
	}
}

func TestCommentReplyRequestErrors(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws, other := uuid.NewString(), uuid.NewString()
	page := "5" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	cid := page + "_1"
	h.cmtPost(feedComment(page, cid, "111", "Bo", "hi", time.Now(), "add"))
	account := "1786" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "instagram", account, "external")
	h.cmtPost(instagramComment(account, "179001", "ig-2", "bo", "hi", "media-2", time.Now()))

	long := func(n int) string {
		b, _ := json.Marshal(map[string]string{"text": strings.Repeat("é", n)})
		return string(b)
	}
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"unknown comment, reply", "/v1/comments/nope_1/reply", `{"text":"hi"}`, 404, "comment_not_found"},
		{"unknown comment, private", "/v1/comments/nope_1/private-reply", `{"text":"hi"}`, 404, "comment_not_found"},
		{"missing text", "/v1/comments/" + cid + "/private-reply", `{}`, 400, "invalid_request"},
		{"empty text", "/v1/comments/" + cid + "/private-reply", `{"text":"  "}`, 400, "invalid_request"},
		{"empty text, reply", "/v1/comments/" + cid + "/reply", `{"text":""}`, 400, "invalid_request"},
		{"private reply over 2000", "/v1/comments/" + cid + "/private-reply", long(2001), 400, "invalid_request"},
		{"facebook reply over 8000", "/v1/comments/" + cid + "/reply", long(8001), 400, "invalid_request"},
		{"instagram reply over 2200", "/v1/comments/179001/reply", long(2201), 400, "invalid_request"},
		{"text not a string", "/v1/comments/" + cid + "/reply", `{"text":5}`, 400, "invalid_request"},
		{"not json", "/v1/comments/" + cid + "/reply", `text=hi`, 400, "invalid_request"},
		{"tag on private reply", "/v1/comments/" + cid + "/private-reply", `{"text":"hi","tag":"HUMAN_AGENT"}`, 400, "tag_unsupported"},
		{"tag on reply", "/v1/comments/" + cid + "/reply", `{"text":"hi","tag":"CONFIRMED_EVENT_UPDATE"}`, 400, "tag_unsupported"},
	}
	for _, tt := range tests {
		status, body := h.cmtAPI(ws, tt.path, tt.body)
		if status != tt.status || body["code"] != tt.code {
			t.Errorf("%s: %d %v, want %d %s", tt.name, status, body, tt.status, tt.code)
		}
	}
	// Another workspace's comment does not exist for it.
	for _, p := range []string{"/reply", "/private-reply"} {
		if status, body := h.cmtAPI(other, "/v1/comments/"+cid+p, `{"text":"hi"}`); status != 404 || body["code"] != "comment_not_found" {
			t.Errorf("other workspace %s: %d %v", p, status, body)
		}
	}
	if err := h.api(other, http.MethodGet, "/v1/comments/"+cid, nil, nil); err == nil {
		t.Error("other workspace reads the comment")
	}
	// An id PostgreSQL text cannot hold (a NUL, bytes that are not UTF-8)
	// is no comment's either: 404, as any unknown id, never a 500.
	for _, id := range []string{"%00", "a%00b", "%ff"} {
		for _, p := range []string{"", "/reply", "/private-reply"} {
			method, body := http.MethodPost, `{"text":"hi"}`
			if p == "" {
				method, body = http.MethodGet, ""
			}
			status, raw := h.apiRaw(ws, method, "/v1/comments/"+id+p, body)
			if status != 404 || !strings.Contains(string(raw), `"comment_not_found"`) {
				t.Errorf("%s /v1/comments/%s%s: %d %s, want 404 comment_not_found", method, id, p, status, raw)
			}
		}
	}
	// Within limits passes: 2000 and 2200 characters.
	if status, body := h.cmtAPI(ws, "/v1/comments/179001/reply", long(2200)); status != 200 {
		t.Errorf("2200-character instagram reply: %d %v", status, body)
	}
	if n := len(g.Calls()); n != 1 {
		t.Fatalf("graph calls = %d, want only the one valid reply", n)
	}
}

func TestPrivateReplyWindows(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g, func(c *svcconfig.Config) { c.PrivateReplyWindow = time.Hour })
	ws := uuid.NewString()
	page := "6" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	now := time.Now()
	h.cmtPost(feedComment(page, page+"_old", "111", "Bo", "old", now.Add(-2*time.Hour), "add"))
	h.cmtPost(feedComment(page, page+"_a", "222", "Cy", "first", now.Add(-10*time.Minute), "add"))
	h.cmtPost(feedComment(page, page+"_b", "222", "Cy", "second", now.Add(-5*time.Minute), "add"))
	g.SetCommenter(page+"_a", "psid-cy")
	g.SetCommenter(page+"_b", "psid-cy")

	status, raw := h.apiRaw(ws, http.MethodPost, "/v1/comments/"+page+"_old/private-reply", `{"text":"hi"}`)
	if code, _ := errorBody(t, raw); status != http.StatusConflict || code != "private_reply_expired" {
		t.Fatalf("2 h old comment with a 1 h window = %d %s", status, raw)
	}
	if status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_a/private-reply", `{"text":"hi Cy"}`); status != 200 {
		t.Fatalf("first private reply = %d %v", status, body)
	}
	status, raw = h.apiRaw(ws, http.MethodPost, "/v1/comments/"+page+"_b/private-reply", `{"text":"hi again"}`)
	if code, _ := errorBody(t, raw); status != http.StatusTooManyRequests || code != "private_reply_commenter_window" {
		t.Fatalf("same commenter again = %d %s", status, raw)
	}
	if calls := g.Calls(); len(calls) != 1 {
		t.Fatalf("graph calls = %d, want 1", len(calls))
	}
	// The refused comment keeps its private reply for later.
	var got struct{ Comment map[string]any }
	_ = h.api(ws, http.MethodGet, "/v1/comments/"+page+"_b", nil, &got)
	if got.Comment["status"] != "received" {
		t.Fatalf("refused comment status = %v", got.Comment["status"])
	}
	var claimed *time.Time
	h.db.Raw(`SELECT private_reply_claimed_at FROM messaging.comments WHERE external_id = ?`, page+"_b").Row().Scan(&claimed)
	if claimed != nil {
		t.Fatal("a refused private reply left its claim on the comment")
	}
}

// TestCommenterWindowHoldsWithoutRedis: the database remembers a
// commenter's private reply even when the Redis claim is gone.
func TestCommenterWindowHoldsWithoutRedis(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "7" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	h.cmtPost(feedComment(page, page+"_a", "333", "Di", "one", time.Now(), "add"))
	h.cmtPost(feedComment(page, page+"_b", "333", "Di", "two", time.Now(), "add"))
	if status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_a/private-reply", `{"text":"hi"}`); status != 200 {
		t.Fatalf("first = %d %v", status, body)
	}
	rdb := h.env.Redis(t)
	key := h.env.RedisPrefix + "privatereply-commenter:" + page + ":333"
	if n, _ := rdb.Exists(context.Background(), key).Result(); n != 1 {
		t.Fatalf("commenter claim %s not in Redis", key)
	}
	if ttl, _ := rdb.TTL(context.Background(), key).Result(); ttl < 167*time.Hour || ttl > 168*time.Hour {
		t.Fatalf("commenter claim TTL = %s, want the 168h window", ttl)
	}
	rdb.Del(context.Background(), key)
	if status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_b/private-reply", `{"text":"hi"}`); status != 429 || body["code"] != "private_reply_commenter_window" {
		t.Fatalf("second with the Redis claim gone = %d %v", status, body)
	}
}

func TestPrivateReplyDailyCap(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g, func(c *svcconfig.Config) { c.PrivateReplyDailyCap = 2 })
	ws := uuid.NewString()
	page := "8" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	for i := range 4 {
		h.cmtPost(feedComment(page, fmt.Sprintf("%s_%d", page, i), fmt.Sprintf("u%d", i), "U", "hi", time.Now(), "add"))
	}
	for i := range 2 {
		if status, body := h.cmtAPI(ws, fmt.Sprintf("/v1/comments/%s_%d/private-reply", page, i), `{"text":"hi"}`); status != 200 {
			t.Fatalf("reply %d = %d %v", i, status, body)
		}
	}
	status, body := h.cmtAPI(ws, fmt.Sprintf("/v1/comments/%s_2/private-reply", page), `{"text":"hi"}`)
	if status != http.StatusTooManyRequests || body["code"] != "private_reply_daily_cap" {
		t.Fatalf("third reply under a cap of 2 = %d %v", status, body)
	}
	if n := len(g.Calls()); n != 2 {
		t.Fatalf("graph calls = %d, want 2", n)
	}
	// The refusal released the commenter's claim and the comment's: with
	// the cap raised (another producer's unit given back), it goes out.
	rdb := h.env.Redis(t)
	day := time.Now().In(mustZone(t, "Asia/Ulaanbaatar")).Format("2006-01-02")
	key := h.env.RedisPrefix + "privatereply:" + page + ":" + day
	if n, _ := rdb.Get(context.Background(), key).Int(); n != 2 {
		t.Fatalf("daily counter %s = %d, want 2", key, n)
	}
	rdb.Decr(context.Background(), key)
	if status, body := h.cmtAPI(ws, fmt.Sprintf("/v1/comments/%s_2/private-reply", page), `{"text":"hi"}`); status != 200 {
		t.Fatalf("after a unit freed = %d %v", status, body)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestPrivateReplyPlatformRefusalReleasesEverything(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g, func(c *svcconfig.Config) { c.PrivateReplyDailyCap = 1 })
	ws := uuid.NewString()
	page := "9" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	cid := page + "_1"
	h.cmtPost(feedComment(page, cid, "444", "Ed", "hi", time.Now(), "add"))

	g.FailNext("/", metafake.GraphError{Status: 400, Code: 100, Subcode: 2534022, Type: "OAuthException", Message: "(#100) This message can't be sent right now"})
	status, body := h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"hi"}`)
	if status != http.StatusBadGateway || body["code"] != "platform_error" || !strings.Contains(body["message"].(string), "can't be sent right now") {
		t.Fatalf("refused by meta = %d %v", status, body)
	}
	// Meta's window refusal for a private reply is the comment being too old.
	g.FailNext("/", metafake.GraphError{Status: 400, Code: 10, Subcode: 2018278, Type: "OAuthException", Message: "(#10) This message is sent outside of allowed window."})
	status, body = h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"hi"}`)
	if status != http.StatusConflict || body["code"] != "private_reply_expired" {
		t.Fatalf("meta's window refusal = %d %v", status, body)
	}
	// Comment claim, commenter claim and the day's only unit were all given
	// back: the next attempt goes out.
	status, body = h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"hi"}`)
	if status != 200 || body["comment"].(map[string]any)["status"] != "dm_sent" {
		t.Fatalf("after the refusals = %d %v", status, body)
	}
	// A public reply refused is a 502 too, and records nothing.
	g.FailNext("/", metafake.GraphError{Status: 400, Code: 100, Type: "GraphMethodException", Message: "Unsupported post request"})
	status, body = h.cmtAPI(ws, "/v1/comments/"+cid+"/reply", `{"text":"hi"}`)
	if status != http.StatusBadGateway || body["code"] != "platform_error" {
		t.Fatalf("public reply refused = %d %v", status, body)
	}
	var got struct{ Comment map[string]any }
	_ = h.api(ws, http.MethodGet, "/v1/comments/"+cid, nil, &got)
	if got.Comment["status"] != "dm_sent" {
		t.Fatalf("status after a refused public reply = %v", got.Comment["status"])
	}
}

// TestSimultaneousPrivateRepliesGoOutOnce: many private replies at once to
// one comment, and to two comments of one commenter; one goes out each.
func TestSimultaneousPrivateRepliesGoOutOnce(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "10" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	h.cmtPost(feedComment(page, page+"_same", "555", "Fa", "one", time.Now(), "add"))
	h.cmtPost(feedComment(page, page+"_x", "666", "Gu", "x", time.Now(), "add"))
	h.cmtPost(feedComment(page, page+"_y", "666", "Gu", "y", time.Now(), "add"))

	// Hold the Graph's answers so the requests overlap for certain.
	release := g.Hold()
	type result struct {
		status int
		code   any
	}
	// fire sends every request at once. The one that wins the claims waits
	// in the Graph API until every other one has been answered, so they
	// overlap for certain and only the claims can refuse them.
	fire := func(paths []string) []result {
		out := make([]result, len(paths))
		var wg sync.WaitGroup
		var answered atomic.Int32
		for i, p := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := h.cmtAPI(ws, p, `{"text":"hi"}`)
				out[i] = result{status, body["code"]}
				answered.Add(1)
			}()
		}
		wait.Until(t, 10*time.Second, "the refusals", func() bool { return int(answered.Load()) >= len(paths)-1 })
		release()
		wg.Wait()
		return out
	}
	same := make([]string, 6)
	for i := range same {
		same[i] = "/v1/comments/" + page + "_same/private-reply"
	}
	ok, used := 0, 0
	for _, r := range fire(same) {
		switch {
		case r.status == 200:
			ok++
		case r.status == 409 && r.code == "private_reply_used":
			used++
		default:
			t.Errorf("unexpected %d %v", r.status, r.code)
		}
	}
	if ok != 1 || used != 5 || len(g.Calls()) != 1 {
		t.Fatalf("same comment: %d sent, %d refused, graph calls %d", ok, used, len(g.Calls()))
	}

	release = g.Hold()
	res := fire([]string{"/v1/comments/" + page + "_x/private-reply", "/v1/comments/" + page + "_y/private-reply"})
	ok, limited := 0, 0
	for _, r := range res {
		switch {
		case r.status == 200:
			ok++
		case r.status == 429 && r.code == "private_reply_commenter_window":
			limited++
		}
	}
	if ok != 1 || limited != 1 || len(g.Calls()) != 2 {
		t.Fatalf("one commenter, two comments: %v, graph calls %d", res, len(g.Calls()))
	}
}

// TestPrivateReplyJoinsTheCustomersConversation: a commenter who already
// wrote to the page gets the DM in that same conversation, and keeps the
// name their profile gave.
func TestPrivateReplyJoinsTheCustomersConversation(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	// The customer's profile, read when they first write to the page.
	g.SetProfile("psid-ada", metafake.Profile{ID: "psid-ada", FirstName: "Ada", LastName: "Profile", ProfilePic: "https://cdn.example/ada.jpg"})
	h := newCommentHarness(t, g)
	ws := uuid.NewString()
	page := "11" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	sent := time.Now().Add(-time.Hour)
	msg, _ := json.Marshal(map[string]any{"object": "page", "entry": []any{map[string]any{
		"id": page, "time": sent.UnixMilli(),
		"messaging": []any{map[string]any{
			"sender": map[string]any{"id": "psid-ada"}, "recipient": map[string]any{"id": page},
			"timestamp": sent.UnixMilli(), "message": map[string]any{"mid": "m_customer_1", "text": "hello"},
		}},
	}}})
	if code := h.cmtPost(string(msg)); code != http.StatusOK {
		t.Fatalf("message ingress = %d", code)
	}
	before := h.conversations(ws, "")
	if len(before.Conversations) != 1 {
		t.Fatalf("conversations after the message = %+v", before)
	}
	cid := page + "_1"
	g.SetCommenter(cid, "psid-ada")
	h.cmtPost(feedComment(page, cid, "24609691832002", "Ada Lovelace", "and a comment", time.Now(), "add"))
	status, body := h.cmtAPI(ws, "/v1/comments/"+cid+"/private-reply", `{"text":"replying here"}`)
	if status != 200 || body["conversation_id"] != before.Conversations[0].ID {
		t.Fatalf("private reply = %d %v, want conversation %s", status, body, before.Conversations[0].ID)
	}
	after := h.conversations(ws, "")
	if len(after.Conversations) != 1 || after.Conversations[0].Contact.Name != before.Conversations[0].Contact.Name ||
		after.Conversations[0].Contact.ProfilePic != before.Conversations[0].Contact.ProfilePic {
		t.Fatalf("conversations after the DM = %+v, before %+v", after, before)
	}
	msgs := h.messages(ws, before.Conversations[0].ID, "").Messages
	if len(msgs) != 2 || msgs[0].Content != "replying here" || msgs[0].Sender != "user" || msgs[1].Content != "hello" {
		t.Fatalf("messages = %+v", msgs)
	}
}

// TestCommentReplyRulesInTheirOrder: when several rules refuse a reply,
// the first of docs/comments.md's tables answers, and nothing is posted.
// A public reply's text is required before the comment is looked up, and
// held to its platform's bound after; a private reply's text is checked
// whole before the lookup; then the comment's own rules, the commenter's
// window, and the page's daily cap.
func TestCommentReplyRulesInTheirOrder(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g, func(c *svcconfig.Config) {
		c.PrivateReplyWindow = time.Hour
		c.PrivateReplyDailyCap = 1
	})
	ws := uuid.NewString()
	page := "9" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	now := time.Now()
	h.cmtPost(feedComment(page, page+"_a", "222", "Cy", "first", now.Add(-10*time.Minute), "add"))
	h.cmtPost(feedComment(page, page+"_b", "222", "Cy", "second", now.Add(-5*time.Minute), "add"))
	h.cmtPost(feedComment(page, page+"_old", "222", "Cy", "old", now.Add(-2*time.Hour), "add"))
	h.cmtPost(feedComment(page, page+"_d", "333", "Di", "other", now.Add(-time.Minute), "add"))
	g.SetCommenter(page+"_a", "psid-cy")

	// The one private reply the day allows: Cy's window and the page's
	// cap are both taken from here on.
	if status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_a/private-reply", `{"text":"hi Cy"}`); status != http.StatusOK {
		t.Fatalf("first private reply = %d %v", status, body)
	}
	text := func(n int) string { return `{"text":"` + strings.Repeat("x", n) + `"}` }
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"public: a tag before a missing text", "/v1/comments/nope_1/reply", `{"tag":"HUMAN_AGENT"}`, 400, "tag_unsupported"},
		{"public: a blank text before the lookup", "/v1/comments/nope_1/reply", `{"text":" "}`, 400, "invalid_request"},
		{"public: the lookup before the platform's bound", "/v1/comments/nope_1/reply", text(8001), 404, "comment_not_found"},
		{"private: a tag before the text", "/v1/comments/nope_1/private-reply", `{"tag":"HUMAN_AGENT","text":""}`, 400, "tag_unsupported"},
		{"private: a text over 2000 before the lookup", "/v1/comments/nope_1/private-reply", text(2001), 400, "invalid_request"},
		{"private: used before the commenter and the cap", "/v1/comments/" + page + "_a/private-reply", `{"text":"again"}`, 409, "private_reply_used"},
		{"private: expired before the commenter and the cap", "/v1/comments/" + page + "_old/private-reply", `{"text":"hi"}`, 409, "private_reply_expired"},
		{"private: the commenter before the cap", "/v1/comments/" + page + "_b/private-reply", `{"text":"hi"}`, 429, "private_reply_commenter_window"},
		{"private: the cap", "/v1/comments/" + page + "_d/private-reply", `{"text":"hi Di"}`, 429, "private_reply_daily_cap"},
	}
	for _, tt := range tests {
		if status, body := h.cmtAPI(ws, tt.path, tt.body); status != tt.status || body["code"] != tt.code {
			t.Errorf("%s: %d %v, want %d %s", tt.name, status, body, tt.status, tt.code)
		}
	}
	if n := len(g.Calls()); n != 1 {
		t.Fatalf("graph calls = %d, want only the first private reply", n)
	}
}
