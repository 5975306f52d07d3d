package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestInboxOversizedAndMalformedForms: each action of the conversation
// page, sent a field too large for one message to messaging (1 MiB, within
// the console's 4 MiB body limit), is refused 413 on the conversation page
// saying what was not done and why, with the reply box's text kept; a body
// over 4 MiB is the 413 page; a form that cannot be read (a broken
// multipart body, a broken %-escape) is 400 and one that is not
// a form at all (JSON, text) 403, its token unread. Nothing reaches
// messaging.
func TestInboxOversizedAndMalformedForms(t *testing.T) {
	t.Parallel()
	h, path, token, b := draftWaits(t)
	big := strings.Repeat("x", 1<<20)
	for action, tc := range map[string]struct {
		form    url.Values
		notDone string
	}{
		"reply":           {url.Values{"text": {big}}, "Your reply was not sent."},
		"tags":            {url.Values{"tags": {big}}, "Nothing was changed."},
		"assignee":        {url.Values{"assignee": {big}}, "Nothing was changed."},
		"suggestion/send": {url.Values{"edited": {"1"}, "text_0": {big}}, "The suggestion was not sent."},
	} {
		r := b.do(http.MethodPost, path+"/"+action, with(tc.form, "csrf_token", token), nil)
		if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, tc.notDone+" Request of ") ||
			!strings.Contains(r.body, "bytes is over the 1048576-byte bound of one message.") {
			t.Fatalf("%s with 1 MiB = %d: %.300s", action, r.status, r.body)
		}
		if action == "reply" && !strings.Contains(r.body, `rows="4">`+big+`</textarea>`) {
			t.Fatal("the refused reply's text is not kept in its box")
		}
	}
	over := b.do(http.MethodPost, path+"/reply", url.Values{"csrf_token": {token}, "text": {strings.Repeat("x", 4<<20)}}, nil)
	if over.status != http.StatusRequestEntityTooLarge || !strings.Contains(over.body, `role="alert">Request body too large.</p>`) {
		t.Fatalf("a reply over 4 MiB = %d: %.300s", over.status, over.body)
	}
	for contentType, want := range map[string]int{
		"multipart/form-data; boundary=zz":  http.StatusBadRequest,
		"multipart/form-data":               http.StatusBadRequest,
		"application/x-www-form-urlencoded": http.StatusBadRequest, // the broken %zz
		"application/json":                  http.StatusForbidden,
		"text/plain":                        http.StatusForbidden,
	} {
		req, err := http.NewRequest(http.MethodPost, b.h.url+path+"/reply", strings.NewReader("csrf_token="+token+"&text=%zz"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", b.h.url)
		if r := b.send(req); r.status != want || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("a reply as %s = %d, want %d: %.300s", contentType, r.status, want, r.body)
		}
	}
	if n := h.changesUpstream(); n != 0 {
		t.Fatalf("%d changes reached messaging from refused forms", n)
	}
}
