package app_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/console/internal/adapters"
	"github.com/parleyhq/parley/services/console/internal/app"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
	"github.com/parleyhq/parley/services/console/migrations"
)

// clock is a settable time for the session rules.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

const pw = "correct horse battery staple"

func newApp(t *testing.T, policy session.Policy, now *clock) *app.App {
	t.Helper()
	return newAppHashing(t, policy, now, operator.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
}

func newAppHashing(t *testing.T, policy session.Policy, now *clock, params operator.Params) *app.App {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	hasher, err := operator.NewHasher(params)
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Deps{
		Operators: adapters.NewOperatorStore(gdb),
		Sessions:  adapters.NewSessionStore(gdb),
		Limiter:   adapters.NewSignInLimits(ratelimit.New(env.Redis(t), redisx.Keys{Prefix: env.RedisPrefix}, time.Minute), 100, 100),
		Hasher:    hasher,
		Policy:    policy,
		NewID:     uuid.NewString,
		Clock:     now.Now,
	})
	if _, err := a.CreateOperator(context.Background(), app.NewOperator{Email: "ann@example.com", Password: pw}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSessionSlidesWithUse: each use moves the idle expiry on; a session
// left idle past it is refused.
func TestSessionSlidesWithUse(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	now := &clock{now: t0}
	a := newApp(t, session.Policy{IdleTTL: time.Hour, MaxAge: 24 * time.Hour}, now)
	ctx := context.Background()
	in, err := a.SignIn(ctx, "ann@example.com", pw, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{50 * time.Minute, 100 * time.Minute, 150 * time.Minute} {
		now.set(t0.Add(at))
		_, s, err := a.Authenticate(ctx, in.Token)
		if err != nil {
			t.Fatalf("use at +%s: %v (idle less than the TTL)", at, err)
		}
		if want := t0.Add(at + time.Hour); !s.ExpiresAt.Equal(want) {
			t.Fatalf("use at +%s: expires %s, want %s", at, s.ExpiresAt, want)
		}
	}
	now.set(t0.Add(210 * time.Minute))
	if _, _, err := a.Authenticate(ctx, in.Token); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("after an hour idle: %v, want ErrNotFound", err)
	}
}

// TestPruneSessions: the pruner deletes expired sessions and keeps live
// ones.
func TestPruneSessions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	now := &clock{now: t0}
	a := newApp(t, session.Policy{IdleTTL: time.Hour, MaxAge: 24 * time.Hour}, now)
	ctx := context.Background()
	if _, err := a.SignIn(ctx, "ann@example.com", pw, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	// Past the first session's idle expiry, untouched since.
	now.set(t0.Add(2 * time.Hour))
	live, err := a.SignIn(ctx, "ann@example.com", pw, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.PruneSessions(ctx)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if _, _, err := a.Authenticate(ctx, live.Token); err != nil {
		t.Fatalf("the live session after pruning: %v", err)
	}
}

// TestSessionAbsoluteCap: however busy, a session ends MaxAge after
// sign-in.
func TestSessionAbsoluteCap(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	now := &clock{now: t0}
	a := newApp(t, session.Policy{IdleTTL: time.Hour, MaxAge: 2 * time.Hour}, now)
	ctx := context.Background()
	in, err := a.SignIn(ctx, "ann@example.com", pw, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{40 * time.Minute, 80 * time.Minute, 119 * time.Minute} {
		now.set(t0.Add(at))
		if _, _, err := a.Authenticate(ctx, in.Token); err != nil {
			t.Fatalf("use at +%s: %v", at, err)
		}
	}
	now.set(t0.Add(2 * time.Hour))
	if _, _, err := a.Authenticate(ctx, in.Token); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("at the cap: %v, want ErrNotFound", err)
	}
}

// TestSignInErrors: a wrong password and an unknown email are the same
// error.
func TestSignInErrors(t *testing.T) {
	t.Parallel()
	a := newApp(t, session.Policy{IdleTTL: time.Hour, MaxAge: time.Hour}, &clock{now: time.Now()})
	ctx := context.Background()
	for _, tt := range []struct{ email, pw string }{{"ann@example.com", "not the password"}, {"bob@example.com", pw}} {
		if _, err := a.SignIn(ctx, tt.email, tt.pw, "192.0.2.1"); !errors.Is(err, app.ErrBadCredentials) {
			t.Fatalf("SignIn(%s) = %v, want ErrBadCredentials", tt.email, err)
		}
	}
	if _, err := a.SignIn(ctx, " ANN@example.com ", pw, "192.0.2.1"); err != nil {
		t.Fatalf("the email in another case and spaced: %v", err)
	}
}

// TestUnknownEmailCostsAWrongPassword: a sign-in for an email no operator
// has does the hashing a wrong password does, so its time does not tell
// that the account is missing. Time itself is a poor witness on a busy
// machine, so the test watches memory instead: argon2id allocates its
// whole memory parameter (19 MiB by default) on every hash, while a sign-in
// that skips hashing allocates a few kilobytes. The test is not parallel so
// that no other test allocates while it measures; the least of three tries
// each leaves out a stray allocation by the database or Redis clients.
func TestUnknownEmailCostsAWrongPassword(t *testing.T) {
	a := newAppHashing(t, session.Policy{IdleTTL: time.Hour, MaxAge: time.Hour}, &clock{now: time.Now()}, operator.DefaultParams)
	allocated := func(email, password string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := a.SignIn(context.Background(), email, password, "192.0.2.1"); !errors.Is(err, app.ErrBadCredentials) {
			t.Fatalf("SignIn(%s) = %v", email, err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	overLong := strings.Repeat("x", 4*operator.MaxPasswordLen+1)
	least := map[string]uint64{}
	for range 3 {
		// Interleaved, so anything that skews one try skews its neighbours.
		for name, try := range map[string]struct{ email, password string }{
			"a wrong password":      {"ann@example.com", "not the password at all"},
			"an unknown email":      {"nobody@example.com", "not the password at all"},
			"an over-long password": {"ann@example.com", overLong},
		} {
			n := allocated(try.email, try.password)
			if old, ok := least[name]; !ok || n < old {
				least[name] = n
			}
		}
	}
	hash := uint64(operator.DefaultParams.Memory) * 1024
	wrong := least["a wrong password"]
	if wrong < hash {
		t.Fatalf("a wrong password allocated %d bytes, less than argon2id's %d: the measure does not see hashing", wrong, hash)
	}
	for _, name := range []string{"an unknown email", "an over-long password"} {
		if n := least[name]; n < hash || n < wrong/2 {
			t.Fatalf("%s allocated %d bytes, a wrong password %d (argon2id alone %d): it skips the hashing, so the missing account shows", name, n, wrong, hash)
		}
	}
}
