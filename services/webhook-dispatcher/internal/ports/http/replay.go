package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// Replay refusals: CodeWebhookPaused (409), the events would only be
// recorded as skipped again, save the webhook again first;
// CodeTestEventNotReplayable (409), a test event's delivery, never in the
// stream; CodeEventNotInStream (404), a delivery whose event the stream no
// longer holds (its retention passed).
const (
	CodeWebhookPaused          = "webhook_paused"
	CodeTestEventNotReplayable = "test_event_not_replayable"
	CodeEventNotInStream       = "event_not_in_stream"
)

// Replayer is what the replay route needs of the replay use cases.
type Replayer interface {
	StartReplay(ctx context.Context, req replay.Request, resume *replay.Cursor) (*replay.Replay, error)
	ReplayDelivery(ctx context.Context, workspaceID, deliveryID string) (*replay.Replay, error)
}

// startReplay is the operator's replay:
//
//	POST /admin/replays {workspace_id, since, until?, event?, resume?}
//	POST /admin/replays {workspace_id, delivery_id}
//	  -> 202 {"replay": {id, workspace_id, since, until, event, delivery_id, queued}, "next": null | {replay_id, from_seq, end_seq}}
//
// since and until are RFC 3339 times (until exclusive). The events are
// queued, not yet delivered, when it answers. "next" is set when one call
// could not queue every selected event; sending the same request with
// "resume": next queues the rest of the same replay.
//
// With delivery_id (and no since, until, event or resume) only that
// delivery's event is queued, under its id; since and until answer the
// window of the stream searched for it, and next is null.
func (h *handlers) startReplay(c echo.Context) error {
	var in dispatcherapi.ReplayRequest
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	if !ids.Valid(in.WorkspaceID) {
		return errs.InvalidID("workspace_id", "workspace")
	}
	if in.DeliveryID != nil {
		return h.replayDelivery(c, in)
	}
	req := replay.Request{WorkspaceID: in.WorkspaceID}
	if in.Since == "" {
		return errs.InvalidRequest("since is required (an RFC 3339 time)")
	}
	var err error
	if req.Since, err = time.Parse(time.RFC3339, in.Since); err != nil {
		return errs.InvalidRequest("since must be an RFC 3339 time, like 2026-11-22T10:00:00Z")
	}
	if in.Until != nil {
		until, err := time.Parse(time.RFC3339, *in.Until)
		if err != nil {
			return errs.InvalidRequest("until must be an RFC 3339 time, like 2026-11-22T11:00:00Z")
		}
		req.Until = &until
	}
	if in.Event != nil {
		req.Event = *in.Event
	}
	var resume *replay.Cursor
	if in.Resume != nil {
		if !ids.Valid(in.Resume.ReplayID) {
			return errs.InvalidID("resume.replay_id", "replay")
		}
		if in.Resume.FromSeq == 0 || in.Resume.EndSeq < in.Resume.FromSeq {
			return errs.InvalidRequest("resume.from_seq must be positive and at most resume.end_seq")
		}
		resume = &replay.Cursor{ReplayID: in.Resume.ReplayID, From: in.Resume.FromSeq, End: in.Resume.EndSeq}
	}

	out, err := h.replays.StartReplay(c.Request().Context(), req, resume)
	if err != nil {
		return replayError(err)
	}
	return c.JSON(http.StatusAccepted, toAPIReplay(out))
}

// replayDelivery is the replay of one delivery's event.
func (h *handlers) replayDelivery(c echo.Context, in dispatcherapi.ReplayRequest) error {
	if !ids.Valid(*in.DeliveryID) {
		return errs.InvalidID("delivery_id", "delivery")
	}
	if in.Since != "" || in.Until != nil || in.Event != nil || in.Resume != nil {
		return errs.InvalidRequest("delivery_id replays one delivery: give it without since, until, event or resume")
	}
	out, err := h.replays.ReplayDelivery(c.Request().Context(), in.WorkspaceID, *in.DeliveryID)
	if err != nil {
		return replayError(err)
	}
	return c.JSON(http.StatusAccepted, toAPIReplay(out))
}

func replayError(err error) error {
	var fe *replay.FieldError
	switch {
	case errors.As(err, &fe):
		return errs.InvalidRequest("%s", fe.Error())
	case errors.Is(err, replay.ErrWebhookPaused):
		return errs.New(http.StatusConflict, CodeWebhookPaused, err.Error())
	case errors.Is(err, replay.ErrTestEventNotReplayable):
		return errs.New(http.StatusConflict, CodeTestEventNotReplayable, err.Error())
	case errors.Is(err, replay.ErrEventNotInStream):
		return errs.NotFound(CodeEventNotInStream, err.Error())
	}
	return toHTTPError(err)
}
