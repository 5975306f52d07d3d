package adapters_test

import (
	"context"
	"testing"

	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// The token holds until a rotation; one lost from Redis comes back as a new
// value, never as one seen before, so credentials cached under any earlier
// token stay stale; every instance reads the same value.
func TestChangeToken(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	client := env.Redis(t)
	keys := redisx.Keys{Prefix: env.RedisPrefix}
	a, b := adapters.NewChangeToken(client, keys), adapters.NewChangeToken(env.Redis(t), keys)
	ctx := context.Background()
	current := func(name string, tok account.ChangeToken) string {
		t.Helper()
		v, err := tok.Current(ctx)
		if err != nil || v == "" {
			t.Fatalf("%s: Current = %q, %v", name, v, err)
		}
		return v
	}

	seen := map[string]bool{}
	first := current("missing", a)
	if again := current("again", a); again != first {
		t.Fatalf("Current moved from %q to %q without a change", first, again)
	}
	if other := current("other instance", b); other != first {
		t.Fatalf("another instance reads %q, want %q", other, first)
	}
	seen[first] = true

	if err := b.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	rotated := current("rotated", a)
	if seen[rotated] {
		t.Fatalf("after Rotate: %q again", rotated)
	}
	seen[rotated] = true

	if err := client.Del(ctx, keys.Key("accounts", "token")).Err(); err != nil {
		t.Fatal(err)
	}
	lost := current("lost", b)
	if seen[lost] {
		t.Fatalf("after the token was lost: %q again", lost)
	}
	if other := current("other instance", a); other != lost {
		t.Fatalf("after the token was lost, instances read %q and %q", lost, other)
	}
}
