package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/messaging/internal/app"
)

// SendKeys hold the Idempotency-Keys of the five send routes: one key
// space per workspace for all of them (a key used on one route is reused
// on another), in Redis, backed by messaging.idempotency_receipts. Two
// stores over it only because a response too large to keep names what it
// was differently: the message routes' by message_id, the comment routes'
// by comment_id.
type SendKeys struct {
	Messages *idempotency.Store
	Comments *idempotency.Store
}

// SendKeyScope is the Redis scope of the send routes' keys.
const SendKeyScope = "messaging.send"

// Ref fields of idempotency_response_unavailable on the send routes.
const (
	RefMessageID = "message_id"
	RefCommentID = "comment_id"
)

// sendAnswer is how a send route answers a result of type T: its success
// status and JSON, what the result names (the ref kept with its key), and
// the route's error mapping.
type sendAnswer[T any] struct {
	status int
	json   func(T) any
	ref    func(T) string
	toHTTP func(error) error
}

// render is the answer as sent and kept for repeats: the result's JSON, or
// the error's as EchoHandler writes it; but a send that reached the
// customer and then failed for a reason of ours (its messages could not be
// stored) is 500 internal_error saying so, rather than an answer inviting
// a retry (a repeat answers it again and sends nothing).
func (a sendAnswer[T]) render(result T, err error) (int, []byte, error) {
	if err == nil {
		body, merr := json.Marshal(a.json(result))
		return a.status, body, merr
	}
	e := errs.FromEcho(a.toHTTP(err))
	var delivered *app.DeliveredError
	if _, mapped := errs.As(a.toHTTP(err)); !mapped && errors.As(err, &delivered) {
		e = errs.New(http.StatusInternalServerError, errs.CodeInternal,
			"the send reached the customer but could not be recorded; it is not sent again for this Idempotency-Key")
	}
	body, merr := json.Marshal(e.Body())
	return e.Status, body, merr
}

// sendKey is the idempotency key a send runs under: the store of its key
// space, the workspace, the key ("" for a send without one) and the
// request's fingerprint, which a repeat must match.
type sendKey struct {
	keys        *idempotency.Store
	workspaceID string
	key         string
	fingerprint string
}

// sendKey is a /v1 send's: the Idempotency-Key of the workspace's
// request, fingerprinted by its method, path and raw body.
func (h *apiHandlers) sendKey(c echo.Context, keys *idempotency.Store, key string, raw []byte) sendKey {
	return sendKey{keys: keys, workspaceID: workspaceOf(c), key: key, fingerprint: idempotency.RequestFingerprint(c.Request(), raw)}
}

// serveSend runs a send route's work under its key k. Without a key the
// route answers as it always has. With one: a repeat is answered from the
// first response; a send refused before it reached the customer frees the
// key; one that reached the customer (a result, or a *app.DeliveredError)
// keeps its answer for the key, in Redis and, through the receipt the use
// case stores with the send, in PostgreSQL. The first answer is written as
// kept, so a repeat gets the same bytes.
func serveSend[T any](c echo.Context, log *zap.Logger, k sendKey, ans sendAnswer[T],
	send func(ctx context.Context, rr *app.ReceiptRequest[T]) (T, error)) error {
	ctx := c.Request().Context()
	if k.key == "" {
		result, err := send(ctx, nil)
		if err != nil {
			return ans.toHTTP(err)
		}
		return c.JSON(ans.status, ans.json(result))
	}
	if k.keys == nil {
		return errs.ServiceUnavailable("idempotency keys are not configured")
	}
	claim, answered, err := k.keys.Serve(ctx, c.Response(), k.workspaceID, k.key, k.fingerprint)
	if err != nil || answered {
		return err
	}
	result, err := send(ctx, &app.ReceiptRequest[T]{KeyHash: idempotency.KeyHash(k.key), Fingerprint: k.fingerprint, Render: ans.render})
	var delivered *app.DeliveredError
	if err != nil && !errors.As(err, &delivered) {
		claim.Refused(ctx)
		return ans.toHTTP(err)
	}
	status, body, rerr := ans.render(result, err)
	if rerr != nil {
		log.Error("send answer not encoded", zap.String("workspace_id", k.workspaceID), zap.Error(rerr))
		status, body, _ = ans.render(result, rerr)
	}
	claim.Answered(ctx, idempotency.Response{Status: status, Body: body, Ref: ans.ref(result)})
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}
