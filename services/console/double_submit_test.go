package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
)

var formIDInput = regexp.MustCompile(`name="form_id" value="([^"]*)"`)

// postConcurrently posts form to path n times at once, as a double click
// or a browser's resubmit would, and returns the statuses.
func postConcurrently(t *testing.T, b *browser, path string, form url.Values, n int) []int {
	t.Helper()
	statuses := make([]int, n)
	errors := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, b.h.url+path, strings.NewReader(form.Encode()))
			if err != nil {
				errors[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", b.h.url)
			resp, err := b.client.Do(req)
			if err != nil {
				errors[i] = err
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for _, err := range errors {
		if err != nil {
			t.Fatal(err)
		}
	}
	return statuses
}

// replies is how many operator's sends reached the fake messaging.
func (m *fakeMessaging) repliesSent() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.inbox.replies)
}

// TestInboxReplyPostedTwiceSendsOnce: the reply form posted again, at
// once (a double click) or later (the browser's resubmit), sends the reply
// once; each post is answered 303 to the page (saying, after a repeat,
// that the form was submitted already) or 409 in words, never an error. The same form with another text (back, edited) is a reply of its
// own, and so is the form posted again after messaging refused it (4xx);
// after messaging answered 5xx it may have been sent, and posted again
// it sends nothing (409, in words).
func TestInboxReplyPostedTwiceSendsOnce(t *testing.T) {
	t.Parallel()
	h, own, conv, b := inboxAcme(t, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada"}}},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Hello?"})
	path := "/workspaces/" + own + "/conversations/" + conv
	page := b.get(path)
	id := formIDInput.FindStringSubmatch(page.body)
	if id == nil || id[1] == "" {
		t.Fatalf("the reply form has no form_id:\n%s", page.body)
	}
	if again := formIDInput.FindStringSubmatch(b.get(path).body); again == nil || again[1] == id[1] {
		t.Fatalf("the page drawn again has the same form_id %q", id[1])
	}
	form := url.Values{"csrf_token": {csrf(t, page)}, "form_id": {id[1]}, "text": {"On its way"}}

	for i, status := range postConcurrently(t, b, path+"/reply", form, 4) {
		if status != http.StatusSeeOther && status != http.StatusConflict {
			t.Errorf("post %d of the same form = %d", i, status)
		}
	}
	if n := h.messaging.repliesSent(); n != 1 {
		t.Fatalf("the form posted 4 times at once sent %d replies, want 1", n)
	}
	r := b.do(http.MethodPost, path+"/reply", form, nil)
	if r.status != http.StatusSeeOther || r.location() != path+"?done=sent&again=1#reply" {
		t.Fatalf("the form posted again = %d %q: %s", r.status, r.location(), r.body)
	}
	mustContain(t, b.get(path+"?done=sent&again=1"), "Your reply was sent.", formAgain)
	if n := h.messaging.repliesSent(); n != 1 {
		t.Fatalf("the form posted again sent %d replies in all, want 1", n)
	}

	// Back, the text changed, posted: a reply of its own.
	if r := b.do(http.MethodPost, path+"/reply", with(form, "text", "On its way, Ada"), nil); r.status != http.StatusSeeOther {
		t.Fatalf("the form with another text = %d: %s", r.status, r.body)
	}
	if n := h.messaging.repliesSent(); n != 2 {
		t.Fatalf("the form with another text: %d replies in all, want 2", n)
	}

	// Messaging's next send answers refusal; then the form is posted
	// again, answered want.
	postedAfter := func(refusal *errs.Error, text string, want int) response {
		h.messaging.mu.Lock()
		h.messaging.inbox.sendRefusal = refusal
		h.messaging.mu.Unlock()
		reply := with(form, "text", text)
		if r := b.do(http.MethodPost, path+"/reply", reply, nil); r.status != refusal.Status {
			t.Fatalf("a reply answered %d = %d: %s", refusal.Status, r.status, r.body)
		}
		r := b.do(http.MethodPost, path+"/reply", reply, nil)
		if r.status != want {
			t.Fatalf("the reply answered %d, posted again = %d, want %d: %s", refusal.Status, r.status, want, r.body)
		}
		return r
	}
	// Refused by messaging, then posted again: sent.
	postedAfter(errs.New(http.StatusConflict, "outside_messaging_window", "the messaging window is closed"), "Still there?", http.StatusSeeOther)
	if n := h.messaging.repliesSent(); n != 4 {
		t.Fatalf("refused then sent: %d sends in all, want 4", n)
	}
	// Answered 502 platform_error, which is also the platform not
	// answering in time: the customer may have the reply, so posted
	// again it sends nothing and says so.
	r = postedAfter(errs.New(http.StatusBadGateway, "platform_error", "telegram: the platform did not answer in time"), "Anyone?", http.StatusConflict)
	if n := h.messaging.repliesSent(); n != 5 {
		t.Fatalf("answered 502, then posted again: %d sends in all, want 5", n)
	}
	mustContain(t, r, "may have been done", "Check the conversation&#39;s messages below; to do it anyway, reload the page and post the new form.")
}

var seenInput = regexp.MustCompile(`name="seen" value="([^"]*)"`)

// TestInboxSuggestionSentTwiceSendsOnce: Send on the suggestion, as
// drafted or from the edit form, posted several times at once, sends it
// once; the others are told in words that no suggestion waits (404),
// never an error. Posted again after a newer draft came, the form that
// showed the older one sends nothing (409, in words), and the newer draft
// still waits: an operator never sends a draft unread.
func TestInboxSuggestionSentTwiceSendsOnce(t *testing.T) {
	t.Parallel()
	h, path, token, b := draftWaits(t)
	conv := path[strings.LastIndex(path, "/")+1:]
	draft := func(text string) messagingapi.Suggestion {
		return messagingapi.Suggestion{RunID: uuid.NewString(), CreatedAt: "2026-11-24T04:00:00Z", Messages: []messagingapi.OutboundMessage{{Type: "text", Text: text}}}
	}
	sends := func() int {
		h.messaging.mu.Lock()
		defer h.messaging.mu.Unlock()
		return len(h.messaging.inbox.sentSuggestions)
	}
	for _, edit := range []string{"", "?edit=1"} {
		h.messaging.suggest(conv, draft("It ships today."))
		seen := seenInput.FindStringSubmatch(b.get(path + edit).body)
		if seen == nil || seen[1] == "" {
			t.Fatalf("the suggestion's form (%q) has no seen mark", edit)
		}
		form := url.Values{"csrf_token": {token}, "seen": {seen[1]}}
		if edit != "" {
			form.Set("edited", "1")
			form.Set("text_0", "It ships tomorrow.")
		}

		sent, gone := 0, 0
		for _, status := range postConcurrently(t, b, path+"/suggestion/send", form, 4) {
			switch status {
			case http.StatusSeeOther:
				sent++
			case http.StatusNotFound:
				gone++
			default:
				t.Errorf("Send %v = %d", form, status)
			}
		}
		if sent != 1 || gone != 3 {
			t.Fatalf("Send %v 4 times: %d sent, %d told none waits; want 1 and 3", form, sent, gone)
		}
		// A newer draft came; the old page's form is posted again.
		h.messaging.suggest(conv, draft("A newer answer"))
		sentBefore := sends()
		r := b.do(http.MethodPost, path+"/suggestion/send", form, nil)
		if r.status != http.StatusConflict || !strings.Contains(r.body, "The suggestion was not sent: a newer one replaced the one you read.") ||
			!strings.Contains(r.body, "A newer answer") {
			t.Fatalf("Send %v over a newer draft = %d: %s", form, r.status, r.body)
		}
		if n := sends(); n != sentBefore {
			t.Fatalf("Send over a newer draft sent it (%d sends, %d before)", n, sentBefore)
		}
		h.messaging.mu.Lock()
		waiting := h.messaging.inbox.conversations[conv].suggestion
		h.messaging.mu.Unlock()
		if waiting == nil || waiting.Messages[0].Text != "A newer answer" {
			t.Fatalf("the newer draft does not wait any more: %+v", waiting)
		}
	}
}

// TestInboxDiscardNeverDropsAnUnreadDraft: Discard posted twice at once
// discards the draft shown (each post 303); the same form posted again
// after a newer draft came is 409 in words and the newer draft still
// waits.
func TestInboxDiscardNeverDropsAnUnreadDraft(t *testing.T) {
	t.Parallel()
	h, path, token, b := draftWaits(t)
	conv := path[strings.LastIndex(path, "/")+1:]
	h.messaging.suggest(conv, messagingapi.Suggestion{RunID: uuid.NewString(), CreatedAt: "2026-11-24T04:00:00Z", Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "first"}}})
	seen := seenInput.FindAllStringSubmatch(b.get(path).body, -1)
	if len(seen) != 2 || seen[1][1] == "" {
		t.Fatalf("the page's Send and Discard forms carry %v, want the draft's mark", seen)
	}
	form := url.Values{"csrf_token": {token}, "seen": {seen[1][1]}}
	for i, status := range postConcurrently(t, b, path+"/discard-suggestion", form, 2) {
		if status != http.StatusSeeOther {
			t.Fatalf("Discard %d of 2 = %d", i, status)
		}
	}
	h.messaging.suggest(conv, messagingapi.Suggestion{RunID: uuid.NewString(), CreatedAt: "2026-11-24T04:01:00Z", Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "A newer answer"}}})
	r := b.do(http.MethodPost, path+"/discard-suggestion", form, nil)
	if r.status != http.StatusConflict || !strings.Contains(r.body, "The suggestion was not discarded: a newer one replaced the one you read.") ||
		!strings.Contains(r.body, "A newer answer") {
		t.Fatalf("Discard over a newer draft = %d: %s", r.status, r.body)
	}
	h.messaging.mu.Lock()
	waiting := h.messaging.inbox.conversations[conv].suggestion
	h.messaging.mu.Unlock()
	if waiting == nil || waiting.Messages[0].Text != "A newer answer" {
		t.Fatalf("the newer draft was discarded unread: %+v", waiting)
	}
}
