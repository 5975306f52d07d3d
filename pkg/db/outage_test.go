package db_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// While PostgreSQL is away a query fails at once with an error the services
// answer 503, and once it is back the pool serves again by itself.
func TestQueriesFailFastWhileDownAndRecover(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	p, dbURL := proxy.Front(t, env.DatabaseURL)
	gdb, err := db.Open(context.Background(), dbURL, "widgets", os.DirFS("testdata/migrations"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) })
	count := func() error {
		var n int64
		return gdb.Table("widgets.widgets").Count(&n).Error
	}
	// The same through pgx, as the hot reads go (ScanRows).
	scan := func() error {
		return db.ScanRows(context.Background(), gdb.Table("widgets.widgets").Select("id"), func(pgx.Rows) error { return nil })
	}
	reads := []func() error{count, scan}
	for _, read := range reads {
		if err := read(); err != nil {
			t.Fatalf("before the outage: %v", err)
		}
	}

	p.Cut()
	for i := range 3 {
		start := time.Now()
		err := reads[i%len(reads)]()
		if took := time.Since(start); took > time.Second {
			t.Errorf("query %d failed after %s, want at once", i, took)
		}
		if err == nil || !errs.DependencyDown(err) {
			t.Fatalf("query %d during the outage: %v, want an error DependencyDown recognises", i, err)
		}
	}
	if err := db.Ping(context.Background(), gdb); err == nil {
		t.Fatal("Ping (readiness) passes while PostgreSQL is away")
	}

	p.Restore()
	for _, read := range reads {
		wait.For(t, 10*time.Second, "queries to work again", read)
	}
}

// A server that takes the connection and never answers (a half-dead host)
// costs db.ConnectTimeout, not the operating system's TCP timeout.
func TestConnectingToAServerThatNeverAnswersGivesUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	start := time.Now()
	_, err = db.Open(context.Background(), "postgres://postgres@"+ln.Addr().String()+"/parley?sslmode=disable", "widgets", os.DirFS("testdata/migrations"), zap.NewNop())
	took := time.Since(start)
	if err == nil || !errs.DependencyDown(err) {
		t.Fatalf("Open = %v, want an error DependencyDown recognises", err)
	}
	if took < db.ConnectTimeout-100*time.Millisecond || took > db.ConnectTimeout+time.Second {
		t.Fatalf("gave up after %s, want about %s", took, db.ConnectTimeout)
	}
}
