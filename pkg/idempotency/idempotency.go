// Package idempotency implements the Idempotency-Key contract of Parley's
// mutating routes (first the flow-runner's POST /v1/flows/:id/invoke, then
// the message send routes): a request repeated with the same key within
// IDEMPOTENCY_TTL of the first gets the first response back instead of
// doing its work again.
//
// Redis holds the keys, so every instance of a service sees the same
// claims. PostgreSQL is the backstop: the service writes a Record in the
// same transaction as its work and hands this package a Backstop that finds
// it, so work that committed never reruns, even when Redis lost the key
// (flushed, failed over) or the process died between its commit and the
// Redis write. The package never talks to PostgreSQL itself.
//
// A route uses it through KeyFromRequest, Store.Serve (or Store.Decide,
// when a use case behind the route answers) and the claim's Refused and
// Answered (http.go), which read the header, answer repeats
// and keep or free the key the same way on every route; Begin, Complete
// and Release are what they are built on.
//
// # Redis layout
//
// One hash per key, keys.Key("idem", scope, workspaceID, KeyHash(key)),
// created by the first request and expiring IDEMPOTENCY_TTL after it (no
// later write moves the expiry). Its fields:
//
//	state       "running" while the claim's work runs, then "done"
//	fp          the request's Fingerprint
//	owner       the claim's random token (running only)
//	claimed_at  when the claim was taken, ms on Redis's clock (running only)
//	status      the response's HTTP status (done only)
//	body        the response's JSON, empty when too_large (done only)
//	ref         what the request produced, e.g. a run id (done only)
//	too_large   "1" when the body was over MaxStoredBody (done only)
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/redisx"
)

const (
	// Header is the request header carrying the key.
	Header = "Idempotency-Key"
	// ReplayedHeader marks a response that is a replay of the first one.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxKeyLength is the longest key accepted, in characters (all ASCII).
	MaxKeyLength = 128
	// MaxStoredBody is the largest response body kept for replays; a larger
	// response is not stored, its Ref is.
	MaxStoredBody = 16 << 10

	CodeKeyInvalid          = "idempotency_key_invalid"
	CodeKeyReuse            = "idempotency_key_reuse"
	CodeInProgress          = "idempotency_in_progress"
	CodeResponseUnavailable = "idempotency_response_unavailable"
)

// The documented defaults of IDEMPOTENCY_TTL and IDEMPOTENCY_STUCK_AFTER
// (docs/api.md "Idempotency keys"), used when Options leaves them zero.
const (
	defaultTTL        = 24 * time.Hour
	defaultStuckAfter = 5 * time.Minute
)

// cleanupTimeout bounds the release of a claim Begin took but cannot hand
// over. The release runs even when the request's context has ended (that
// may be why the backstop failed), so that the key is not left occupied.
const cleanupTimeout = 5 * time.Second

// ErrClaimLost is a Complete or Release by a claim that is no longer its
// caller's: it was taken over as stuck, the backstop's record replaced it,
// it expired, or it was already completed or released. Nothing was
// written; the caller only logs it.
var ErrClaimLost = errors.New("idempotency: claim no longer held")

// CheckKey returns nil for a valid key, else a *errs.Error 400
// idempotency_key_invalid whose message says why: too long (its length and
// the limit) or a character outside printable ASCII (its position, from 1).
// An empty key passes: KeyFromRequest tells a header left out (no key)
// from one given empty (400), and Begin refuses an empty key.
func CheckKey(key string) error {
	// Characters first, so that the length reported below is a count of
	// characters, all of them one byte.
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7E {
			what := fmt.Sprintf("byte 0x%02X", c)
			if c >= utf8.RuneSelf {
				r, _ := utf8.DecodeRuneInString(key[i:])
				what = fmt.Sprintf("%U", r)
			}
			return errs.Newf(http.StatusBadRequest, CodeKeyInvalid,
				"%s has a character outside printable ASCII at position %d (%s)", Header, i+1, what)
		}
	}
	if len(key) > MaxKeyLength {
		return errs.Newf(http.StatusBadRequest, CodeKeyInvalid,
			"%s is %d characters long; the limit is %d", Header, len(key), MaxKeyLength)
	}
	return nil
}

// Fingerprint identifies a request by its method, path and raw body bytes:
// hex SHA-256 over the three, each prefixed by its length so that no two
// different requests hash the same input ("/a"+"b" is not "/ab"+""). The
// body is not normalized: one differing only in whitespace or key order is
// a different request (docs/api.md "Idempotency keys").
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// KeyHash is how a key is stored: hex SHA-256 of the key, so keys (which
// clients may fill with anything) are never stored themselves. It is
// scoped to its workspace by what is stored beside it: the workspace id in
// the Redis key, the workspace column in a backstop's table. Backstops
// store and look up this hash.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Response is what a request answered.
type Response struct {
	Status int
	// Body is the JSON answered; dropped when over MaxStoredBody.
	Body []byte
	// Ref names what the request produced (a run id), kept always, so a
	// response too large to keep can still be pointed at.
	Ref string
	// TooLarge is set on a stored response whose Body was over
	// MaxStoredBody.
	TooLarge bool
}

// stored is resp as it is kept: its body dropped when over MaxStoredBody.
func (resp Response) stored() Response {
	if resp.TooLarge || len(resp.Body) > MaxStoredBody {
		resp.Body, resp.TooLarge = nil, true
	}
	return resp
}

// Record is what a Backstop holds for one key: the fingerprint and the
// response of its completed request.
type Record struct {
	Fingerprint string
	Response    Response
}

// Backstop finds the durable record of a key's completed request, written
// by the service in the same transaction as its work, by workspace and
// KeyHash. ok is false when there is none, or when it is older than the
// TTL (the key is free again).
type Backstop interface {
	Find(ctx context.Context, workspaceID, keyHash string) (rec Record, ok bool, err error)
}

// Options configures a Store.
type Options struct {
	// TTL is IDEMPOTENCY_TTL: how long a key is kept from its first
	// request. Zero means 24h.
	TTL time.Duration
	// StuckAfter is IDEMPOTENCY_STUCK_AFTER: a running claim older than
	// this is taken to belong to a process that died, and is taken over.
	// Zero means 5m.
	StuckAfter time.Duration
	// RefField is the error body's field naming Response.Ref on 409
	// idempotency_response_unavailable, e.g. "run_id" (empty: no field).
	RefField string
	// Backstop may be nil: then Redis alone decides.
	Backstop Backstop
	// Log hears what Serve, Decide, Refused and Answered cannot tell their
	// caller (nil: nothing is logged).
	Log *zap.Logger
}

// Store keeps one scope's keys (a route family: "invoke", "send").
type Store struct {
	rdb   redis.Scripter
	keys  redisx.Keys
	scope string
	opts  Options
}

// New returns a store whose keys are keys.Key("idem", scope, workspaceID,
// KeyHash(key)).
func New(rdb redis.Scripter, keys redisx.Keys, scope string, opts Options) *Store {
	if opts.TTL <= 0 {
		opts.TTL = defaultTTL
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = defaultStuckAfter
	}
	return &Store{rdb: rdb, keys: keys, scope: scope, opts: opts}
}

// key is the Redis key of a workspace's key hash.
func (s *Store) key(workspaceID, keyHash string) string {
	return s.keys.Key("idem", s.scope, workspaceID, keyHash)
}

// State is what Begin found a key to hold.
type State int

const (
	// Claimed: the caller owns the key. It does the work, then calls
	// Claim.Complete, or Claim.Release when it refused the request before
	// the work started.
	Claimed State = iota + 1
	// Replay: Stored holds the first response (Status, Body) to answer
	// again with WriteReplay.
	Replay
	// InProgress: the first request still runs; answer Err (409
	// idempotency_in_progress).
	InProgress
	// Reused: the key was used for a different request; answer Err (422
	// idempotency_key_reuse).
	Reused
	// Unavailable: the first response was over MaxStoredBody; answer Err
	// (409 idempotency_response_unavailable naming Stored.Ref).
	Unavailable
)

// String names the state, for logs and test failures.
func (st State) String() string {
	switch st {
	case Claimed:
		return "claimed"
	case Replay:
		return "replay"
	case InProgress:
		return "in_progress"
	case Reused:
		return "reused"
	case Unavailable:
		return "unavailable"
	}
	return "state(" + strconv.Itoa(int(st)) + ")"
}

// Result is Begin's answer.
type Result struct {
	State State
	// Claim is the caller's when State is Claimed.
	Claim *Claim
	// TookOver is set when Claimed by taking over a claim older than
	// StuckAfter: a new run starts in place of one whose process died.
	TookOver bool
	// Stored is the first response when State is Replay or Unavailable.
	Stored *Response

	refField string
}

// Err is the *errs.Error to answer for InProgress (409), Reused (422) and
// Unavailable (409, with the store's RefField naming Stored.Ref), nil
// otherwise.
func (r Result) Err() error {
	switch r.State {
	case InProgress:
		return errs.Newf(http.StatusConflict, CodeInProgress,
			"a request with this %s is still in progress; retry once it has finished", Header)
	case Reused:
		return errs.Newf(http.StatusUnprocessableEntity, CodeKeyReuse,
			"this %s was already used for a different request (method, path or body)", Header)
	case Unavailable:
		e := errs.Newf(http.StatusConflict, CodeResponseUnavailable,
			"the first response to this %s was over %d bytes and was not kept", Header, MaxStoredBody)
		if r.refField != "" && r.Stored != nil {
			e = e.WithExtra(r.refField, r.Stored.Ref)
		}
		return e
	}
	return nil
}

// Claim is a caller's ownership of a key while its request's work runs.
type Claim struct {
	store *Store
	key   string
	owner string
}

// What the begin script found; see beginScript.
const (
	beginClaimed    = 1
	beginTookOver   = 2
	beginInProgress = 3
	beginReused     = 4
	beginDone       = 5
)

// beginScript claims KEYS[1] for fingerprint ARGV[1] and owner ARGV[2], or
// tells what it holds; ARGV[3] is the TTL and ARGV[4] StuckAfter, in ms.
// An absent key becomes a running claim expiring TTL from now. A key of a
// different fingerprint is reused, whatever its state. A running claim
// older than StuckAfter gets the new owner and a new claimed_at; its expiry
// stays TTL from the first request. It returns {beginClaimed},
// {beginTookOver}, {beginInProgress}, {beginReused} or {beginDone, status,
// body, ref, too_large}. One script, so that of any number of concurrent
// requests exactly one claims.
var beginScript = redis.NewScript(redisx.LuaNowMS + `
local fp, owner, ttl, stuck = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HMGET', KEYS[1], 'state', 'fp', 'claimed_at', 'status', 'body', 'ref', 'too_large')
if not h[1] then
  redis.call('HSET', KEYS[1], 'state', 'running', 'fp', fp, 'owner', owner, 'claimed_at', now)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1}
end
if h[2] ~= fp then
  return {4}
end
if h[1] == 'done' then
  return {5, tonumber(h[4] or '0'), h[5] or '', h[6] or '', tonumber(h[7] or '0')}
end
if now - tonumber(h[3] or '0') > stuck then
  redis.call('HSET', KEYS[1], 'owner', owner, 'claimed_at', now)
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
  return {2}
end
return {3}
`)

// completeScript stores the response ARGV[2..5] (status, body, ref,
// too_large) in KEYS[1] if it is still a running claim of owner ARGV[1],
// leaving its expiry alone. It returns 1, or 0 when the claim was lost.
var completeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'running' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'status', ARGV[2], 'body', ARGV[3], 'ref', ARGV[4], 'too_large', ARGV[5])
redis.call('HDEL', KEYS[1], 'owner', 'claimed_at')
return 1
`)

// releaseScript deletes KEYS[1] if it is still a running claim of owner
// ARGV[1]. It returns 1, or 0 when the claim was lost.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'running' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)

// adoptScript makes KEYS[1] the backstop's record: done with fingerprint
// ARGV[1] and response ARGV[2..5], whatever claim it held, since the
// durable record wins. The key keeps its expiry (PEXPIRETIME, Redis 7);
// one that Redis lost gets a whole TTL (ARGV[6] ms), the record not saying
// when its request came.
var adoptScript = redis.NewScript(`
local expires_at = redis.call('PEXPIRETIME', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'fp', ARGV[1], 'status', ARGV[2], 'body', ARGV[3], 'ref', ARGV[4], 'too_large', ARGV[5])
if expires_at > 0 then
  redis.call('PEXPIREAT', KEYS[1], expires_at)
else
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
return 1
`)

// Begin claims (workspaceID, key) for a request with this fingerprint, or
// tells what the key holds. When Redis says Claimed or InProgress and the
// store has a Backstop, the backstop is asked too: a record there is
// stored in Redis as done and answered from (Replay, Unavailable or
// Reused), so committed work is never redone. An error means the answer
// could not be decided (Redis or the backstop is down: answer 503); the key
// is then not occupied by this call.
func (s *Store) Begin(ctx context.Context, workspaceID, key, fingerprint string) (Result, error) {
	if err := CheckKey(key); err != nil {
		return Result{}, err
	}
	if key == "" || workspaceID == "" || fingerprint == "" {
		return Result{}, errors.New("idempotency: begin needs a workspace, a key and a fingerprint")
	}
	keyHash := KeyHash(key)
	claim := &Claim{store: s, key: s.key(workspaceID, keyHash), owner: rand.Text()}
	reply, err := beginScript.Run(ctx, s.rdb, []string{claim.key},
		fingerprint, claim.owner, s.opts.TTL.Milliseconds(), s.opts.StuckAfter.Milliseconds()).Slice()
	if err != nil {
		return Result{}, fmt.Errorf("idempotency: begin: %w", err)
	}
	res, err := s.decodeBegin(reply, claim)
	if err != nil {
		return Result{}, err
	}
	if s.opts.Backstop != nil && (res.State == Claimed || res.State == InProgress) {
		return s.consultBackstop(ctx, workspaceID, keyHash, fingerprint, res)
	}
	return res, nil
}

// decodeBegin turns beginScript's reply into a Result.
func (s *Store) decodeBegin(reply []any, claim *Claim) (Result, error) {
	code, ok := replyInt(reply, 0)
	if !ok {
		return Result{}, fmt.Errorf("idempotency: begin: unexpected reply %v", reply)
	}
	res := Result{refField: s.opts.RefField}
	switch code {
	case beginClaimed, beginTookOver:
		res.State, res.Claim, res.TookOver = Claimed, claim, code == beginTookOver
	case beginInProgress:
		res.State = InProgress
	case beginReused:
		res.State = Reused
	case beginDone:
		status, okStatus := replyInt(reply, 1)
		body, okBody := replyString(reply, 2)
		ref, okRef := replyString(reply, 3)
		tooLarge, okLarge := replyInt(reply, 4)
		if !okStatus || !okBody || !okRef || !okLarge {
			return Result{}, fmt.Errorf("idempotency: begin: unexpected reply %v", reply)
		}
		stored := Response{Status: int(status), Ref: ref, TooLarge: tooLarge == 1}
		if body != "" {
			stored.Body = []byte(body)
		}
		res = s.done(stored)
	default:
		return Result{}, fmt.Errorf("idempotency: begin: unexpected reply %v", reply)
	}
	return res, nil
}

// done is the Result of a completed request of the same fingerprint:
// Replay, or Unavailable when its body was not kept.
func (s *Store) done(stored Response) Result {
	if stored.TooLarge {
		return Result{State: Unavailable, Stored: &stored, refField: s.opts.RefField}
	}
	return Result{State: Replay, Stored: &stored, refField: s.opts.RefField}
}

// consultBackstop asks the backstop about a key Redis says is claimed (by
// this request, res.Claim, or by another) and answers from its record if
// it has one.
func (s *Store) consultBackstop(ctx context.Context, workspaceID, keyHash, fingerprint string, res Result) (Result, error) {
	rec, ok, err := s.opts.Backstop.Find(ctx, workspaceID, keyHash)
	if err != nil {
		return Result{}, res.abandon(ctx, fmt.Errorf("idempotency: backstop: %w", err))
	}
	if !ok {
		return res, nil
	}
	stored := rec.Response.stored()
	key := s.key(workspaceID, keyHash)
	if err := adoptScript.Run(ctx, s.rdb, []string{key}, rec.Fingerprint, stored.Status,
		stored.Body, stored.Ref, boolArg(stored.TooLarge), s.opts.TTL.Milliseconds()).Err(); err != nil {
		return Result{}, res.abandon(ctx, fmt.Errorf("idempotency: store the backstop's record: %w", err))
	}
	if rec.Fingerprint != fingerprint {
		return Result{State: Reused, refField: s.opts.RefField}, nil
	}
	return s.done(stored), nil
}

// abandon releases the claim Begin took, if it took one, before Begin
// fails with cause: the caller answers an error and never does the work,
// so the key must not stay occupied until StuckAfter.
func (r Result) abandon(ctx context.Context, cause error) error {
	if r.Claim == nil {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.Claim.Release(ctx); err != nil && !errors.Is(err, ErrClaimLost) {
		return fmt.Errorf("%w (and releasing its claim: %w)", cause, err)
	}
	return cause
}

// Complete stores resp for replays, if the claim is still this caller's:
// its Body is dropped (TooLarge set) when over MaxStoredBody, its Ref kept.
// The key's expiry stays TTL from the first request. ErrClaimLost means
// nothing was written (the claim was taken over as stuck, or replaced by
// the backstop's record).
func (c *Claim) Complete(ctx context.Context, resp Response) error {
	if resp.Status < 100 || resp.Status > 599 {
		return fmt.Errorf("idempotency: complete: status %d is not an HTTP status", resp.Status)
	}
	stored := resp.stored()
	held, err := completeScript.Run(ctx, c.store.rdb, []string{c.key}, c.owner,
		stored.Status, stored.Body, stored.Ref, boolArg(stored.TooLarge)).Int()
	if err != nil {
		return fmt.Errorf("idempotency: complete: %w", err)
	}
	if held != 1 {
		return ErrClaimLost
	}
	return nil
}

// Release frees the key, if the claim is still this caller's: the request
// was refused before its work started, so a repeat may run it. ErrClaimLost
// means nothing was freed.
func (c *Claim) Release(ctx context.Context) error {
	held, err := releaseScript.Run(ctx, c.store.rdb, []string{c.key}, c.owner).Int()
	if err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	if held != 1 {
		return ErrClaimLost
	}
	return nil
}

// WriteReplay answers a replay: the stored JSON body with its status,
// Content-Type application/json and ReplayedHeader: true. A response whose
// body was not kept (TooLarge) cannot be replayed; answer Result.Err.
func WriteReplay(w http.ResponseWriter, resp *Response) error {
	if resp == nil || resp.TooLarge {
		return errors.New("idempotency: no stored response to replay")
	}
	if resp.Status < 100 || resp.Status > 599 {
		return fmt.Errorf("idempotency: replay: status %d is not an HTTP status", resp.Status)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(resp.Status)
	if len(resp.Body) == 0 {
		return nil
	}
	if _, err := w.Write(resp.Body); err != nil {
		return fmt.Errorf("idempotency: replay: %w", err)
	}
	return nil
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

func replyInt(reply []any, i int) (int64, bool) {
	if i >= len(reply) {
		return 0, false
	}
	n, ok := reply[i].(int64)
	return n, ok
}

func replyString(reply []any, i int) (string, bool) {
	if i >= len(reply) {
		return "", false
	}
	s, ok := reply[i].(string)
	return s, ok
}
