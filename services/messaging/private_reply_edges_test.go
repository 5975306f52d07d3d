package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
)

// TestCommenterWindowEnds holds both edges of "1 private reply per
// commenter per 7 days" (PRIVATE_REPLY_WINDOW, here 1 h): a commenter
// whose last private reply is inside the window is refused, one whose
// last private reply is past it gets another, also from the database
// alone (the Redis claim lives as long as the window).
func TestCommenterWindowEnds(t *testing.T) {
	t.Parallel()
	g := newMetaGraph(t)
	h := newCommentHarness(t, g, func(c *svcconfig.Config) { c.PrivateReplyWindow = time.Hour })
	ws := uuid.NewString()
	page := "9" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	h.cmtChannel(ws, "messenger", page, "external")
	now := time.Now()
	for _, id := range []string{"_a", "_b"} {
		h.cmtPost(feedComment(page, page+id, "444", "Ed", "hi"+id, now.Add(-10*time.Minute), "add"))
		g.SetCommenter(page+id, "psid-ed")
	}
	if status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_a/private-reply", `{"text":"hi Ed"}`); status != http.StatusOK {
		t.Fatalf("first private reply = %d %v", status, body)
	}
	rdb := h.env.Redis(t)
	claim := h.env.RedisPrefix + "privatereply-commenter:" + page + ":444"
	// repliedAgo moves the first private reply back by ago, and drops the
	// commenter's Redis claim as its expiry would.
	repliedAgo := func(ago time.Duration) {
		t.Helper()
		if err := h.db.Exec(`UPDATE messaging.comments SET private_replied_at = ? WHERE external_id = ?`, time.Now().Add(-ago), page+"_a").Error; err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(context.Background(), claim).Err(); err != nil {
			t.Fatal(err)
		}
	}

	repliedAgo(59 * time.Minute)
	status, body := h.cmtAPI(ws, "/v1/comments/"+page+"_b/private-reply", `{"text":"hi again"}`)
	if status != http.StatusTooManyRequests || body["code"] != "private_reply_commenter_window" {
		t.Fatalf("59 min after the first, with a 1 h window = %d %v, want 429 private_reply_commenter_window", status, body)
	}
	if n := len(g.Calls()); n != 1 {
		t.Fatalf("graph calls = %d after the refusal, want 1", n)
	}

	repliedAgo(61 * time.Minute)
	status, body = h.cmtAPI(ws, "/v1/comments/"+page+"_b/private-reply", `{"text":"hi again"}`)
	if status != http.StatusOK || body["recipient_id"] != "psid-ed" {
		t.Fatalf("61 min after the first, with a 1 h window = %d %v, want 200", status, body)
	}
	if c, _ := body["comment"].(map[string]any); c["status"] != "dm_sent" {
		t.Fatalf("comment after the second private reply = %v", body["comment"])
	}
	if n := len(g.Calls()); n != 2 {
		t.Fatalf("graph calls = %d, want 2", n)
	}
}
