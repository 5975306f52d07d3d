package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// TestSuggestionSeenIsTheOneSentOrDiscarded: a send or discard that names
// the draft the operator read (its run_id and created_at) acts on that
// draft only. A newer draft waiting is 409 suggestion_replaced, nothing
// is sent or dropped, and the newer draft still waits; the same run
// drafting again (a run that waited at a question) is a newer draft too.
// A draft gone is 404 to a send and no change to a discard.
func TestSuggestionSeenIsTheOneSentOrDiscarded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "suggest")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 52, First: "Gus", Date: t0.Unix(), Text: "Open on Sunday?"})
	conv := h.conversations(ws, "").Conversations[0]
	draft := func(key, run, text string) messagingapi.Suggestion {
		t.Helper()
		s, err := ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: key, RunID: run, Messages: []messagingapi.OutboundMessage{chatText(text)}})
		if err != nil {
			t.Fatalf("draft %s: %v", key, err)
		}
		return s
	}
	seen := func(s messagingapi.Suggestion) *messagingapi.SuggestionSeen {
		return &messagingapi.SuggestionSeen{RunID: s.RunID, CreatedAt: s.CreatedAt}
	}
	waitingText := func() string {
		t.Helper()
		s, err := ops.Suggestion(ctx, ws, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return s.Messages[0].Text
	}

	read := draft("turn-1:1", "run-1", "We open at ten.")
	newer := draft("turn-1:2", "run-1", "Sundays we are closed.") // the same run, drafting again
	_, err := ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: seen(read)})
	wantErr(t, err, http.StatusConflict, "suggestion_replaced", "")
	_, err = ops.DiscardSuggestion(ctx, ws, conv.ID, seen(read))
	wantErr(t, err, http.StatusConflict, "suggestion_replaced", "")
	if n := h.sendMessages(); n != 0 || waitingText() != "Sundays we are closed." {
		t.Fatalf("after refusals: %d sends, waiting %q", n, waitingText())
	}

	sent, err := ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: seen(newer)})
	if err != nil || len(sent) != 1 || sent[0].Content != "Sundays we are closed." || h.sendMessages() != 1 {
		t.Fatalf("send of the draft read: %+v, %v", sent, err)
	}
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: seen(newer)})
	wantErr(t, err, http.StatusNotFound, "suggestion_not_found", "")

	third := draft("turn-2:1", "run-2", "Anything else?")
	if _, err := ops.DiscardSuggestion(ctx, ws, conv.ID, seen(third)); err != nil || waitingText() != "" {
		t.Fatalf("discard of the draft read: %v, waiting %q", err, waitingText())
	}
	if _, err := ops.DiscardSuggestion(ctx, ws, conv.ID, seen(third)); err != nil {
		t.Fatalf("discarding a draft gone again: %v", err)
	}

	// A mark that is no mark is refused in words, before anything is read.
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: &messagingapi.SuggestionSeen{RunID: "run-2", CreatedAt: "yesterday"}})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "seen.created_at")
	_, err = ops.DiscardSuggestion(ctx, ws, conv.ID, &messagingapi.SuggestionSeen{RunID: "r\x00", CreatedAt: third.CreatedAt})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "run_id")
	_, err = ops.DiscardSuggestion(ctx, ws, conv.ID, &messagingapi.SuggestionSeen{CreatedAt: third.CreatedAt})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "run_id")
	// A run_id of up to 128 characters names a draft (here none waits);
	// a longer one is refused.
	draft("turn-3:1", "run-3", "Bye.")
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: &messagingapi.SuggestionSeen{RunID: strings.Repeat("r", 128), CreatedAt: third.CreatedAt}})
	wantErr(t, err, http.StatusConflict, "suggestion_replaced", "")
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Seen: &messagingapi.SuggestionSeen{RunID: strings.Repeat("r", 129), CreatedAt: third.CreatedAt}})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "seen.run_id")
}
