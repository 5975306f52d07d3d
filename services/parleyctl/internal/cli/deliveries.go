package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/parleyhq/parley/pkg/rpc"
)

// replayCursor continues a replay the dispatcher could not queue in one
// call; it is sent back as is.
type replayCursor struct {
	ReplayID string `json:"replay_id"`
	FromSeq  uint64 `json:"from_seq"`
	EndSeq   uint64 `json:"end_seq"`
}

type replayAnswer struct {
	Replay map[string]any `json:"replay"`
	Next   *replayCursor  `json:"next"`
}

// maxReplayCalls bounds the continuations of one replay; each call queues
// up to the dispatcher's per-call share, so this is far beyond the events
// the stream keeps.
const maxReplayCalls = 10_000

// deliveriesReplay asks the dispatcher to send a workspace's events again
// (ARCHITECTURE.md §6a): the events the EVENTS stream stored in
// [--since, --until), optionally of one kind, are queued for delivery under
// their original ids. It prints {"replay": {id, workspace_id, since, until,
// event, queued}} once every selected event is queued; the deliveries
// themselves follow, and show in the delivery log.
func deliveriesReplay(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("deliveries replay")
	wsID := f.String("workspace", "", "workspace id")
	since := f.String("since", "", "replay events stored at or after this RFC 3339 time")
	until := f.String("until", "", "and before this RFC 3339 time (default: up to the last event)")
	event := f.String("event", "", "only events of this kind: message.received, postback.received or comment.received")
	if err := f.parse(args, "workspace", "since"); err != nil {
		return err
	}
	from, err := time.Parse(time.RFC3339, *since)
	if err != nil {
		return usagef("deliveries replay: --since %q is not an RFC 3339 time like 2026-11-22T10:00:00Z", *since)
	}
	body := map[string]any{"workspace_id": *wsID, "since": *since}
	if f.set("until") {
		to, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return usagef("deliveries replay: --until %q is not an RFC 3339 time like 2026-11-22T11:00:00Z", *until)
		}
		if !to.After(from) {
			return usagef("deliveries replay: --until must be after --since")
		}
		body["until"] = *until
	}
	if f.set("event") {
		body["event"] = *event
	}
	// The workspace is the gateway's: a typo fails here, as not found,
	// rather than as a workspace without a webhook.
	if err := c.call.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodGet, "/admin/workspaces/"+url.PathEscape(*wsID), nil, nil); err != nil {
		return err
	}
	var result map[string]any
	queued := 0.0
	for range maxReplayCalls {
		var out replayAnswer
		if err := c.call.CallJSON(ctx, rpc.ServiceDispatcher, rpc.EndpointAdmin, "", http.MethodPost, "/admin/replays", body, &out); err != nil {
			return err
		}
		if result == nil {
			result = out.Replay
		}
		n, _ := out.Replay["queued"].(float64)
		queued += n
		if out.Next == nil {
			result["queued"] = queued
			return c.print(map[string]any{"replay": result})
		}
		body["resume"] = out.Next
	}
	return fmt.Errorf("deliveries replay: still queueing after %d calls", maxReplayCalls)
}
