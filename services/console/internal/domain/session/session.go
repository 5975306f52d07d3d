// Package session is a signed-in operator's session: a random token held by
// the browser in a cookie, of which the console keeps only a SHA-256, with
// an idle expiry that slides with use up to an absolute cap.
package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"time"
)

// Session is one sign-in.
type Session struct {
	ID string
	// TokenHash is the SHA-256 of the token; the token itself is never
	// stored, so a read of the table signs nobody in.
	TokenHash  []byte
	OperatorID string
	CreatedAt  time.Time
	// ExpiresAt is when the session ends unless used before: the last use
	// plus the idle TTL, never past CreatedAt plus the absolute cap.
	ExpiresAt time.Time
}

// ErrNotFound is a token that names no live session: unknown, signed out
// or expired.
var ErrNotFound = errors.New("no such session")

// Policy is how long sessions last.
type Policy struct {
	// IdleTTL ends a session this long after its last use.
	IdleTTL time.Duration
	// MaxAge ends a session this long after sign-in, however busy.
	MaxAge time.Duration
}

// Start returns a new session for operatorID at now.
func (p Policy) Start(id string, tokenHash []byte, operatorID string, now time.Time) Session {
	s := Session{ID: id, TokenHash: tokenHash, OperatorID: operatorID, CreatedAt: now}
	s.ExpiresAt = p.expiry(s, now)
	return s
}

// Live reports whether s may still be used at now.
func (s Session) Live(now time.Time) bool { return now.Before(s.ExpiresAt) }

// Slide returns the expiry a use at now earns s, and whether it is worth
// writing: a use moves the expiry only when it gains at least a tenth of
// the idle TTL (and at most a minute), so a busy page does not write the
// row on every request.
func (p Policy) Slide(s Session, now time.Time) (time.Time, bool) {
	next := p.expiry(s, now)
	step := min(p.IdleTTL/10, time.Minute)
	return next, next.Sub(s.ExpiresAt) >= step && next.After(s.ExpiresAt)
}

func (p Policy) expiry(s Session, now time.Time) time.Time {
	idle := now.Add(p.IdleTTL)
	if limit := s.CreatedAt.Add(p.MaxAge); idle.After(limit) {
		return limit
	}
	return idle
}

// NewToken returns a fresh random token (256 bits, URL-safe base64).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is what the store keeps of a token.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// CSRFToken is the anti-forgery token of the session whose token is
// token: derived from it with HMAC, so it needs no storage, changes with
// every sign-in, and does not reveal the session token when a page shows
// it.
func CSRFToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("parley console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// SameToken compares two tokens in constant time; an empty one never
// matches.
func SameToken(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Store keeps sessions.
type Store interface {
	Create(ctx context.Context, s Session) error
	// ByTokenHash finds a session; ErrNotFound when there is none.
	ByTokenHash(ctx context.Context, hash []byte) (Session, error)
	// Extend moves a session's expiry.
	Extend(ctx context.Context, id string, expiresAt time.Time) error
	// Delete removes a session (signing out).
	Delete(ctx context.Context, id string) error
	// DeleteExpired removes every session expired at now and says how many.
	DeleteExpired(ctx context.Context, now time.Time) (int64, error)
}
