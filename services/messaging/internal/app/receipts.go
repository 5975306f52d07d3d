package app

import (
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// ReceiptRequest asks a send made with an Idempotency-Key to store its
// answer with what the send stores, in the same transaction, so that a
// repeat of the request is answered from it and never reaches the customer
// again, even when Redis lost the key. T is the send's result.
type ReceiptRequest[T any] struct {
	// KeyHash stands for the idempotency key; Fingerprint for the request.
	KeyHash     string
	Fingerprint string
	// Render is the answer the caller gives for the send's result, or,
	// when err is not nil, for a send that failed after the customer
	// received part of it (err is the *DeliveredError the use case
	// returns, result what was delivered): its HTTP status and JSON body
	// (nil when too large to replay).
	Render func(result T, err error) (status int, body []byte, renderErr error)
}

// receipt renders the receipt of a keyed send of workspaceID; ref names
// what it produced. Nil without a request. A render that fails (it only
// encodes JSON) goes to the observer and leaves the send without a receipt
// rather than lose what was delivered; the key's Redis answer still holds.
func (rr *ReceiptRequest[T]) receipt(o Observer, workspaceID, ref string, result T, failed error) *receipt.Receipt {
	if rr == nil {
		return nil
	}
	status, body, err := rr.Render(result, failed)
	if err != nil {
		o.ReceiptNotRendered(workspaceID, err)
		return nil
	}
	return &receipt.Receipt{
		WorkspaceID: workspaceID, KeyHash: rr.KeyHash, Fingerprint: rr.Fingerprint,
		Status: status, Body: body, Ref: ref,
	}
}

// DeliveredError is a send that failed after the customer received (part
// of) it: a text refused after its image went out, or a delivered message
// that could not be stored. Unlike every other error of a send, it is not
// a refusal: a repeat must not send again, so an idempotency key keeps
// this error as its answer.
type DeliveredError struct {
	Err error
}

func (e *DeliveredError) Error() string { return e.Err.Error() }
func (e *DeliveredError) Unwrap() error { return e.Err }
