package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/testenv/sse"
)

// inboxStream is an inbox page's event stream as a browser reads it.
type inboxStream struct {
	t      *testing.T
	resp   *http.Response
	events *sse.Reader
}

// openInboxStream opens the workspace's inbox event stream with b's
// session and reads up to its ready event.
func openInboxStream(t *testing.T, b *browser, ws string) *inboxStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.url+"/workspaces/"+ws+"/conversations/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the inbox stream = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body := bufio.NewReader(resp.Body)
	if retry, err := body.ReadString('\n'); err != nil || retry != "retry: 2000\n" {
		t.Fatalf("the stream starts with %q (%v), want the browser told to retry after 2 s", retry, err)
	}
	s := &inboxStream{t: t, resp: resp, events: sse.NewReader(body)}
	if ready := s.next(); ready != "ready" {
		t.Fatalf("the stream's first event is %q, want ready", ready)
	}
	return s
}

// next is the stream's next event, "name" or "name: data", skipping
// pings; "" when the stream has ended.
func (s *inboxStream) next() string {
	s.t.Helper()
	for {
		ev, err := s.events.Next()
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			s.t.Fatalf("read the inbox stream: %v", err)
		}
		switch {
		case ev.Comment == "ping":
		case ev.Name == "ready":
			return ev.Name
		default:
			return ev.Name + ": " + ev.Data
		}
	}
}

// publishInboxChange says on NATS, as messaging does, that a conversation
// changed, labelled as workspace label's, on workspace subject's subject.
func publishInboxChange(t *testing.T, h *harness, subject, label, conversationID string) {
	t.Helper()
	data, err := json.Marshal(messagingapi.InboxChange{WorkspaceID: label, ConversationID: conversationID})
	if err != nil {
		t.Fatal(err)
	}
	nc := h.env.NATS(t)
	if err := nc.Publish(messagingapi.InboxSubject(h.env.RPCPrefix, subject), data); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestInboxEventStream: the inbox's event stream (docs/console.md "The
// inbox", Live) sends a change event, its data the conversation's id,
// for each change messaging says of the workspace's conversations, and
// none of another workspace's; it ends, sending nothing more, once its
// session does (signed out in another tab, or expired), as every request
// of that session is refused from then on.
func TestInboxEventStream(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	other := h.workspace("Other")
	s := openInboxStream(t, b, own)
	idle := h.browser(t)
	idle.mustSignIn("ann@example.com")
	expiring := openInboxStream(t, idle, own)

	conv := uuid.NewString()
	publishInboxChange(t, h, other, other, uuid.NewString())
	publishInboxChange(t, h, own, other, uuid.NewString()) // on our subject, but another's
	publishInboxChange(t, h, own, own, conv)
	if got, want := s.next(), "change: "+conv; got != want {
		t.Fatalf("the stream sent %q, want %q (only the workspace's own change)", got, want)
	}

	if r := b.do(http.MethodPost, "/logout", map[string][]string{"csrf_token": {b.pageCSRF("/workspaces/" + own)}}, nil); r.status != http.StatusSeeOther || r.location() != "/login" {
		t.Fatalf("sign out = %d %q", r.status, r.location())
	}
	publishInboxChange(t, h, own, own, uuid.NewString())
	if got := s.next(); got != "" {
		t.Fatalf("after signing out the stream sent %q, want it ended", got)
	}
	for range 2 {
		if got := expiring.next(); !strings.HasPrefix(got, "change: ") {
			t.Fatalf("the other session's stream sent %q, want both changes", got)
		}
	}

	// Idle past the session's TTL: the stream sends nothing more.
	h.clock.advance(2 * defaults().idleTTL)
	publishInboxChange(t, h, own, own, uuid.NewString())
	if got := expiring.next(); got != "" {
		t.Fatalf("after the session expired the stream sent %q, want it ended", got)
	}
}
