package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

const (
	scope = "invoke"
	ws    = "ws_1"
	key   = "order-7f3a"
)

var (
	fpA = idempotency.Fingerprint(http.MethodPost, "/v1/flows/f1/invoke", []byte(`{"input":{"n":1}}`))
	fpB = idempotency.Fingerprint(http.MethodPost, "/v1/flows/f1/invoke", []byte(`{"input":{"n":2}}`))
)

// backstop stands in for the caller's database table of completed
// requests, written in the same transaction as their work.
type backstop struct {
	mu    sync.Mutex
	recs  map[string]idempotency.Record
	err   error
	finds int
}

func newBackstop() *backstop { return &backstop{recs: map[string]idempotency.Record{}} }

func (b *backstop) Find(_ context.Context, workspaceID, keyHash string) (idempotency.Record, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finds++
	if b.err != nil {
		return idempotency.Record{}, false, b.err
	}
	rec, ok := b.recs[workspaceID+"/"+keyHash]
	return rec, ok, nil
}

// commit is the caller's transaction writing the record of key's request.
func (b *backstop) commit(workspaceID, key string, rec idempotency.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs[workspaceID+"/"+idempotency.KeyHash(key)] = rec
}

func (b *backstop) failWith(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

func (b *backstop) findCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finds
}

type fixture struct {
	store *idempotency.Store
	rdb   *redis.Client
	keys  redisx.Keys
}

func newFixture(t *testing.T, opts idempotency.Options) fixture {
	t.Helper()
	env := testenv.New(t)
	rdb := env.Redis(t)
	keys := redisx.Keys{Prefix: env.RedisPrefix}
	if opts.RefField == "" {
		opts.RefField = "run_id"
	}
	return fixture{store: idempotency.New(rdb, keys, scope, opts), rdb: rdb, keys: keys}
}

// redisKey is the documented Redis key of a workspace's key.
func (f fixture) redisKey(workspaceID, key string) string {
	return f.keys.Key("idem", scope, workspaceID, idempotency.KeyHash(key))
}

func (f fixture) begin(t *testing.T, workspaceID, key, fp string) idempotency.Result {
	t.Helper()
	res, err := f.store.Begin(context.Background(), workspaceID, key, fp)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return res
}

func (f fixture) claim(t *testing.T, workspaceID, key, fp string) *idempotency.Claim {
	t.Helper()
	res := f.begin(t, workspaceID, key, fp)
	if res.State != idempotency.Claimed || res.Claim == nil {
		t.Fatalf("begin = %v, want claimed", res.State)
	}
	return res.Claim
}

func wantState(t *testing.T, res idempotency.Result, want idempotency.State) {
	t.Helper()
	if res.State != want {
		t.Fatalf("state = %v, want %v", res.State, want)
	}
}

// wantErr checks that err is the *errs.Error of status and code.
func wantErr(t *testing.T, err error, status int, code string) *errs.Error {
	t.Helper()
	e, ok := errs.As(err)
	if !ok {
		t.Fatalf("error = %v, want *errs.Error %d %s", err, status, code)
	}
	if e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("error = %d %s %q, want %d %s with a message", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

func TestCheckKey(t *testing.T) {
	t.Parallel()
	printable := make([]byte, 0, 0x7F-0x20)
	for c := byte(0x20); c <= 0x7E; c++ {
		printable = append(printable, c)
	}
	tests := []struct {
		name string
		give string
		want []string // in the message; nil for a valid key
	}{
		{"empty is no key, the caller's case", "", nil},
		{"128 characters", strings.Repeat("k", 128), nil},
		{"every printable ASCII character", string(printable), nil},
		{"129 characters", strings.Repeat("k", 129), []string{"129", "128"}},
		{"a tab", "ab\tc", []string{"position 3"}},
		{"a newline", "abc\n", []string{"position 4"}},
		{"a non-ASCII rune", "key-é", []string{"position 5", "U+00E9"}},
		{"DEL", "\x7fkey", []string{"position 1", "0x7F"}},
		{"a bad character in a long key", strings.Repeat("k", 200) + "\x00", []string{"position 201"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := idempotency.CheckKey(tt.give)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckKey = %v, want nil", err)
				}
				return
			}
			e := wantErr(t, err, http.StatusBadRequest, idempotency.CodeKeyInvalid)
			for _, w := range tt.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not say %q", e.Message, w)
				}
			}
		})
	}
}

func TestFingerprintCoversMethodPathAndRawBody(t *testing.T) {
	t.Parallel()
	base := idempotency.Fingerprint("POST", "/v1/flows/f1/invoke", []byte(`{"a":1,"b":2}`))
	if len(base) != 64 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("fingerprint %q is not hex SHA-256", base)
	}
	if again := idempotency.Fingerprint("POST", "/v1/flows/f1/invoke", []byte(`{"a":1,"b":2}`)); again != base {
		t.Fatalf("same request, different fingerprints: %s, %s", base, again)
	}
	tests := []struct {
		name         string
		method, path string
		body         string
	}{
		{"whitespace", "POST", "/v1/flows/f1/invoke", `{"a": 1, "b": 2}`},
		{"key order", "POST", "/v1/flows/f1/invoke", `{"b":2,"a":1}`},
		{"method", "PUT", "/v1/flows/f1/invoke", `{"a":1,"b":2}`},
		{"path", "POST", "/v1/flows/f2/invoke", `{"a":1,"b":2}`},
		{"path and body split elsewhere", "POST", "/v1/flows/f1/invoke{", `"a":1,"b":2}`},
		{"method and path split elsewhere", "POST/", "v1/flows/f1/invoke", `{"a":1,"b":2}`},
	}
	for _, tt := range tests {
		if got := idempotency.Fingerprint(tt.method, tt.path, []byte(tt.body)); got == base {
			t.Errorf("%s: fingerprint unchanged", tt.name)
		}
	}
}

func TestKeyHashIsHexSHA256(t *testing.T) {
	t.Parallel()
	// sha256("abc")
	if got, want := idempotency.KeyHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("KeyHash = %s, want %s", got, want)
	}
}

// TestCompletedRequestIsReplayed: the same key and request get the first
// response back, a failed one too, and the work is not claimed again.
func TestCompletedRequestIsReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		resp idempotency.Response
	}{
		{"succeeded", idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_1","status":"succeeded"}`), Ref: "run_1"}},
		{"failed run", idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_2","status":"failed"}`), Ref: "run_2"}},
		{"error answer", idempotency.Response{Status: 502, Body: []byte(`{"code":"platform_error","message":"x"}`)}},
		{"exactly MaxStoredBody", idempotency.Response{Status: 201, Body: sized(idempotency.MaxStoredBody), Ref: "run_3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := f.claim(t, ws, tt.name, fpA)
			if err := c.Complete(ctx, tt.resp); err != nil {
				t.Fatalf("complete: %v", err)
			}
			for range 2 {
				res := f.begin(t, ws, tt.name, fpA)
				wantState(t, res, idempotency.Replay)
				if res.Claim != nil || res.Err() != nil {
					t.Fatalf("replay carries claim %v, error %v", res.Claim, res.Err())
				}
				got := res.Stored
				if got.Status != tt.resp.Status || string(got.Body) != string(tt.resp.Body) || got.Ref != tt.resp.Ref || got.TooLarge {
					t.Fatalf("stored = %d %q %q %v, want %d %q %q", got.Status, trim(got.Body), got.Ref, got.TooLarge,
						tt.resp.Status, trim(tt.resp.Body), tt.resp.Ref)
				}
			}
			// The claim was spent by Complete.
			if err := c.Complete(ctx, tt.resp); !errors.Is(err, idempotency.ErrClaimLost) {
				t.Fatalf("second complete = %v, want ErrClaimLost", err)
			}
			if err := c.Release(ctx); !errors.Is(err, idempotency.ErrClaimLost) {
				t.Fatalf("release after complete = %v, want ErrClaimLost", err)
			}
			wantState(t, f.begin(t, ws, tt.name, fpA), idempotency.Replay)
		})
	}
}

func TestDifferentRequestIsReuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	c := f.claim(t, ws, key, fpA)

	res := f.begin(t, ws, key, fpB)
	wantState(t, res, idempotency.Reused)
	wantErr(t, res.Err(), http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)

	if err := c.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	wantState(t, f.begin(t, ws, key, fpB), idempotency.Reused)
	wantState(t, f.begin(t, ws, key, fpA), idempotency.Replay)
}

func TestRepeatWhileRunningIsInProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	f.claim(t, ws, key, fpA)
	res := f.begin(t, ws, key, fpA)
	wantState(t, res, idempotency.InProgress)
	if res.Claim != nil || res.TookOver {
		t.Fatalf("in progress carries claim %v, took over %v", res.Claim, res.TookOver)
	}
	wantErr(t, res.Err(), http.StatusConflict, idempotency.CodeInProgress)
}

// TestStuckClaimIsTakenOver: a claim older than StuckAfter belongs to a
// process that died; a repeat takes it over and runs the work, and the
// late original owner can neither complete nor release it.
func TestStuckClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	stuck := 300 * time.Millisecond
	f := newFixture(t, idempotency.Options{StuckAfter: stuck})
	ctx := context.Background()
	start := time.Now()
	late := f.claim(t, ws, key, fpA)
	ttlBefore := f.rdb.PExpireTime(ctx, f.redisKey(ws, key)).Val()

	var taken idempotency.Result
	wait.For(t, 5*time.Second, "takeover of the stuck claim", func() error {
		res := f.begin(t, ws, key, fpA)
		if res.State == idempotency.Claimed {
			taken = res
			return nil
		}
		if res.State != idempotency.InProgress {
			t.Fatalf("before takeover: state %v, want in progress", res.State)
		}
		return errors.New(res.State.String())
	})
	if elapsed := time.Since(start); elapsed < stuck {
		t.Fatalf("taken over after %s, before StuckAfter %s", elapsed, stuck)
	}
	if !taken.TookOver || taken.Claim == nil {
		t.Fatalf("takeover result = %+v, want TookOver with a claim", taken)
	}
	if ttlAfter := f.rdb.PExpireTime(ctx, f.redisKey(ws, key)).Val(); ttlAfter != ttlBefore {
		t.Fatalf("takeover moved the expiry from %v to %v", ttlBefore, ttlAfter)
	}
	// The new run holds the key now.
	wantState(t, f.begin(t, ws, key, fpA), idempotency.InProgress)
	wantState(t, f.begin(t, ws, key, fpB), idempotency.Reused)

	lateResp := idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_old"}`), Ref: "run_old"}
	if err := late.Complete(ctx, lateResp); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late complete = %v, want ErrClaimLost", err)
	}
	if err := late.Release(ctx); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late release = %v, want ErrClaimLost", err)
	}
	wantState(t, f.begin(t, ws, key, fpA), idempotency.InProgress)

	if err := taken.Claim.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_new"}`), Ref: "run_new"}); err != nil {
		t.Fatalf("complete by the new owner: %v", err)
	}
	if err := late.Complete(ctx, lateResp); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late complete after the new owner's = %v, want ErrClaimLost", err)
	}
	res := f.begin(t, ws, key, fpA)
	wantState(t, res, idempotency.Replay)
	if res.Stored.Ref != "run_new" || string(res.Stored.Body) != `{"run_id":"run_new"}` {
		t.Fatalf("replay = %q %q, want the new owner's response", res.Stored.Ref, res.Stored.Body)
	}
}

func TestReleaseFreesTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	c := f.claim(t, ws, key, fpA)
	if err := c.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := f.rdb.Exists(ctx, f.redisKey(ws, key)).Val(); n != 0 {
		t.Fatal("the released key is still in Redis")
	}
	// A refused request does not occupy the key, not even for another body.
	next := f.claim(t, ws, key, fpB)
	if err := c.Release(ctx); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("second release = %v, want ErrClaimLost", err)
	}
	wantState(t, f.begin(t, ws, key, fpB), idempotency.InProgress)
	if err := next.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

// TestOversizedResponseIsUnavailable: a response over 16 KB is not kept;
// a replay is 409 naming what the request produced, and the key stays used.
func TestOversizedResponseIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	c := f.claim(t, ws, key, fpA)
	if err := c.Complete(ctx, idempotency.Response{Status: 200, Body: sized(idempotency.MaxStoredBody + 1), Ref: "run_big"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if n := f.rdb.HStrLen(ctx, f.redisKey(ws, key), "body").Val(); n != 0 {
		t.Fatalf("%d bytes of the oversized body were stored", n)
	}
	for range 2 {
		res := f.begin(t, ws, key, fpA)
		wantState(t, res, idempotency.Unavailable)
		if res.Stored == nil || res.Stored.Ref != "run_big" || !res.Stored.TooLarge || res.Stored.Body != nil || res.Stored.Status != 200 {
			t.Fatalf("stored = %+v, want ref run_big, too large, no body", res.Stored)
		}
		e := wantErr(t, res.Err(), http.StatusConflict, idempotency.CodeResponseUnavailable)
		if body := e.Body(); body["run_id"] != "run_big" {
			t.Fatalf("error body = %v, want run_id run_big", body)
		}
		if err := idempotency.WriteReplay(httptest.NewRecorder(), res.Stored); err == nil {
			t.Fatal("WriteReplay of a response that was not kept succeeded")
		}
	}
	wantState(t, f.begin(t, ws, key, fpB), idempotency.Reused)
}

// TestKeyExpiresTTLAfterTheFirstRequest: once the TTL from the first
// request has passed, the key is free; completing it did not extend it.
func TestKeyExpiresTTLAfterTheFirstRequest(t *testing.T) {
	t.Parallel()
	// Long enough that the half left after the wait below outlasts a
	// Complete and a read on a loaded machine.
	ttl := 2 * time.Second
	f := newFixture(t, idempotency.Options{TTL: ttl})
	ctx := context.Background()
	rkey := f.redisKey(ws, key)

	start := time.Now()
	c := f.claim(t, ws, key, fpA)
	expiresAt := f.rdb.PExpireTime(ctx, rkey).Val()
	if left := f.rdb.PTTL(ctx, rkey).Val(); left <= 0 || left > ttl {
		t.Fatalf("claimed key's ttl = %v, want up to %v", left, ttl)
	}
	// The work takes a while: a Complete that set a fresh TTL would move
	// the expiry by that much.
	wait.Until(t, 10*time.Second, "the work to take a while", func() bool {
		return f.rdb.PTTL(ctx, rkey).Val() <= ttl/2
	})
	if err := c.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if got := f.rdb.PExpireTime(ctx, rkey).Val(); got != expiresAt {
		t.Fatalf("complete moved the expiry from %v to %v", expiresAt, got)
	}
	wantState(t, f.begin(t, ws, key, fpA), idempotency.Replay)

	wait.For(t, 10*time.Second, "the key to expire", func() error {
		res := f.begin(t, ws, key, fpB)
		if res.State == idempotency.Claimed {
			return nil
		}
		return errors.New(res.State.String())
	})
	if elapsed := time.Since(start); elapsed < ttl-50*time.Millisecond {
		t.Fatalf("key free after %s, before its TTL %s", elapsed, ttl)
	}
}

// TestBackstopRecordWinsWhenRedisLostTheKey: committed work is replayed
// from the backstop when Redis no longer has its key, and the record is
// put back into Redis.
func TestBackstopRecordWinsWhenRedisLostTheKey(t *testing.T) {
	t.Parallel()
	bs := newBackstop()
	f := newFixture(t, idempotency.Options{Backstop: bs})
	ctx := context.Background()
	rkey := f.redisKey(ws, key)

	c := f.claim(t, ws, key, fpA)
	resp := idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_1","status":"succeeded"}`), Ref: "run_1"}
	bs.commit(ws, key, idempotency.Record{Fingerprint: fpA, Response: resp})
	if err := c.Complete(ctx, resp); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := f.rdb.Del(ctx, rkey).Err(); err != nil {
		t.Fatal(err)
	}

	res := f.begin(t, ws, key, fpA)
	wantState(t, res, idempotency.Replay)
	if res.Stored.Status != 200 || string(res.Stored.Body) != string(resp.Body) || res.Stored.Ref != "run_1" {
		t.Fatalf("replay = %+v, want the backstop's response", res.Stored)
	}
	if left := f.rdb.PTTL(ctx, rkey).Val(); left <= 0 {
		t.Fatalf("restored key's ttl = %v, want an expiry", left)
	}
	// Redis answers again without the backstop.
	finds := bs.findCount()
	wantState(t, f.begin(t, ws, key, fpA), idempotency.Replay)
	if bs.findCount() != finds {
		t.Fatal("a replay Redis could answer asked the backstop")
	}

	if err := f.rdb.Del(ctx, rkey).Err(); err != nil {
		t.Fatal(err)
	}
	res = f.begin(t, ws, key, fpB)
	wantState(t, res, idempotency.Reused)
	wantErr(t, res.Err(), http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)
	wantState(t, f.begin(t, ws, key, fpB), idempotency.Reused)
	wantState(t, f.begin(t, ws, key, fpA), idempotency.Replay)
}

// TestBackstopRecordOfAnOversizedResponse: a record whose body is over
// MaxStoredBody answers Unavailable with its Ref.
func TestBackstopRecordOfAnOversizedResponse(t *testing.T) {
	t.Parallel()
	bs := newBackstop()
	f := newFixture(t, idempotency.Options{Backstop: bs})
	bs.commit(ws, key, idempotency.Record{Fingerprint: fpA,
		Response: idempotency.Response{Status: 200, Body: sized(idempotency.MaxStoredBody + 1), Ref: "run_big"}})
	for range 2 {
		res := f.begin(t, ws, key, fpA)
		wantState(t, res, idempotency.Unavailable)
		e := wantErr(t, res.Err(), http.StatusConflict, idempotency.CodeResponseUnavailable)
		if e.Body()["run_id"] != "run_big" {
			t.Fatalf("error body = %v, want run_id run_big", e.Body())
		}
	}
}

// TestBackstopRecordEndsAClaimWhoseProcessDied: the process committed and
// died before writing Redis; a repeat finds the running claim, then the
// record, and replays it.
func TestBackstopRecordEndsAClaimWhoseProcessDied(t *testing.T) {
	t.Parallel()
	bs := newBackstop()
	f := newFixture(t, idempotency.Options{Backstop: bs})
	ctx := context.Background()

	rkey := f.redisKey(ws, key)
	dead := f.claim(t, ws, key, fpA)
	expiresAt := f.rdb.PExpireTime(ctx, rkey).Val()
	wantState(t, f.begin(t, ws, key, fpA), idempotency.InProgress)
	resp := idempotency.Response{Status: 200, Body: []byte(`{"run_id":"run_1"}`), Ref: "run_1"}
	bs.commit(ws, key, idempotency.Record{Fingerprint: fpA, Response: resp})
	// Time passes before the repeat, so that a fresh TTL would show.
	wait.Until(t, 5*time.Second, "time to pass", func() bool {
		return f.rdb.PTTL(ctx, rkey).Val() < 24*time.Hour-20*time.Millisecond
	})

	res := f.begin(t, ws, key, fpA)
	wantState(t, res, idempotency.Replay)
	if string(res.Stored.Body) != string(resp.Body) {
		t.Fatalf("replay body = %q, want %q", res.Stored.Body, resp.Body)
	}
	if got := f.rdb.PExpireTime(ctx, rkey).Val(); got != expiresAt {
		t.Fatalf("storing the record moved the expiry from %v to %v", expiresAt, got)
	}
	// The record replaced the claim.
	if err := dead.Complete(ctx, idempotency.Response{Status: 500, Body: []byte(`{}`)}); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("complete of the replaced claim = %v, want ErrClaimLost", err)
	}
	finds := bs.findCount()
	wantState(t, f.begin(t, ws, key, fpA), idempotency.Replay)
	if bs.findCount() != finds {
		t.Fatal("a replay Redis could answer asked the backstop")
	}
}

// TestBackstopErrorLeavesTheKeyFree: when the backstop cannot be asked,
// Begin fails and releases the claim it took, so the retry is not refused
// as in progress.
func TestBackstopErrorLeavesTheKeyFree(t *testing.T) {
	t.Parallel()
	bs := newBackstop()
	f := newFixture(t, idempotency.Options{Backstop: bs})
	ctx := context.Background()
	down := errors.New("database down")
	bs.failWith(down)

	res, err := f.store.Begin(ctx, ws, key, fpA)
	if !errors.Is(err, down) {
		t.Fatalf("begin = %v, %v; want the backstop's error", res.State, err)
	}
	if res.Claim != nil {
		t.Fatal("a failed begin handed out a claim")
	}
	if n := f.rdb.Exists(ctx, f.redisKey(ws, key)).Val(); n != 0 {
		t.Fatal("a failed begin left its claim in Redis")
	}

	bs.failWith(nil)
	c := f.claim(t, ws, key, fpA)

	// A repeat that finds the claim running cannot tell either; the claim
	// it found is not its to release.
	bs.failWith(down)
	if _, err := f.store.Begin(ctx, ws, key, fpA); !errors.Is(err, down) {
		t.Fatalf("begin of a running key = %v; want the backstop's error", err)
	}
	bs.failWith(nil)
	wantState(t, f.begin(t, ws, key, fpA), idempotency.InProgress)
	if err := c.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

// TestConcurrentBeginsClaimOnce: of 20 simultaneous repeats, exactly one
// runs the work.
func TestConcurrentBeginsClaimOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		backstop idempotency.Backstop
	}{
		{"redis alone", nil},
		{"with a backstop", newBackstop()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, idempotency.Options{Backstop: tt.backstop})
			const n = 20
			var (
				wg     sync.WaitGroup
				start  = make(chan struct{})
				states = make([]idempotency.State, n)
				errc   = make(chan error, n)
			)
			for i := range n {
				wg.Go(func() {
					<-start
					res, err := f.store.Begin(context.Background(), ws, key, fpA)
					if err != nil {
						errc <- err
						return
					}
					states[i] = res.State
				})
			}
			close(start)
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatalf("begin: %v", err)
			}
			count := map[idempotency.State]int{}
			for _, st := range states {
				count[st]++
			}
			if count[idempotency.Claimed] != 1 || count[idempotency.InProgress] != n-1 {
				t.Fatalf("states = %v, want 1 claimed and %d in progress", count, n-1)
			}
		})
	}
}

func TestKeysArePerWorkspace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	c1 := f.claim(t, "ws_1", key, fpA)
	c2 := f.claim(t, "ws_2", key, fpB)
	for _, w := range []string{"ws_1", "ws_2"} {
		if n := f.rdb.Exists(ctx, f.redisKey(w, key)).Val(); n != 1 {
			t.Fatalf("no key %s", f.redisKey(w, key))
		}
	}
	if err := c1.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(`{"w":1}`)}); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.begin(t, "ws_1", key, fpA), idempotency.Replay)
	wantState(t, f.begin(t, "ws_2", key, fpB), idempotency.InProgress)
	if err := c2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, f.begin(t, "ws_1", key, fpA), idempotency.Replay)
}

func TestBeginRefusesAnInvalidKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	_, err := f.store.Begin(context.Background(), ws, strings.Repeat("k", 129), fpA)
	wantErr(t, err, http.StatusBadRequest, idempotency.CodeKeyInvalid)
}

func TestErrIsNilWhenThereIsNothingToRefuse(t *testing.T) {
	t.Parallel()
	for _, st := range []idempotency.State{idempotency.Claimed, idempotency.Replay} {
		if err := (idempotency.Result{State: st}).Err(); err != nil {
			t.Errorf("%v: Err = %v", st, err)
		}
	}
}

func TestWriteReplay(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	body := `{"run_id":"run_1","output":{"ok":true}}`
	if err := idempotency.WriteReplay(rec, &idempotency.Response{Status: 201, Body: []byte(body), Ref: "run_1"}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 201 || rec.Body.String() != body {
		t.Fatalf("replay = %d %q, want 201 %q", rec.Code, rec.Body.String(), body)
	}
	if got := rec.Header().Get(idempotency.ReplayedHeader); got != "true" {
		t.Fatalf("%s = %q", idempotency.ReplayedHeader, got)
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type = %q", got)
	}
	if err := idempotency.WriteReplay(httptest.NewRecorder(), nil); err == nil {
		t.Fatal("WriteReplay of nothing succeeded")
	}
}

// sized is a JSON string of exactly n bytes.
func sized(n int) []byte {
	return []byte(`"` + strings.Repeat("x", n-2) + `"`)
}

// trim shortens a body for a failure message.
func trim(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
