package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

func TestListConversationsWalksTiesExactlyOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	// Telegram stamps whole seconds, so conversations tie on
	// last_message_at; seconds after t0:
	offsets := []int64{5, 4, 4, 4, 3, 2, 2, 1}
	for i, off := range offsets {
		h.deliver(ch, tgUpdate{UpdateID: int64(i + 1), MessageID: 1, FromID: int64(9000 + i), First: "C", Date: t0.Unix() + off, Text: "hi"})
	}

	all := h.conversations(ws, "?limit=100")
	if len(all.Conversations) != len(offsets) || all.NextBefore != nil {
		t.Fatalf("all = %d conversations, next %v", len(all.Conversations), all.NextBefore)
	}
	want := make([]string, len(all.Conversations))
	for i, c := range all.Conversations {
		want[i] = c.ID
		if i > 0 {
			prev := all.Conversations[i-1]
			if c.LastMessageAt > prev.LastMessageAt || (c.LastMessageAt == prev.LastMessageAt && c.ID > prev.ID) {
				t.Fatalf("not most recent first: %s/%s after %s/%s", c.LastMessageAt, c.ID, prev.LastMessageAt, prev.ID)
			}
		}
	}
	if all.Conversations[0].LastMessageAt != "2026-01-15T10:00:05Z" || all.Conversations[7].LastMessageAt != "2026-01-15T10:00:01Z" {
		t.Fatalf("order = %+v", all.Conversations)
	}

	// limit 2, first page: the tie group at :04 would run past the page, so
	// the page stops before it and next_before sits just above it.
	first := h.conversations(ws, "?limit=2")
	if len(first.Conversations) != 1 || first.NextBefore == nil || *first.NextBefore != "2026-01-15T10:00:04.000001Z" {
		t.Fatalf("first page = %d conversations, next_before %v", len(first.Conversations), deref(first.NextBefore))
	}

	for limit := 1; limit <= len(offsets)+1; limit++ {
		var got []string
		query := fmt.Sprintf("?limit=%d", limit)
		for pages := 0; ; pages++ {
			if pages > len(offsets) {
				t.Fatalf("limit %d: the walk does not end", limit)
			}
			page := h.conversations(ws, query)
			if len(page.Conversations) > limit {
				// Only a single tie group larger than the limit may exceed it.
				for _, c := range page.Conversations {
					if c.LastMessageAt != page.Conversations[0].LastMessageAt {
						t.Fatalf("limit %d: page of %d spans several timestamps", limit, len(page.Conversations))
					}
				}
			}
			for _, c := range page.Conversations {
				got = append(got, c.ID)
			}
			if page.NextBefore == nil {
				break
			}
			if len(page.Conversations) == 0 {
				t.Fatalf("limit %d: empty page with a next_before", limit)
			}
			query = fmt.Sprintf("?limit=%d&before=%s", limit, *page.NextBefore)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: walk = %v, want %v", limit, got, want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func TestListConversationsFiltersAndLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	for i := 0; i < 51; i++ {
		h.deliver(ch, tgUpdate{UpdateID: int64(i + 1), MessageID: 1, FromID: int64(100 + i), First: "C", Date: t0.Unix() + int64(i), Text: "hi"})
	}

	page := h.conversations(ws, "")
	if len(page.Conversations) != 50 || page.NextBefore == nil || *page.NextBefore != page.Conversations[49].LastMessageAt {
		t.Fatalf("default page: %d conversations, next_before %s", len(page.Conversations), deref(page.NextBefore))
	}
	rest := h.conversations(ws, "?before="+*page.NextBefore)
	if len(rest.Conversations) != 1 || rest.NextBefore != nil || rest.Conversations[0].LastMessageAt != "2026-01-15T10:00:00Z" {
		t.Fatalf("second page: %+v", rest)
	}
	if n := len(h.conversations(ws, "?limit=100&platform=telegram").Conversations); n != 51 {
		t.Fatalf("telegram: %d", n)
	}
	for _, p := range []string{"messenger", "instagram", "webchat"} {
		if n := len(h.conversations(ws, "?platform="+p).Conversations); n != 0 {
			t.Fatalf("%s: %d conversations", p, n)
		}
	}
	// before with an offset, encoded or as a raw '+' (a space once decoded).
	for _, before := range []string{"2026-01-15T12:00:03%2B02:00", "2026-01-15T12:00:03+02:00", "2026-01-15T10:00:03Z", "2026-01-15T10:00:02.0000001Z"} {
		got := h.conversations(ws, "?before="+before)
		if len(got.Conversations) != 3 || got.Conversations[0].LastMessageAt != "2026-01-15T10:00:02Z" {
			t.Fatalf("before %s: %d conversations", before, len(got.Conversations))
		}
	}

	bad := []struct{ query, field string }{
		{"?platform=sms", "platform"},
		{"?platform=Telegram", "platform"},
		{"?before=yesterday", "before"},
		{"?before=2026-01-15", "before"},
		{"?before=1768471200", "before"},
		{"?limit=0", "limit"},
		{"?limit=101", "limit"},
		{"?limit=-1", "limit"},
		{"?limit=ten", "limit"},
		{"?limit=1.5", "limit"},
		{"?limit=10&limit=20", "limit is given more than once"},
		{"?before=2026-01-15T10:00:00Z&before=2026-01-16T10:00:00Z", "before is given more than once"},
		{"?platform=telegram&platform=messenger", "platform is given more than once"},
	}
	for _, b := range bad {
		err := h.api(ws, http.MethodGet, "/v1/conversations"+b.query, nil, nil)
		wantErr(t, err, http.StatusBadRequest, "invalid_request", b.field)
	}
}

func TestListMessagesPaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	for i := 0; i < 101; i++ {
		h.deliver(ch, tgUpdate{UpdateID: int64(i + 1), MessageID: int64(i + 1), FromID: 77, First: "C", Date: t0.Unix() + int64(i), Text: fmt.Sprint(i)})
	}
	conv := h.conversations(ws, "").Conversations[0]

	page := h.messages(ws, conv.ID, "")
	if len(page.Messages) != 50 || page.Messages[0].Content != "100" || page.Messages[49].Content != "51" ||
		page.NextBefore == nil || *page.NextBefore != page.Messages[49].CreatedAt {
		t.Fatalf("default page: %d, next %s", len(page.Messages), deref(page.NextBefore))
	}
	page = h.messages(ws, conv.ID, "?limit=100&before="+*page.NextBefore)
	if len(page.Messages) != 51 || page.Messages[0].Content != "50" || page.NextBefore != nil {
		t.Fatalf("second page: %d, next %s", len(page.Messages), deref(page.NextBefore))
	}
	if n := len(h.messages(ws, conv.ID, "?limit=100").Messages); n != 100 {
		t.Fatalf("limit 100: %d", n)
	}
	for _, q := range []struct{ query, field string }{{"?limit=101", "limit"}, {"?limit=0", "limit"}, {"?before=soon", "before"}, {"?limit=1&limit=2", "limit is given more than once"}} {
		err := h.api(ws, http.MethodGet, "/v1/conversations/"+conv.ID+"/messages"+q.query, nil, nil)
		wantErr(t, err, http.StatusBadRequest, "invalid_request", q.field)
	}
	for _, id := range []string{uuid.NewString(), "nope"} {
		err := h.api(ws, http.MethodGet, "/v1/conversations/"+id+"/messages", nil, nil)
		wantErr(t, err, http.StatusNotFound, "conversation_not_found", "")
	}
}

func TestListMessagesWalksTiesExactlyOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	offsets := []int64{3, 3, 2, 2, 2, 1}
	for i, off := range offsets {
		h.deliver(ch, tgUpdate{UpdateID: int64(i + 1), MessageID: int64(i + 1), FromID: 55, First: "C", Date: t0.Unix() + off, Text: fmt.Sprint(i)})
	}
	conv := h.conversations(ws, "").Conversations[0]
	var want []string
	for _, m := range h.messages(ws, conv.ID, "").Messages {
		want = append(want, m.ID)
	}
	if len(want) != len(offsets) {
		t.Fatalf("%d messages", len(want))
	}
	for limit := 1; limit <= len(offsets); limit++ {
		var got []string
		query := fmt.Sprintf("?limit=%d", limit)
		for pages := 0; pages <= len(offsets); pages++ {
			page := h.messages(ws, conv.ID, query)
			for _, m := range page.Messages {
				got = append(got, m.ID)
			}
			if page.NextBefore == nil {
				break
			}
			query = fmt.Sprintf("?limit=%d&before=%s", limit, *page.NextBefore)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: walk = %v, want %v", limit, got, want)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws1, ws2 := uuid.NewString(), uuid.NewString()
	ch := h.telegramChannel(ws1, "external")
	conv := h.customerConversation(ws1, ch, 6060)

	if got := h.conversations(ws2, ""); len(got.Conversations) != 0 || got.NextBefore != nil {
		t.Fatalf("ws2 sees conversations: %+v", got)
	}
	if got := h.conversations(ws2, "?platform=telegram"); len(got.Conversations) != 0 {
		t.Fatalf("ws2 sees telegram conversations: %+v", got)
	}
	var chans struct {
		Channels []map[string]any `json:"channels"`
	}
	if err := h.api(ws2, http.MethodGet, "/v1/channels", nil, &chans); err != nil || len(chans.Channels) != 0 {
		t.Fatalf("ws2 channels: %v %v", chans, err)
	}
	err := h.api(ws2, http.MethodGet, "/v1/conversations/"+conv.ID+"/messages", nil, nil)
	wantErr(t, err, http.StatusNotFound, "conversation_not_found", "")
	err = h.api(ws2, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "hijack"}, nil)
	wantErr(t, err, http.StatusNotFound, "conversation_not_found", "")
	if n := len(h.tg.Calls()); n != 0 {
		t.Fatalf("telegram got %d calls from another workspace", n)
	}
	if n := h.count("messages", "sender = 'user'"); n != 0 {
		t.Fatalf("stored %d messages", n)
	}

	// The owner still sees everything.
	if len(h.conversations(ws1, "").Conversations) != 1 || len(h.messages(ws1, conv.ID, "").Messages) != 1 {
		t.Fatal("ws1 lost its conversation")
	}
	// Without an authenticated workspace there is nothing to see.
	for _, ws := range []string{"", "ws_1"} {
		err := h.api(ws, http.MethodGet, "/v1/conversations", nil, nil)
		wantErr(t, err, http.StatusUnauthorized, "unauthorized", "")
	}
}

func TestListChannels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	tg := h.telegramChannel(ws, "external")
	var web messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "webchat", "external_id": "site-1"}, &web); err != nil {
		t.Fatal(err)
	}
	status, body := h.apiRaw(ws, http.MethodGet, "/v1/channels", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	want := fmt.Sprintf(`{"channels":[{"id":%q,"kind":"telegram","external_id":%q,"ai_mode":"external","status":"active"},`+
		`{"id":%q,"kind":"webchat","external_id":"site-1","ai_mode":"auto","status":"active"}]}`, tg.ID, tg.ExternalID, web.Channel.ID)
	if strings.TrimSpace(string(body)) != want {
		t.Fatalf("body = %s\nwant   %s", body, want)
	}
	if strings.Contains(string(body), "secret") || strings.Contains(string(body), "token") {
		t.Fatal("public channels leak credentials")
	}
}

// Pages of conversations read at once, of workspaces of different sizes,
// each come whole and as they come alone: the buffer a page is encoded in
// serves the next page only once this one is sent.
func TestConcurrentPagesAreEachTheirOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spaces := []string{uuid.NewString(), uuid.NewString()}
	for i, ws := range spaces {
		ch := h.telegramChannel(ws, "external")
		for k := range 1 + 4*i {
			h.customerConversation(ws, ch, int64(7000+100*i+k))
		}
	}
	alone := make([][]byte, len(spaces))
	for i, ws := range spaces {
		status, body := h.apiRaw(ws, http.MethodGet, "/v1/conversations?limit=50", "")
		if status != http.StatusOK || len(h.conversations(ws, "").Conversations) != 1+4*i {
			t.Fatalf("workspace %d: %d %s", i, status, body)
		}
		alone[i] = body
	}
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	for n := range 100 {
		wg.Go(func() {
			i := n % len(spaces)
			req := &rpcv1.Request{WorkspaceId: spaces[i], Method: http.MethodGet, Path: "/v1/conversations", RawQuery: "limit=50"}
			resp, err := h.client.Do(context.Background(), rpc.ServiceMessaging, rpc.EndpointAPI, req)
			switch {
			case err != nil:
				errc <- err
			case resp.GetStatus() != http.StatusOK || !bytes.Equal(resp.GetBody(), alone[i]):
				errc <- fmt.Errorf("request %d, workspace %d: %d %s, want %s", n, i, resp.GetStatus(), resp.GetBody(), alone[i])
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
