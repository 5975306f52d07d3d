package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
)

// deliveriesReplay asks the dispatcher to send a workspace's events again
// (docs/operations.md "Replaying deliveries"): the events the EVENTS
// stream stored in [--since, --until), optionally of one kind, or with
// --delivery instead the one event of that delivery, are queued for
// delivery under their original ids. It prints {"replay": {id,
// workspace_id, since, until, event, delivery_id, queued}} (delivery_id
// null but for one delivery) once every selected event is queued; the
// deliveries themselves follow, and show in the delivery log.
func deliveriesReplay(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("deliveries replay")
	wsID := f.String("workspace", "", "workspace id")
	since := f.String("since", "", "replay events stored at or after this RFC 3339 time")
	until := f.String("until", "", "and before this RFC 3339 time (default: up to the last event)")
	event := f.String("event", "", "only events of this kind: message.received, postback.received or comment.received")
	deliveryID := f.String("delivery", "", "replay only this delivery's event (an id from the delivery log), instead of --since")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	req, err := replayRequest(f, *wsID, *since, *until, *event, *deliveryID)
	if err != nil {
		return err
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

// replayRequest is the replay the flags ask for: of one delivery, or of a
// time range; exactly one of --delivery and --since.
func replayRequest(f *flags, wsID, since, until, event, deliveryID string) (dispatcherapi.ReplayRequest, error) {
	switch {
	case f.set("delivery") && (f.set("since") || f.set("until") || f.set("event")):
		return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: give --delivery or --since (with --until and --event), not both")
	case f.set("delivery"):
		if deliveryID == "" {
			return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: --delivery needs a delivery id")
		}
		return dispatcherapi.ReplayRequest{WorkspaceID: wsID, DeliveryID: &deliveryID}, nil
	case since == "":
		return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: --since or --delivery is required")
	}
	from, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: --since %q is not an RFC 3339 time like 2026-11-22T10:00:00Z", since)
	}
	// The bounds go as typed; the dispatcher reads them as times.
	req := dispatcherapi.ReplayRequest{WorkspaceID: wsID, Since: since}
	if f.set("until") {
		to, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: --until %q is not an RFC 3339 time like 2026-11-22T11:00:00Z", until)
		}
		if !to.After(from) {
			return dispatcherapi.ReplayRequest{}, usagef("deliveries replay: --until must be after --since")
		}
		req.Until = &until
	}
	if f.set("event") {
		req.Event = &event
	}
	return req, nil
}
