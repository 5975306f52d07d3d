package idempotency

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
)

// The handler side of the contract: every route that takes an
// Idempotency-Key reads it, answers repeats and keeps or frees the key
// through these, so that the routes cannot drift apart.
//
//	key, err := idempotency.KeyFromRequest(r) // before anything else
//	...read and check the request; a refusal here never touches the key...
//	var claim *idempotency.Claim
//	if key != "" {
//		var answered bool
//		claim, answered, err = store.Serve(ctx, w, workspaceID, key, idempotency.RequestFingerprint(r, body))
//		if err != nil || answered { return err }
//	}
//	...refused before the work: claim.Refused(ctx) (nil-safe)...
//	...done: claim.Answered(ctx, response) (nil-safe), then answer it...

// KeyFromRequest returns the request's Idempotency-Key, "" when it carries
// none. A header that is there but empty, given more than once, or not a
// valid key (CheckKey) is a *errs.Error 400 idempotency_key_invalid: a
// client that meant to send a key must not get a request that is not
// idempotent.
func KeyFromRequest(r *http.Request) (string, error) {
	values := r.Header.Values(Header)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", errs.Newf(http.StatusBadRequest, CodeKeyInvalid, "%s is given %d times; give it once", Header, len(values))
	}
	key := values[0]
	if key == "" {
		return "", errs.Newf(http.StatusBadRequest, CodeKeyInvalid, "%s is empty; leave the header out to send without one", Header)
	}
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// RequestFingerprint is Fingerprint of r's method and path with its raw
// body.
func RequestFingerprint(r *http.Request, body []byte) string {
	return Fingerprint(r.Method, r.URL.Path, body)
}

// Serve is Begin for an HTTP handler. A repeat of a finished request is
// answered here: its stored response is written to w (answered is true).
// A key in progress, reused or whose response was not kept is returned as
// its *errs.Error (Result.Err), and a key that could not be decided (Redis
// or the backstop down) as 503 service_unavailable, logged. Otherwise the
// claim is the caller's: Refused when it refuses the request before its
// work starts, Answered when the work is done.
func (s *Store) Serve(ctx context.Context, w http.ResponseWriter, workspaceID, key, fingerprint string) (claim *Claim, answered bool, err error) {
	claim, replay, err := s.Decide(ctx, workspaceID, key, fingerprint)
	if replay != nil {
		return nil, true, WriteReplay(w, replay)
	}
	return claim, false, err
}

// Decide is Serve for a caller that answers a repeat itself, such as a
// use case whose port renders: a repeat of a finished request gets its
// stored response as replay (to answer with WriteReplay), and every other
// outcome is Serve's.
func (s *Store) Decide(ctx context.Context, workspaceID, key, fingerprint string) (claim *Claim, replay *Response, err error) {
	res, err := s.Begin(ctx, workspaceID, key, fingerprint)
	if err != nil {
		s.log().Warn("request refused: idempotency keys unavailable", zap.String("workspace_id", workspaceID), zap.Error(err))
		return nil, nil, errs.ServiceUnavailable("idempotency keys are unavailable; try again shortly")
	}
	switch res.State {
	case Claimed:
		if res.TookOver {
			s.log().Warn("idempotency key taken over from a request that ran too long", zap.String("workspace_id", workspaceID))
		}
		return res.Claim, nil, nil
	case Replay:
		return nil, res.Stored, nil
	}
	return nil, nil, res.Err()
}

// Refused frees the key of a request refused before its work started, so
// that a repeat may do it. It runs even when ctx has ended (the client may
// be why), within cleanupTimeout; a failure is logged, and the key then
// stays taken until StuckAfter. A nil claim (a request without a key) does
// nothing.
func (c *Claim) Refused(ctx context.Context) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.Release(ctx); err != nil {
		c.store.log().Warn("idempotency key not released", zap.Error(err))
	}
}

// Answered stores resp as the answer to the key's repeats, even when ctx
// has ended: the work was done. A failure is logged; the backstop's record,
// written with the work, then answers the key. A nil claim does nothing.
func (c *Claim) Answered(ctx context.Context, resp Response) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.Complete(ctx, resp); err != nil {
		c.store.log().Warn("idempotent answer not kept in Redis", zap.Error(err))
	}
}

func (s *Store) log() *zap.Logger {
	if s.opts.Log == nil {
		return zap.NewNop()
	}
	return s.opts.Log
}
