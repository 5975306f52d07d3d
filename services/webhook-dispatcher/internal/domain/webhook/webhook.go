// Package webhook is a workspace's webhook: where its events go, the secret
// they are signed with, and the rule that pauses it after repeated failed
// deliveries (docs/webhooks.md "Pausing after 20 failed deliveries, and
// saving again"). Which URLs and network
// addresses a webhook may reach is pkg/safehttp's rule, shared with flow
// http nodes.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Status is the state of a webhook.
type Status string

// Webhook states. A paused webhook receives no deliveries until it is saved
// again.
const (
	StatusActive Status = "active"
	StatusPaused Status = "paused"
)

// SecretPrefix starts every signing secret, so a leaked one is recognisable.
const SecretPrefix = "whsec_"

// ErrNotFound means the workspace has no webhook.
var ErrNotFound = errors.New("webhook not found")

// Webhook is the one webhook of a workspace.
type Webhook struct {
	ID          string
	WorkspaceID string
	URL         string
	// Secret signs every delivery; it is shown only when issued.
	Secret string
	Status Status
	// ConsecutiveFailures counts failed deliveries since the last success
	// or save.
	ConsecutiveFailures int
	// PausedAt is when the pause rule paused the webhook; nil unless it
	// is paused.
	PausedAt  *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// New returns the webhook a save of url produces: active, with a fresh
// secret, no failures and not paused. Saving over an existing webhook keeps that
// webhook's id and creation time (the store's concern); everything else is
// this value.
func New(workspaceID, url, secret string, now time.Time) *Webhook {
	return &Webhook{
		ID:          uuid.NewString(),
		WorkspaceID: workspaceID,
		URL:         url,
		Secret:      secret,
		Status:      StatusActive,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
}

// Resave is saving the webhook again without changing its URL (the
// dashboard's "save again", parleyctl webhook resave): a new secret, active,
// failures and pause forgotten.
func (w *Webhook) Resave(secret string, now time.Time) {
	w.Secret = secret
	w.Status = StatusActive
	w.ConsecutiveFailures = 0
	w.PausedAt = nil
	w.UpdatedAt = now
}

// Active reports whether deliveries are sent.
func (w *Webhook) Active() bool { return w.Status == StatusActive }

// RecordDelivery counts one finished delivery: a success clears the failure
// count, a failure adds to it and pauses the webhook when it reaches
// pauseAfter, noting when (PausedAt). It reports whether the webhook
// changed (so the store can skip the write) and whether this failure
// paused it.
func (w *Webhook) RecordDelivery(delivered bool, pauseAfter int, now time.Time) (changed, paused bool) {
	if delivered {
		if w.ConsecutiveFailures == 0 {
			return false, false
		}
		w.ConsecutiveFailures = 0
		return true, false
	}
	w.ConsecutiveFailures++
	if w.Status == StatusActive && w.ConsecutiveFailures >= pauseAfter {
		w.Status = StatusPaused
		at := now
		w.PausedAt = &at
		w.UpdatedAt = now
		return true, true
	}
	return true, false
}

// NewSecret returns a fresh signing secret: the prefix and 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Store keeps webhooks, one per workspace.
type Store interface {
	// Get returns the workspace's webhook or ErrNotFound.
	Get(ctx context.Context, workspaceID string) (*Webhook, error)
	// Put saves w as the workspace's webhook. An existing webhook keeps its
	// id and created_at and takes every other field of w; Put returns what
	// was stored.
	Put(ctx context.Context, w *Webhook) (*Webhook, error)
	// Update applies fn to the workspace's webhook in one transaction and
	// stores the result; ErrNotFound when there is none.
	Update(ctx context.Context, workspaceID string, fn func(*Webhook) error) (*Webhook, error)
	// Delete removes the workspace's webhook; ErrNotFound when there is none.
	Delete(ctx context.Context, workspaceID string) error
}
