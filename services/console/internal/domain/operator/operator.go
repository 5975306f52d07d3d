// Package operator is the console's people: operators, who sign in with an
// email and a password, and the rules for creating them. An operator with
// a workspace sees that workspace only; one without is a platform operator
// and sees them all.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Operator is one person who may sign in to the console.
type Operator struct {
	ID    string
	Email string
	// WorkspaceID is the one workspace the operator sees; empty for a
	// platform operator.
	WorkspaceID  string
	PasswordHash string
	CreatedAt    time.Time
}

// Platform reports whether the operator sees every workspace.
func (o Operator) Platform() bool { return o.WorkspaceID == "" }

// Sees reports whether the operator may see workspace id.
func (o Operator) Sees(workspaceID string) bool {
	return o.Platform() || o.WorkspaceID == workspaceID
}

// Password lengths, in characters. The upper bound keeps one sign-in's
// hashing work bounded by the KDF's cost, not by what a client sends.
const (
	MinPasswordLen = 12
	MaxPasswordLen = 256
	maxEmailLen    = 254
)

// ErrExists is an operator whose email (in any case) is already taken.
var ErrExists = errors.New("an operator with this email exists")

// ErrNotFound is an email that matches no operator.
var ErrNotFound = errors.New("no such operator")

// InvalidError is a field of a new operator that breaks a rule.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// NormalizeEmail is the form an email is compared in: trimmed and lower
// case, so Ann@Example.com and ann@example.com are one operator.
func NormalizeEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// ValidateEmail checks that email is one plain address (no display name,
// no list).
func ValidateEmail(email string) error {
	if email == "" {
		return &InvalidError{Field: "email", Reason: "is required"}
	}
	if len(email) > maxEmailLen {
		return &InvalidError{Field: "email", Reason: fmt.Sprintf("is longer than %d characters", maxEmailLen)}
	}
	// An address is shown in the console and in the inbox's sender line:
	// a character that is not visible there (a right-to-left override, a
	// zero-width space) could make one read as another.
	if i := strings.IndexFunc(email, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) }); i >= 0 {
		return &InvalidError{Field: "email", Reason: fmt.Sprintf("has a character that is not shown (%U) at byte %d", []rune(email[i:])[0], i)}
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email || !strings.Contains(email[strings.LastIndexByte(email, '@')+1:], ".") {
		return &InvalidError{Field: "email", Reason: fmt.Sprintf("%q is not an email address", email)}
	}
	return nil
}

// ValidatePassword checks a new operator's password.
func ValidatePassword(password string) error {
	n := utf8.RuneCountInString(password)
	switch {
	case n < MinPasswordLen:
		return &InvalidError{Field: "password", Reason: fmt.Sprintf("must be at least %d characters", MinPasswordLen)}
	case n > MaxPasswordLen:
		return &InvalidError{Field: "password", Reason: fmt.Sprintf("must be at most %d characters", MaxPasswordLen)}
	}
	return nil
}

// Store keeps operators.
type Store interface {
	// Create stores o; ErrExists when its email is taken in any case.
	Create(ctx context.Context, o Operator) error
	// ByEmail finds the operator whose email equals email in any case;
	// ErrNotFound when there is none.
	ByEmail(ctx context.Context, email string) (Operator, error)
	// ByID finds an operator; ErrNotFound when there is none.
	ByID(ctx context.Context, id string) (Operator, error)
}
