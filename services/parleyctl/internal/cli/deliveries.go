package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
)

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
	// The bounds go as typed; the dispatcher reads them as times.
	req := adminclient.ReplayRequest{WorkspaceID: *wsID, Since: *since}
	if f.set("until") {
		to, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return usagef("deliveries replay: --until %q is not an RFC 3339 time like 2026-11-22T11:00:00Z", *until)
		}
		if !to.After(from) {
			return usagef("deliveries replay: --until must be after --since")
		}
		req.Until = *until
	}
	if f.set("event") {
		req.Event = *event
	}
	// The workspace is the gateway's: a typo fails here, as not found,
	// rather than as a workspace without a webhook.
	if _, err := c.api.GetWorkspace(ctx, *wsID); err != nil {
		return err
	}
	replay, err := c.api.Replay(ctx, req)
	if errors.Is(err, adminclient.ErrReplayUnfinished) {
		return fmt.Errorf("deliveries replay: %w", err)
	}
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"replay": replay})
}
