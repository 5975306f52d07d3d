package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// HeldTx is a transaction on a pooled connection of its own whose BEGIN
// travels with its first statement and whose COMMIT travels with its last,
// each pair in one round trip (a pgx pipeline). It is for a transaction
// that holds a lock while its caller does other work, such as a chat turn
// that locks its conversation for the whole answer: sent alone, BEGIN and
// COMMIT are two round trips of their own, each a wake-up of the server's
// backend and of the caller.
//
// Statements between the first and the last go through DB, gorm on the
// same connection. A HeldTx is used by one goroutine. Rollback ends it
// however it stands, and is safe after Commit: defer it.
type HeldTx struct {
	conn  *sql.Conn
	gdb   *gorm.DB
	begun bool
	ended bool
}

// BeginHeld takes a connection of gdb's pool (not a transaction's) for a
// HeldTx. Nothing is sent yet.
func BeginHeld(ctx context.Context, gdb *gorm.DB) (*HeldTx, error) {
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("pool of the transaction: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	onConn := gdb.WithContext(ctx)
	onConn.Statement.ConnPool = conn
	return &HeldTx{conn: conn, gdb: onConn}, nil
}

// withPgx runs f on the connection's pgx.Conn.
func (t *HeldTx) withPgx(f func(c *pgx.Conn) error) error {
	return t.conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errors.New("the pool's connections are not pgx's")
		}
		return f(c.Conn())
	})
}

// QueryRow runs query (args) in the transaction and scans its one row into
// dest; the first statement carries the BEGIN. No row is sql.ErrNoRows
// (pgx.ErrNoRows is one), and the transaction goes on.
func (t *HeldTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	if t.ended {
		return errors.New("query on an ended transaction")
	}
	return t.withPgx(func(c *pgx.Conn) error {
		if t.begun {
			return c.QueryRow(ctx, query, args...).Scan(dest...)
		}
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(query, args...)
		br := c.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			t.begun = true
			err = br.QueryRow().Scan(dest...)
		}
		if closeErr := br.Close(); err == nil {
			err = closeErr
		}
		return err
	})
}

// DB is gorm on the transaction's connection, for the statements between
// the first and the last. The transaction is begun first if no statement
// has begun it yet.
func (t *HeldTx) DB() (*gorm.DB, error) {
	if t.ended {
		return nil, errors.New("query on an ended transaction")
	}
	if !t.begun {
		if _, err := t.conn.ExecContext(t.gdb.Statement.Context, "BEGIN"); err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		t.begun = true
	}
	return t.gdb, nil
}

// Commit runs query (args), if any, and commits, in one round trip, and
// gives the connection back. A statement that fails leaves nothing
// committed: its error is returned and the transaction rolled back.
func (t *HeldTx) Commit(ctx context.Context, query string, args ...any) error {
	if t.ended {
		return errors.New("commit of an ended transaction")
	}
	err := t.withPgx(func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		if query != "" {
			b.Queue(query, args...)
		}
		if t.begun {
			b.Queue("COMMIT")
		}
		if b.Len() == 0 {
			return nil
		}
		br := c.SendBatch(ctx, b)
		var err error
		if query != "" {
			_, err = br.Exec()
		}
		if err == nil && t.begun {
			// COMMIT of a transaction an earlier statement failed answers
			// ROLLBACK, without an error.
			var tag pgconn.CommandTag
			if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
				err = fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
			}
		}
		if closeErr := br.Close(); err == nil {
			err = closeErr
		}
		return err
	})
	t.Rollback()
	return err
}

// Rollback ends the transaction if it is still open and gives the
// connection back; a connection whose rollback fails is closed instead of
// going back to the pool in a transaction.
func (t *HeldTx) Rollback() {
	if t.ended {
		return
	}
	t.ended = true
	_ = t.withPgx(func(c *pgx.Conn) error {
		if c.PgConn().TxStatus() == 'I' {
			return nil
		}
		// The caller's context may be what ended the transaction: the
		// rollback gets its own bound.
		ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
		defer cancel()
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil || c.PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn
		}
		return nil
	})
	_ = t.conn.Close()
}
