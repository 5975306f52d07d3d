package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

// ErrBadCredentials is a sign-in whose email or password is wrong; which
// of the two is never said.
var ErrBadCredentials = errors.New("email or password is wrong")

// LimitedError is a sign-in refused unheard because its address or its
// account failed too often this minute.
type LimitedError struct {
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("too many failed sign-ins; retry in %s", e.RetryAfter)
}

// SignedIn is a new session and the token that opens it, which only the
// browser keeps.
type SignedIn struct {
	Operator operator.Operator
	Session  session.Session
	Token    string
}

// accountKey is how the limiter names an account: a hash of the email in
// compared form, so addresses do not sit in Redis and an unknown email is
// limited exactly like a known one.
func accountKey(email string) string {
	sum := sha256.Sum256([]byte(operator.NormalizeEmail(email)))
	return hex.EncodeToString(sum[:16])
}

// SignIn checks email and password and starts a session. An address or an
// account at its limit of failures is refused before the password is
// checked (LimitedError), whether the password is right or not. A failure
// is counted against both; an unknown email costs the same hashing work
// as a wrong password.
func (a *App) SignIn(ctx context.Context, email, password, address string) (SignedIn, error) {
	account := accountKey(email)
	wait, err := a.limiter.Wait(ctx, address, account)
	if err != nil {
		return SignedIn{}, fmt.Errorf("sign-in limits: %w", err)
	}
	if wait > 0 {
		return SignedIn{}, &LimitedError{RetryAfter: wait}
	}
	op, err := a.check(ctx, email, password)
	if errors.Is(err, ErrBadCredentials) {
		if ferr := a.limiter.Fail(ctx, address, account); ferr != nil {
			return SignedIn{}, fmt.Errorf("count failed sign-in: %w", ferr)
		}
		return SignedIn{}, err
	}
	if err != nil {
		return SignedIn{}, err
	}
	token, err := session.NewToken()
	if err != nil {
		return SignedIn{}, fmt.Errorf("session token: %w", err)
	}
	s := a.policy.Start(a.newID(), session.HashToken(token), op.ID, a.now())
	if err := a.sessions.Create(ctx, s); err != nil {
		return SignedIn{}, err
	}
	return SignedIn{Operator: op, Session: s, Token: token}, nil
}

func (a *App) check(ctx context.Context, email, password string) (operator.Operator, error) {
	if len(password) > 4*operator.MaxPasswordLen || len(email) > 1024 {
		// No stored password is this long; hashing it would only cost.
		a.hasher.VerifyNobody("")
		return operator.Operator{}, ErrBadCredentials
	}
	op, err := a.operators.ByEmail(ctx, operator.NormalizeEmail(email))
	if errors.Is(err, operator.ErrNotFound) {
		a.hasher.VerifyNobody(password)
		return operator.Operator{}, ErrBadCredentials
	}
	if err != nil {
		return operator.Operator{}, err
	}
	ok, err := a.hasher.Verify(password, op.PasswordHash)
	if err != nil {
		return operator.Operator{}, fmt.Errorf("operator %s: %w", op.ID, err)
	}
	if !ok {
		return operator.Operator{}, ErrBadCredentials
	}
	return op, nil
}

// Authenticate returns the operator and session a token opens, sliding the
// session's expiry. An expired session is deleted and refused
// (session.ErrNotFound), as is an unknown token.
func (a *App) Authenticate(ctx context.Context, token string) (operator.Operator, session.Session, error) {
	if token == "" {
		return operator.Operator{}, session.Session{}, session.ErrNotFound
	}
	s, err := a.sessions.ByTokenHash(ctx, session.HashToken(token))
	if err != nil {
		return operator.Operator{}, session.Session{}, err
	}
	now := a.now()
	if !s.Live(now) {
		if err := a.sessions.Delete(ctx, s.ID); err != nil {
			return operator.Operator{}, session.Session{}, err
		}
		return operator.Operator{}, session.Session{}, session.ErrNotFound
	}
	op, err := a.operators.ByID(ctx, s.OperatorID)
	if errors.Is(err, operator.ErrNotFound) {
		return operator.Operator{}, session.Session{}, session.ErrNotFound
	}
	if err != nil {
		return operator.Operator{}, session.Session{}, err
	}
	if next, worth := a.policy.Slide(s, now); worth {
		if err := a.sessions.Extend(ctx, s.ID, next); err != nil {
			return operator.Operator{}, session.Session{}, err
		}
		s.ExpiresAt = next
	}
	return op, s, nil
}

// SessionLive reports whether token still opens a live session, without
// sliding it: a stream that outlasts its request (the inbox's events)
// asks before each thing it sends, so it ends with its session (signed
// out, or expired) instead of outliving it.
func (a *App) SessionLive(ctx context.Context, token string) (bool, error) {
	if token == "" {
		return false, nil
	}
	s, err := a.sessions.ByTokenHash(ctx, session.HashToken(token))
	if errors.Is(err, session.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.Live(a.now()), nil
}

// SignOut ends the session token opens; an unknown token is already out.
func (a *App) SignOut(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	s, err := a.sessions.ByTokenHash(ctx, session.HashToken(token))
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return a.sessions.Delete(ctx, s.ID)
}

// PruneSessions deletes every expired session and says how many.
func (a *App) PruneSessions(ctx context.Context) (int64, error) {
	return a.sessions.DeleteExpired(ctx, a.now())
}
