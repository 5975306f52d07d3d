package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
)

// TestStreamsCountAgainstTheSlotsAndTheDailyCap: a streamed invoke holds
// one of FLOW_CONCURRENCY's places while it runs and uses one of
// INVOKE_DAILY_CAP's runs ("streams included"); past either, a stream
// request is refused as JSON, as a JSON one is.
func TestStreamsCountAgainstTheSlotsAndTheDailyCap(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.Concurrency = 1; c.InvokeDailyCap = 2 })
	held := newHold(t)
	ws := uuid.NewString()
	slow := h.publish(ws, "", heldFlow(held))
	counter := h.publish(ws, "", counterFlow)
	jsonInvoke := `{"input": {}}`
	streamInvoke := `{"input": {}, "stream": true}`
	wantJSONError := func(step string, status int, hd http.Header, body []byte, wantStatus int, wantCode string) {
		t.Helper()
		if !strings.HasPrefix(hd.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: %d %v %s, want a JSON answer", step, status, hd, body)
		}
		wantError(t, status, body, wantStatus, wantCode)
	}

	reply := h.openStream(ws, slow, "streamed", streamInvoke)
	var got strings.Builder
	readUntil(t, reply, &got, "event: run_start")
	held.wait(t, 1)
	for _, body := range []string{jsonInvoke, streamInvoke} {
		status, hd, b := h.call(ws, full, http.MethodPost, "/v1/flows/"+counter+"/invoke", body, nil)
		wantJSONError("while a stream runs", status, hd, b, http.StatusTooManyRequests, "concurrency_limited")
	}
	held.letGo()
	readUntil(t, reply, &got, "event: end")
	if !strings.Contains(got.String(), `"status":"completed"`) {
		t.Fatalf("the held stream ended %q", got.String())
	}

	// The stream was the day's first run; one more fits, then none.
	status, hd, b := h.call(ws, full, http.MethodPost, "/v1/flows/"+counter+"/invoke", streamInvoke, nil)
	if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the day's second run, streamed: %d %v %s", status, hd, b)
	}
	for _, body := range []string{jsonInvoke, streamInvoke} {
		status, hd, b := h.call(ws, full, http.MethodPost, "/v1/flows/"+counter+"/invoke", body, nil)
		wantJSONError("after 2 streamed runs with INVOKE_DAILY_CAP=2", status, hd, b, http.StatusTooManyRequests, "daily_invoke_cap")
	}
	if n := h.runCount(ws); n != 2 {
		t.Fatalf("%d runs stored, want the 2 streamed", n)
	}
}
