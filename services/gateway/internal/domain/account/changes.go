package account

import (
	"context"
	"errors"
)

// ChangeToken is a value shared by every gateway instance that a change to
// a credential (a key revoked, a workspace's plan, modules, features or
// rate changed) replaces, so that an instance holding a credential read
// under an earlier value knows to read it again.
type ChangeToken interface {
	// Current returns the token now; never the same value twice across a
	// Rotate or a loss of the stored token ("" only if it could not be
	// kept at all, and "" matches nothing).
	Current(ctx context.Context) (string, error)
	// Rotate replaces the token with a new random value.
	Rotate(ctx context.Context) error
}

// ErrChangesUnavailable wraps a ChangeToken's error: without the token no
// cached credential can be trusted, and a change cannot be announced.
var ErrChangesUnavailable = errors.New("accounts change token unavailable")
