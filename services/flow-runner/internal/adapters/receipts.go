package adapters

import (
	"context"

	"github.com/parleyhq/parley/pkg/idempotency"
)

// ReceiptBackstop is the durable side of the invoke route's idempotency
// keys: the receipts stored with their runs (RunStore.Create and
// Continue), which answer a key when Redis no longer holds it.
type ReceiptBackstop struct {
	Runs *RunStore
}

var _ idempotency.Backstop = ReceiptBackstop{}

// Find implements idempotency.Backstop.
func (b ReceiptBackstop) Find(ctx context.Context, workspaceID, keyHash string) (idempotency.Record, bool, error) {
	r, err := b.Runs.FindReceipt(ctx, workspaceID, keyHash)
	if err != nil || r == nil {
		return idempotency.Record{}, false, err
	}
	return idempotency.Record{
		Fingerprint: r.Fingerprint,
		Response:    idempotency.Response{Status: r.Status, Body: r.Body, Ref: r.RunID, TooLarge: r.Body == nil},
	}, true, nil
}
