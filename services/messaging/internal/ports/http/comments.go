package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
)

// Codes of the comment routes (docs/comments.md "Its limits"; the reading
// behind private_reply_expired is in docs/readings.md "Sending and
// comments").
const (
	CodeCommentNotFound             = "comment_not_found"
	CodePrivateReplyUsed            = "private_reply_used"
	CodePrivateReplyExpired         = "private_reply_expired"
	CodePrivateReplyCommenterWindow = "private_reply_commenter_window"
	CodePrivateReplyDailyCap        = "private_reply_daily_cap"
)

// GET /v1/comments/:id: the comment and its status. :id is comment.id of
// the comment.received event (the platform's comment id).
func (h *apiHandlers) getComment(c echo.Context) error {
	cm, err := h.app.GetComment(c.Request().Context(), workspaceOf(c), c.Param("id"))
	if err != nil {
		return commentHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.CommentAnswer{Comment: toAPIComment(cm)})
}

// POST /v1/comments/:id/reply {text}: a public reply under the comment.
// 200 {"ok": true, "external_id": the reply's platform id, "comment": C}.
func (h *apiHandlers) replyToComment(c echo.Context) error {
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	text, raw, err := decodeCommentReply(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	ans := sendAnswer[app.PublicReply]{
		status: http.StatusOK,
		json: func(r app.PublicReply) any {
			return messagingapi.PublicReplySent{OK: true, ExternalID: r.ExternalID, Comment: toAPIComment(r.Comment)}
		},
		ref:    func(app.PublicReply) string { return id },
		toHTTP: commentHTTP,
	}
	return serveSend(c, h.log, h.sendKey(c, h.sendKeys.Comments, key, raw), ans,
		func(ctx context.Context, rr *app.ReceiptRequest[app.PublicReply]) (app.PublicReply, error) {
			return h.app.ReplyToComment(ctx, workspaceOf(c), id, text, rr)
		})
}

// POST /v1/comments/:id/private-reply {text}: a DM to the commenter.
// 200 {"ok": true, "recipient_id", "external_id": the DM's platform id,
// "conversation_id": the commenter's conversation, "comment": C}.
func (h *apiHandlers) privateReplyToComment(c echo.Context) error {
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	text, raw, err := decodeCommentReply(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	ans := sendAnswer[app.PrivateReply]{
		status: http.StatusOK,
		json: func(r app.PrivateReply) any {
			return messagingapi.PrivateReplySent{
				OK: true, RecipientID: r.RecipientID, ExternalID: r.ExternalID,
				ConversationID: r.Message.ConversationID, Comment: toAPIComment(r.Comment),
			}
		},
		ref:    func(app.PrivateReply) string { return id },
		toHTTP: commentHTTP,
	}
	return serveSend(c, h.log, h.sendKey(c, h.sendKeys.Comments, key, raw), ans,
		func(ctx context.Context, rr *app.ReceiptRequest[app.PrivateReply]) (app.PrivateReply, error) {
			return h.app.SendPrivateReply(ctx, workspaceOf(c), id, text, rr)
		})
}

// decodeCommentReply reads {text}, and returns the body raw, as the
// idempotency key's fingerprint takes it. A tag field is refused before
// anything else, as on every send.
func decodeCommentReply(c echo.Context) (string, []byte, error) {
	raw, err := readBody(c)
	if err != nil {
		return "", nil, err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if _, ok := fields["tag"]; ok {
			return "", nil, errTagUnsupported
		}
	}
	var req messagingapi.CommentReply
	if err := httpx.DecodeJSON(bytes.NewReader(raw), &req); err != nil {
		return "", nil, err
	}
	if req.Text == nil {
		return "", nil, errs.InvalidRequest("text is required")
	}
	return *req.Text, raw, nil
}

// commentHTTP maps the comment rules' errors to their codes; the rest as
// every send's. Neither 429 carries Retry-After (docs/comments.md): the
// page's cap lifts at midnight, the commenter's after days.
func commentHTTP(err error) error {
	switch {
	case errors.Is(err, comment.ErrNotFound):
		return errs.NotFound(CodeCommentNotFound, "no comment with this id in this workspace")
	case errors.Is(err, comment.ErrPrivateReplyUsed):
		return errs.New(http.StatusConflict, CodePrivateReplyUsed, "this comment already has its private reply; nothing was sent")
	case errors.Is(err, comment.ErrPrivateReplyExpired):
		return errs.New(http.StatusConflict, CodePrivateReplyExpired, "the comment is older than the private-reply window; nothing was sent")
	case errors.Is(err, comment.ErrCommenterWindow):
		return errs.New(http.StatusTooManyRequests, CodePrivateReplyCommenterWindow, "the commenter already received a private reply from this page within the private-reply window; nothing was sent")
	case errors.Is(err, comment.ErrDailyCap):
		return errs.New(http.StatusTooManyRequests, CodePrivateReplyDailyCap, "the page reached its daily private-reply cap, which resets at midnight (DAILY_RESET_TZ); nothing was sent")
	}
	return toHTTP(err)
}
