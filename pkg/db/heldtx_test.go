package db_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"net/url"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
)

// readyCounter counts the ReadyForQuery messages PostgreSQL sends on
// every connection: one ends each round trip.
type readyCounter struct {
	ready atomic.Int64
}

// tap reads one connection's stream, handed over in chunks of any size.
func (r *readyCounter) tap() func([]byte) {
	var pending []byte
	return func(b []byte) {
		pending = append(pending, b...)
		for len(pending) >= 5 {
			size := int(binary.BigEndian.Uint32(pending[1:5]))
			if len(pending) < 1+size {
				return
			}
			if pending[0] == 'Z' {
				r.ready.Add(1)
			}
			pending = pending[1+size:]
		}
	}
}

// heldEnv is a HeldTx's pool, whose round trips are counted, beside
// a pool of its own for looking from outside the transaction.
type heldEnv struct {
	held, outside *gorm.DB
	trips         *readyCounter
}

func newHeldEnv(t *testing.T) heldEnv {
	t.Helper()
	env := testenv.New(t)
	migrations := os.DirFS("testdata/migrations")
	outside := env.DB(t, "widgets", migrations)
	p, proxied := proxy.Front(t, env.DatabaseURL)
	// Without TLS, so that the server's side is PostgreSQL's messages
	// from the first byte (no answer to an SSL request before them).
	u, err := url.Parse(proxied)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	trips := &readyCounter{}
	p.Tap(trips.tap)
	held, err := db.Open(context.Background(), u.String(), "widgets", migrations, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(held) })
	return heldEnv{held: held, outside: outside, trips: trips}
}

func (e heldEnv) names(t *testing.T) map[string]bool {
	t.Helper()
	var names []string
	if err := e.outside.Raw("SELECT name FROM widgets.widgets").Scan(&names).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// noneLeftOpen fails t if a connection of the database was left in
// a transaction.
func (e heldEnv) noneLeftOpen(t *testing.T) {
	t.Helper()
	var n int
	if err := e.outside.Raw(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d connections left in a transaction", n)
	}
}

const insertWidget = `INSERT INTO widgets.widgets (name) VALUES ($1) RETURNING id`

// A held transaction costs a round trip for its BEGIN and first statement
// and one for its last statement and COMMIT; nothing of it is seen from
// outside until the COMMIT.
func TestHeldTxBeginsAndCommitsWithItsStatements(t *testing.T) {
	t.Parallel()
	e := newHeldEnv(t)
	sqlDB, err := e.held.DB()
	if err != nil {
		t.Fatal(err)
	}
	// One connection, so that the counted rounds find the statements
	// prepared by the first.
	sqlDB.SetMaxOpenConns(1)
	ctx := context.Background()

	for round, names := range [][2]string{{"a1", "a2"}, {"b1", "b2"}} {
		tx, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		before := e.trips.ready.Load()
		var id int64
		if err := tx.QueryRow(ctx, insertWidget, []any{names[0]}, &id); err != nil || id == 0 {
			t.Fatalf("first statement: id %d, %v", id, err)
		}
		afterFirst := e.trips.ready.Load()
		if got := e.names(t); got[names[0]] {
			t.Fatalf("%s seen outside before the commit", names[0])
		}
		if err := tx.Commit(ctx, `INSERT INTO widgets.widgets (name) VALUES ($1)`, names[1]); err != nil {
			t.Fatal(err)
		}
		afterCommit := e.trips.ready.Load()
		tx.Rollback() // after Commit: nothing
		if got := e.names(t); !got[names[0]] || !got[names[1]] {
			t.Fatalf("after the commit: %v; want %v", got, names)
		}
		if round == 1 && (afterFirst-before != 1 || afterCommit-afterFirst != 1) {
			t.Fatalf("round trips: %d for BEGIN and the first statement, %d for the last and COMMIT; want 1 and 1",
				afterFirst-before, afterCommit-afterFirst)
		}
	}
	e.noneLeftOpen(t)
}

// Statements between the first and the last go through DB, in the
// transaction; DB begins it when no statement has.
func TestHeldTxDBIsInTheTransaction(t *testing.T) {
	t.Parallel()
	e := newHeldEnv(t)
	ctx := context.Background()

	tx, err := db.BeginHeld(ctx, e.held)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	gdb, err := tx.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec(`INSERT INTO widgets.widgets (name) VALUES ('via-db')`).Error; err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, insertWidget, []any{"via-query"}, &id); err != nil {
		t.Fatal(err)
	}
	if got := e.names(t); got["via-db"] || got["via-query"] {
		t.Fatalf("seen outside before the commit: %v", got)
	}
	if err := tx.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := e.names(t); !got["via-db"] || !got["via-query"] {
		t.Fatalf("after the commit: %v", got)
	}
	e.noneLeftOpen(t)
}

// Whatever ends a held transaction early (its last statement failing, a
// row lock refused, a rollback, a context cancelled) leaves nothing of it
// stored and no connection in a transaction.
func TestHeldTxEndsCleanly(t *testing.T) {
	t.Parallel()
	e := newHeldEnv(t)
	ctx := context.Background()
	if err := e.outside.Exec(`INSERT INTO widgets.widgets (name) VALUES ('taken')`).Error; err != nil {
		t.Fatal(err)
	}

	t.Run("failing last statement", func(t *testing.T) {
		tx, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var id int64
		if err := tx.QueryRow(ctx, insertWidget, []any{"lost-1"}, &id); err != nil {
			t.Fatal(err)
		}
		err = tx.Commit(ctx, `INSERT INTO widgets.widgets (name) VALUES ($1)`, "taken")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("commit with a duplicate: %v; want the unique violation", err)
		}
		if e.names(t)["lost-1"] {
			t.Fatal("the first statement's row was committed")
		}
	})

	t.Run("lock refused", func(t *testing.T) {
		const lock = `SELECT id FROM widgets.widgets WHERE name = $1 FOR UPDATE NOWAIT`
		holder, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		var id int64
		if err := holder.QueryRow(ctx, lock, []any{"taken"}, &id); err != nil {
			t.Fatal(err)
		}
		other, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		err = other.QueryRow(ctx, lock, []any{"taken"}, &id)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Fatalf("second lock: %v; want lock_not_available", err)
		}
		other.Rollback()
		holder.Rollback()
		// Both places are free again.
		again, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Rollback()
		if err := again.QueryRow(ctx, lock, []any{"taken"}, &id); err != nil {
			t.Fatalf("the lock after both rolled back: %v", err)
		}
	})

	t.Run("no row", func(t *testing.T) {
		tx, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var id int64
		err = tx.QueryRow(ctx, `SELECT id FROM widgets.widgets WHERE name = $1`, []any{"nobody"}, &id)
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("no row: %v; want sql.ErrNoRows", err)
		}
		// The transaction goes on.
		if err := tx.Commit(ctx, `INSERT INTO widgets.widgets (name) VALUES ($1)`, "after-no-row"); err != nil {
			t.Fatal(err)
		}
		if !e.names(t)["after-no-row"] {
			t.Fatal("the statement after no row was not committed")
		}
	})

	t.Run("rolled back", func(t *testing.T) {
		tx, err := db.BeginHeld(ctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := tx.QueryRow(ctx, insertWidget, []any{"lost-2"}, &id); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if err := tx.Commit(ctx, ""); err == nil {
			t.Fatal("commit after the rollback succeeded")
		}
		if e.names(t)["lost-2"] {
			t.Fatal("a rolled-back row was stored")
		}
	})

	t.Run("context cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		tx, err := db.BeginHeld(cctx, e.held)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var id int64
		if err := tx.QueryRow(cctx, insertWidget, []any{"lost-3"}, &id); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := tx.Commit(cctx, `INSERT INTO widgets.widgets (name) VALUES ($1)`, "lost-4"); err == nil {
			t.Fatal("commit on a cancelled context succeeded")
		}
		if got := e.names(t); got["lost-3"] || got["lost-4"] {
			t.Fatalf("stored on a cancelled context: %v", got)
		}
	})

	e.noneLeftOpen(t)
}
