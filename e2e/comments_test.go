package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// Comments end to end: Meta posts signed feed / comments webhooks to the
// messaging ingress, the developer's receiver gets comment.received, and
// the developer answers through the gateway while the fake Graph API
// records what Meta would have received.

const (
	cmtAppSecret = "e2e-comments-app-secret-9c2d"
	cmtPageToken = "EAAGe2eCommentsPageToken"
)

// commentShop is a running Parley wired to a fake Graph API, with a
// workspace whose webhook is the developer's receiver.
type commentShop struct {
	*suite
	graph     *metafake.Server
	key       string
	workspace string
	secret    string
	rcv       *receiver.Receiver
}

func startCommentShop(t *testing.T, extra ...string) *commentShop {
	t.Helper()
	graph, graphAPI := metafake.Start(t)
	s := startSuite(t, append([]string{
		"META_APP_SECRET=" + cmtAppSecret,
		"META_GRAPH_API_BASE=" + graphAPI + "/v21.0",
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
	}, extra...)...)
	sh := &commentShop{suite: s, graph: graph, rcv: newReceiver(t)}
	sh.workspace, sh.key = s.developer(t)
	sh.secret = s.saveWebhook(t, sh.key, sh.rcv.URL)
	return sh
}

// channel creates a Messenger or Instagram channel for pageID in mode.
func (sh *commentShop) channel(t *testing.T, kind, pageID, mode string) string {
	t.Helper()
	return sh.addChannel(t, sh.workspace, mode, "--kind", kind, "--external-id", pageID, "--token", cmtPageToken).ID
}

// deliver posts body to /ingress/meta signed with the app secret.
func (sh *commentShop) deliver(t *testing.T, body []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, sh.messagingURL+"/ingress/meta", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", metafake.Sign(cmtAppSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post to /ingress/meta: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/ingress/meta = %d", resp.StatusCode)
	}
}

// reply calls a comment route through the gateway; a refusal must not
// carry Retry-After.
func (sh *commentShop) reply(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	status, header, out := sh.api(t, sh.key, http.MethodPost, path, body)
	if ra := header.Get("Retry-After"); ra != "" {
		t.Errorf("%s answered %d with Retry-After %q", path, status, ra)
	}
	return status, out
}

// wantRefused checks a refusal's status and code, and that Meta received
// nothing for it.
func (sh *commentShop) wantRefused(t *testing.T, what, path string, body any, status int, code string) {
	t.Helper()
	before := len(sh.graph.Calls())
	got, out := sh.reply(t, path, body)
	if got != status || out["code"] != code {
		t.Fatalf("%s = %d %v, want %d %s", what, got, out, status, code)
	}
	if msg, _ := out["message"].(string); msg == "" {
		t.Errorf("%s: no message in %v", what, out)
	}
	if after := len(sh.graph.Calls()); after != before {
		t.Fatalf("%s: Meta received %d calls for a refusal", what, after-before)
	}
}

// feedComment is a Facebook page feed webhook with one new comment, as
// Meta sends it.
func feedComment(pageID, commentID, fromID, fromName, message string, created time.Time) []byte {
	postID := pageID + "_104"
	b, _ := json.Marshal(map[string]any{"object": "page", "entry": []any{map[string]any{
		"id": pageID, "time": created.Unix() + 1,
		"changes": []any{map[string]any{"field": "feed", "value": map[string]any{
			"from": map[string]any{"id": fromID, "name": fromName},
			"post": map[string]any{"status_type": "added_photos", "is_published": true,
				"updated_time": created.Format("2006-01-02T15:04:05-0700"), "promotion_status": "inactive",
				"permalink_url": "https://www.facebook.com/" + postID, "id": postID},
			"message": message, "post_id": postID, "comment_id": commentID,
			"created_time": created.Unix(), "item": "comment", "parent_id": postID, "verb": "add",
		}}},
	}}})
	return b
}

// igComment is an Instagram comments webhook, as Meta sends it.
func igComment(accountID, commentID, fromID, username, text, mediaID string, at time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"object": "instagram", "entry": []any{map[string]any{
		"id": accountID, "time": at.Unix(),
		"changes": []any{map[string]any{"field": "comments", "value": map[string]any{
			"from":  map[string]any{"id": fromID, "username": username},
			"media": map[string]any{"id": mediaID, "media_product_type": "FEED"},
			"id":    commentID, "text": text,
		}}},
	}}})
	return b
}

// commentEvent is a comment.received envelope.
type commentEvent struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		WorkspaceID string            `json:"workspace_id"`
		Platform    string            `json:"platform"`
		Channel     map[string]string `json:"channel"`
		Comment     struct {
			ID         string            `json:"id"`
			PostID     string            `json:"post_id"`
			Text       string            `json:"text"`
			From       map[string]string `json:"from"`
			ReceivedAt string            `json:"received_at"`
		} `json:"comment"`
	} `json:"data"`
}

// commentEvents decodes every comment.received the receiver got.
func (sh *commentShop) commentEvents(t *testing.T) []commentEvent {
	t.Helper()
	var out []commentEvent
	for _, req := range sh.rcv.Requests() {
		if req.Header.Get("X-Service-Event") != "comment.received" {
			continue
		}
		var ev commentEvent
		if err := json.Unmarshal(req.Body, &ev); err != nil {
			t.Fatalf("comment.received body: %v\n%s", err, req.Body)
		}
		verifySignature(t, req, sh.secret)
		checkDeliveryHeaders(t, req, "comment.received")
		if ev.ID != req.Header.Get("X-Service-Delivery") || ev.Event != "comment.received" || !isUTCTimestamp(ev.CreatedAt) {
			t.Fatalf("envelope head %+v", ev)
		}
		out = append(out, ev)
	}
	return out
}

// waitComment waits for the comment.received of commentID.
func (sh *commentShop) waitComment(t *testing.T, commentID string) commentEvent {
	t.Helper()
	var found commentEvent
	sh.rcv.Await(t, "comment.received for "+commentID, func([]receiver.Request) bool {
		for _, ev := range sh.commentEvents(t) {
			if ev.Data.Comment.ID == commentID {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// TestCommentsEndToEnd: comments on a Facebook page reach the developer as
// comment.received (never the page's own, never from a channel outside
// external mode); the developer replies publicly, then privately, and every
// private-reply rule answers its code with nothing sent to Meta.
func TestCommentsEndToEnd(t *testing.T) {
	t.Parallel()
	sh := startCommentShop(t)
	const page, quietPage = "104880001", "104880002"
	channelID := sh.channel(t, "messenger", page, "external")
	sh.channel(t, "messenger", quietPage, "auto")
	now := time.Now().UTC().Truncate(time.Second)

	// The page's own comment and a comment on a channel in auto mode come
	// first; the customer's comment last. Events are relayed in order, so
	// once the customer's has arrived, the others would have too.
	sh.deliver(t, feedComment(page, page+"_900", page, "Shop", "Thanks for asking!", now.Add(-time.Minute)))
	sh.deliver(t, feedComment(quietPage, quietPage+"_901", "24600001", "Bo", "Hello?", now.Add(-time.Minute)))
	cid := page + "_902"
	first := feedComment(page, cid, "24609691832002", "Ada Lovelace", "Do you ship to Darkhan?", now.Add(-30*time.Minute))
	sh.deliver(t, first)
	sh.deliver(t, first) // Meta redelivers; stored and forwarded once

	ev := sh.waitComment(t, cid)
	d := ev.Data
	if d.WorkspaceID != sh.workspace || d.Platform != "messenger" || d.Channel["kind"] != "messenger" || d.Channel["external_id"] != page {
		t.Fatalf("comment.received data = %+v", d)
	}
	c := d.Comment
	if c.PostID != page+"_104" || c.Text != "Do you ship to Darkhan?" || c.From["id"] != "24609691832002" || c.From["name"] != "Ada Lovelace" {
		t.Fatalf("comment = %+v", c)
	}
	if !isUTCTimestamp(c.ReceivedAt) || !sameInstant(c.ReceivedAt, now.Add(-30*time.Minute).Unix()) {
		t.Fatalf("received_at = %q, want the comment's created_time %s", c.ReceivedAt, now.Add(-30*time.Minute))
	}

	// A public reply goes under the comment on Facebook.
	status, out := sh.reply(t, "/v1/comments/"+cid+"/reply", map[string]string{"text": "Yes! Check your inbox."})
	if status != http.StatusOK || out["ok"] != true || out["external_id"] == "" {
		t.Fatalf("reply = %d %v", status, out)
	}
	replies := sh.graph.CallsTo("/" + cid + "/comments")
	if len(replies) != 1 || replies[0].Method != http.MethodPost || replies[0].Body["message"] != "Yes! Check your inbox." || replies[0].AccessToken != cmtPageToken {
		t.Fatalf("meta's comment replies = %+v", replies)
	}

	// Bad requests, unknown comments and tag are refused before Meta hears
	// anything.
	sh.wantRefused(t, "unknown comment", "/v1/comments/"+page+"_404/private-reply", map[string]string{"text": "hi"}, 404, "comment_not_found")
	sh.wantRefused(t, "empty text", "/v1/comments/"+cid+"/private-reply", map[string]string{"text": ""}, 400, "invalid_request")
	sh.wantRefused(t, "tag", "/v1/comments/"+cid+"/private-reply", map[string]string{"text": "hi", "tag": "HUMAN_AGENT"}, 400, "tag_unsupported")

	// Meta refuses once: 502, and nothing is used up.
	sh.graph.FailNext("/me/messages", metafake.GraphError{Status: 400, Message: "(#100) No matching user found", Type: "OAuthException", Code: 100, Subcode: 2018001})
	if status, out := sh.reply(t, "/v1/comments/"+cid+"/private-reply", map[string]string{"text": "Hi Ada!"}); status != http.StatusBadGateway || out["code"] != "platform_error" {
		t.Fatalf("private reply refused by meta = %d %v", status, out)
	}

	// The private reply: a DM through the Send API with recipient.comment_id.
	status, out = sh.reply(t, "/v1/comments/"+cid+"/private-reply", map[string]string{"text": "Hi Ada! We ship to Darkhan in 2 days."})
	recipient, _ := out["recipient_id"].(string)
	dmID, _ := out["external_id"].(string)
	if status != http.StatusOK || out["ok"] != true || recipient == "" || dmID == "" {
		t.Fatalf("private reply = %d %v", status, out)
	}
	if cm, _ := out["comment"].(map[string]any); cm["status"] != "both_sent" {
		t.Fatalf("status after a public then a private reply = %v", out["comment"])
	}
	dms := sh.graph.CallsTo("/me/messages")
	dm := dms[len(dms)-1]
	wantSame(t, "private reply body", dm.Body, map[string]any{
		"recipient": map[string]any{"comment_id": cid},
		"message":   map[string]any{"text": "Hi Ada! We ship to Darkhan in 2 days."},
	})
	if dm.AccessToken != cmtPageToken {
		t.Fatalf("private reply token = %q", dm.AccessToken)
	}
	status, _, got := sh.api(t, sh.key, http.MethodGet, "/v1/comments/"+cid, nil)
	if cm, _ := got["comment"].(map[string]any); status != http.StatusOK || cm["status"] != "both_sent" {
		t.Fatalf("GET comment = %d %v", status, got)
	}

	// The DM is in the commenter's inbox conversation.
	status, _, convs := sh.api(t, sh.key, http.MethodGet, "/v1/conversations?platform=messenger", nil)
	list, _ := convs["conversations"].([]any)
	if status != http.StatusOK || len(list) != 1 {
		t.Fatalf("conversations = %d %v", status, convs)
	}
	conv := list[0].(map[string]any)
	contact := conv["contact"].(map[string]any)
	if conv["id"] != out["conversation_id"] || conv["channel_id"] != channelID || contact["sender_id"] != recipient || contact["name"] != "Ada Lovelace" {
		t.Fatalf("conversation = %v", conv)
	}
	status, _, msgs := sh.api(t, sh.key, http.MethodGet, "/v1/conversations/"+conv["id"].(string)+"/messages", nil)
	ml, _ := msgs["messages"].([]any)
	if status != http.StatusOK || len(ml) != 1 {
		t.Fatalf("messages = %d %v", status, msgs)
	}
	if m := ml[0].(map[string]any); m["sender"] != "user" || m["content"] != "Hi Ada! We ship to Darkhan in 2 days." || m["external_id"] != dmID || m["type"] != "text" {
		t.Fatalf("stored DM = %v", m)
	}

	// One private reply per comment.
	sh.wantRefused(t, "second private reply", "/v1/comments/"+cid+"/private-reply", map[string]string{"text": "again"}, 409, "private_reply_used")

	// One per commenter per 7 days: Ada's next comment gets no DM.
	next := page + "_903"
	sh.deliver(t, feedComment(page, next, "24609691832002", "Ada Lovelace", "And to Erdenet?", now.Add(-time.Minute)))
	sh.waitComment(t, next)
	sh.wantRefused(t, "same commenter", "/v1/comments/"+next+"/private-reply", map[string]string{"text": "Yes"}, 429, "private_reply_commenter_window")

	// Within 7 days of the comment: an 8-day-old comment gets no DM.
	old := page + "_904"
	sh.deliver(t, feedComment(page, old, "24600077", "Cy", "Still available?", now.Add(-8*24*time.Hour)))
	sh.waitComment(t, old)
	sh.wantRefused(t, "8-day-old comment", "/v1/comments/"+old+"/private-reply", map[string]string{"text": "Yes"}, 409, "private_reply_expired")

	// Events are relayed in order: the page's own comment, the auto
	// channel's and the redelivery would have arrived before the last one.
	evs := sh.commentEvents(t)
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.Data.Comment.ID)
	}
	if len(evs) != 3 || ids[0] != cid || ids[1] != next || ids[2] != old {
		t.Fatalf("receiver got comment.received for %v, want exactly %s, %s, %s (no redelivery, no page comment, no auto channel)", ids, cid, next, old)
	}
}

// TestCommentCapsAndInstagramEndToEnd: the page's daily cap and a short
// PRIVATE_REPLY_WINDOW refuse with nothing sent; Instagram comments arrive
// as comment.received and public replies go to /{id}/replies.
func TestCommentCapsAndInstagramEndToEnd(t *testing.T) {
	t.Parallel()
	sh := startCommentShop(t, "PRIVATE_REPLY_DAILY_CAP=1", "PRIVATE_REPLY_WINDOW=1h")
	const page, account = "104990001", "17841400000000001"
	sh.channel(t, "messenger", page, "external")
	sh.channel(t, "instagram", account, "external")
	now := time.Now().UTC().Truncate(time.Second)

	sh.deliver(t, feedComment(page, page+"_1", "2461", "Bo", "one", now.Add(-10*time.Minute)))
	sh.deliver(t, feedComment(page, page+"_2", "2462", "Di", "two", now.Add(-10*time.Minute)))
	sh.deliver(t, feedComment(page, page+"_3", "2463", "Ed", "three", now.Add(-2*time.Hour)))
	sh.waitComment(t, page+"_3")

	// A 2-hour-old comment under a 1-hour window.
	sh.wantRefused(t, "comment older than the window", "/v1/comments/"+page+"_3/private-reply", map[string]string{"text": "hi"}, 409, "private_reply_expired")
	// The cap is 1: the first DM of the day goes out, the second does not.
	if status, out := sh.reply(t, "/v1/comments/"+page+"_1/private-reply", map[string]string{"text": "hi Bo"}); status != http.StatusOK {
		t.Fatalf("first private reply = %d %v", status, out)
	}
	sh.wantRefused(t, "over the daily cap", "/v1/comments/"+page+"_2/private-reply", map[string]string{"text": "hi Di"}, 429, "private_reply_daily_cap")

	// Instagram: comment.received with the account as channel, the media as
	// post, the username as name; the public reply goes to /{id}/replies.
	sh.deliver(t, igComment(account, "17858893269000001", "17841455555", "ada.codes", "Price?", "17895695668004550", now.Add(-time.Minute)))
	ev := sh.waitComment(t, "17858893269000001")
	if ev.Data.Platform != "instagram" || ev.Data.Channel["kind"] != "instagram" || ev.Data.Channel["external_id"] != account ||
		ev.Data.Comment.PostID != "17895695668004550" || ev.Data.Comment.Text != "Price?" ||
		ev.Data.Comment.From["id"] != "17841455555" || ev.Data.Comment.From["name"] != "ada.codes" ||
		!sameInstant(ev.Data.Comment.ReceivedAt, now.Add(-time.Minute).Unix()) {
		t.Fatalf("instagram comment.received = %+v", ev.Data)
	}
	status, out := sh.reply(t, "/v1/comments/17858893269000001/reply", map[string]string{"text": "Sent you a DM!"})
	if status != http.StatusOK || out["ok"] != true {
		t.Fatalf("instagram reply = %d %v", status, out)
	}
	replies := sh.graph.CallsTo("/17858893269000001/replies")
	if len(replies) != 1 || replies[0].Body["message"] != "Sent you a DM!" || len(sh.graph.CallsTo("/17858893269000001/comments")) != 0 {
		t.Fatalf("instagram reply went to %+v", sh.graph.Calls())
	}
	// The account has its own daily count: its first DM goes out.
	status, out = sh.reply(t, "/v1/comments/17858893269000001/private-reply", map[string]string{"text": "Here is the price list"})
	if status != http.StatusOK || out["comment"].(map[string]any)["status"] != "both_sent" {
		t.Fatalf("instagram private reply = %d %v", status, out)
	}
}

// wantSame fails unless got and want are the same JSON value.
func wantSame(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("%s =\n%s\nwant\n%s", what, g, w)
	}
}
