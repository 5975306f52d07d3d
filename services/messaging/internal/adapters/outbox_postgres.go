package adapters

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// outboxSweepLock is the transaction-level advisory lock the sweep holds,
// so that one instance at a time sweeps: rows are read without FOR UPDATE,
// with no lock or WAL record per row (advisory locks are per database, so
// test databases never share it).
const outboxSweepLock = 0x6f7574626f78 // "outbox"

// OutboxStore reads and deletes messaging.outbox rows for the relay.
type OutboxStore struct {
	db *gorm.DB
}

var _ outbox.Store = (*OutboxStore)(nil)

// NewOutboxStore returns a store on gdb.
func NewOutboxStore(gdb *gorm.DB) *OutboxStore { return &OutboxStore{db: gdb} }

// Forget deletes the rows of ids in one statement.
func (s *OutboxStore) Forget(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// One array parameter rather than a list of them, so the statement is
	// prepared once whatever the batch's size. Its commit does not wait for
	// the WAL to reach the disk (synchronous_commit off for this statement's
	// transaction only): a delete lost to a database crash only brings its
	// events out again with the sweep, and the stream drops the repeats.
	if _, err := s.db.WithContext(ctx).Statement.ConnPool.ExecContext(ctx, `
		WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		DELETE FROM messaging.outbox WHERE event_id = ANY($1::text[]::uuid[]) AND EXISTS (SELECT FROM async)`, ids); err != nil {
		return fmt.Errorf("delete published outbox rows: %w", err)
	}
	return nil
}

// Sweep takes the sweeper's advisory lock for one transaction, reads up to
// limit rows written before cutoff, hands them to publish and deletes the
// ones it accepted.
func (s *OutboxStore) Sweep(ctx context.Context, cutoff time.Time, limit int, publish func(context.Context, []outbox.Event) (int, error)) (int, error) {
	published := 0
	var publishErr error
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var turn bool
		if err := tx.Raw(`SELECT pg_try_advisory_xact_lock(?)`, outboxSweepLock).Scan(&turn).Error; err != nil {
			return fmt.Errorf("take the outbox sweep lock: %w", err)
		}
		if !turn {
			return nil
		}
		var rows []outboxRow
		if err := tx.Raw(`
			SELECT seq, event_id, subject, payload, created_at FROM messaging.outbox
			WHERE created_at < ?
			ORDER BY seq
			LIMIT ?`, cutoff, limit).Scan(&rows).Error; err != nil {
			return fmt.Errorf("select outbox: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		events := make([]outbox.Event, len(rows))
		for i, r := range rows {
			events[i] = r.toDomain()
		}
		var n int
		n, publishErr = publish(ctx, events)
		if n == 0 {
			return nil
		}
		done := make([]int64, n)
		for i := range done {
			done[i] = rows[i].Seq
		}
		if _, err := tx.Statement.ConnPool.ExecContext(ctx,
			`DELETE FROM messaging.outbox WHERE seq = ANY($1::bigint[])`, done); err != nil {
			return fmt.Errorf("delete swept outbox rows: %w", err)
		}
		published = n
		return nil
	})
	if err != nil {
		// Rows published but not deleted go out again; their Nats-Msg-Id
		// makes the stream store them once.
		return 0, err
	}
	return published, publishErr
}

// Backlog counts the rows: every one is an event not yet published, or
// published a moment ago and about to be deleted.
func (s *OutboxStore) Backlog(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM messaging.outbox`).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count outbox: %w", err)
	}
	return n, nil
}
