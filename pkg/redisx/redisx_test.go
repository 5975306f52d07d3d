package redisx_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// While Redis is away a command fails at once with an error the services
// answer 503, and once it is back the client serves again by itself.
func TestCommandsFailFastWhileDownAndRecover(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	p, redisURL := proxy.Front(t, env.RedisURL)
	client, err := redisx.Open(context.Background(), redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	key := redisx.Keys{Prefix: env.RedisPrefix}.Key("outage")
	incr := func() error { return client.Incr(context.Background(), key).Err() }
	if err := incr(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	p.Cut()
	for i := range 3 {
		start := time.Now()
		err := incr()
		if took := time.Since(start); took > time.Second {
			t.Errorf("command %d failed after %s, want at once", i, took)
		}
		if err == nil || !errs.DependencyDown(err) {
			t.Fatalf("command %d during the outage: %v, want an error DependencyDown recognises", i, err)
		}
	}

	p.Restore()
	wait.For(t, 10*time.Second, "commands to work again", incr)
}
