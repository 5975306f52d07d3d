package adapters

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
)

// The invoke contract's state in Redis, shared by every instance: the
// workspaces' concurrent-run places, their runs of the day and the calls'
// Idempotency-Keys, on the platform's packages for each.

// RunSlots are the workspaces' concurrent-run places on pkg/ratelimit's
// leased slots.
type RunSlots struct {
	Slots *ratelimit.Slots
}

var _ app.SlotPool = RunSlots{}

// Take implements app.SlotPool.
func (s RunSlots) Take(ctx context.Context, workspaceID string, limit int) (app.Slot, error) {
	lease, err := s.Slots.Acquire(ctx, ratelimit.Slot{Name: "flows:runs:" + workspaceID, Limit: limit})
	var full *ratelimit.FullError
	switch {
	case errors.As(err, &full):
		return nil, app.ErrSlotsFull
	case err != nil:
		return nil, err
	}
	return lease, nil
}

// DailyCapCounter names the daily count of a workspace's runs.
const DailyCapCounter = "invoke"

// DailyRuns counts the workspaces' runs of the day on pkg/dailycap's
// counter (DailyCapCounter, reset at DAILY_RESET_TZ's midnight).
type DailyRuns struct {
	Counter *dailycap.Counter
}

var _ app.DailyCounter = DailyRuns{}

// Reserve implements app.DailyCounter.
func (d DailyRuns) Reserve(ctx context.Context, workspaceID string, limit int) (func(context.Context) error, bool, error) {
	r, ok, err := d.Counter.Reserve(ctx, workspaceID, limit)
	if err != nil || !ok {
		return nil, ok, err
	}
	return func(ctx context.Context) error { return d.Counter.Release(ctx, r) }, true, nil
}

// InvokeKeys are the invoke route's Idempotency-Keys on pkg/idempotency,
// whose backstop is the receipts stored with the runs (ReceiptBackstop).
type InvokeKeys struct {
	Store *idempotency.Store
}

var _ app.IdempotencyKeys = InvokeKeys{}

// Claim implements app.IdempotencyKeys.
func (k InvokeKeys) Claim(ctx context.Context, workspaceID, key, fingerprint string) (app.KeyClaim, *app.StoredAnswer, error) {
	claim, replay, err := k.Store.Decide(ctx, workspaceID, key, fingerprint)
	switch {
	case err != nil:
		return nil, nil, err
	case replay != nil:
		return nil, &app.StoredAnswer{Status: replay.Status, Body: replay.Body, RunID: replay.Ref}, nil
	}
	return keyClaim{claim: claim, hash: idempotency.KeyHash(key)}, nil, nil
}

// MaxAnswerBytes implements app.IdempotencyKeys.
func (InvokeKeys) MaxAnswerBytes() int { return idempotency.MaxStoredBody }

// keyClaim is a claimed key and its hash.
type keyClaim struct {
	claim *idempotency.Claim
	hash  string
}

func (c keyClaim) KeyHash() string             { return c.hash }
func (c keyClaim) Refused(ctx context.Context) { c.claim.Refused(ctx) }

func (c keyClaim) Answered(ctx context.Context, a app.StoredAnswer) {
	c.claim.Answered(ctx, idempotency.Response{Status: a.Status, Body: a.Body, Ref: a.RunID})
}
