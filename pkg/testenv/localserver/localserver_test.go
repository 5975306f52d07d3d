package localserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/testenv/localserver"
)

// A flush and a restart each leave the server empty, on the same address;
// the client reconnects by itself.
func TestRedis(t *testing.T) {
	t.Parallel()
	r := localserver.StartRedis(t)
	ctx := context.Background()
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	set := func() {
		t.Helper()
		if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	gone := func(what string) {
		t.Helper()
		if err := client.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after %s: %v, want nothing", what, err)
		}
	}

	set()
	r.Flush(t)
	gone("FLUSHALL")

	set()
	r.Kill(t)
	if r.Running() {
		t.Fatal("running after Kill")
	}
	if err := client.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	r.Start(t)
	gone("a restart")

	set()
	r.Restart(t)
	gone("Restart")
}

// What was committed survives a fast restart and a SIGKILL of the
// postmaster (crash recovery); both come back on the same port.
func TestPostgres(t *testing.T) {
	t.Parallel()
	p := localserver.StartPostgres(t)
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	count := func() int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := exec(`CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatal(err)
	}

	p.Restart(t)
	if err := exec(`INSERT INTO kept VALUES (2)`); err != nil {
		t.Fatalf("after a restart: %v", err)
	}

	p.Kill(t)
	if p.Running() {
		t.Fatal("running after Kill")
	}
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a connection after Kill")
	}
	p.Start(t)
	if n := count(); n != 2 {
		t.Fatalf("%d rows after crash recovery, want 2", n)
	}
}
