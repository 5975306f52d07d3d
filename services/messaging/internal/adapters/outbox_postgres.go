package adapters

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// OutboxStore reads and marks messaging.outbox for the relay.
type OutboxStore struct {
	db *gorm.DB
}

var _ outbox.Store = (*OutboxStore)(nil)

// NewOutboxStore returns a store on gdb.
func NewOutboxStore(gdb *gorm.DB) *OutboxStore { return &OutboxStore{db: gdb} }

// PublishPending locks up to limit unpublished rows with SKIP LOCKED, so
// relays of several messaging instances share the backlog without sending
// a row twice, hands them to publish at once, and marks the ones it
// accepted in the same transaction.
func (s *OutboxStore) PublishPending(ctx context.Context, limit int, publish func(context.Context, []outbox.Event) (int, error)) (int, error) {
	published := 0
	var publishErr error
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []outboxRow
		if err := tx.Raw(`
			SELECT seq, event_id, subject, payload, created_at FROM messaging.outbox
			WHERE published_at IS NULL
			ORDER BY seq
			LIMIT ?
			FOR UPDATE SKIP LOCKED`, limit).Scan(&rows).Error; err != nil {
			return fmt.Errorf("select outbox: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		events := make([]outbox.Event, len(rows))
		for i, r := range rows {
			events[i] = r.toDomain()
		}
		// Only the accepted prefix is marked: later rows wait, so events
		// leave in the order they were written.
		var n int
		n, publishErr = publish(ctx, events)
		if n == 0 {
			return nil
		}
		done := make([]int64, n)
		for i := range done {
			done[i] = rows[i].Seq
		}
		if err := tx.Exec(`UPDATE messaging.outbox SET published_at = now() WHERE seq IN ?`, done).Error; err != nil {
			return fmt.Errorf("mark outbox published: %w", err)
		}
		published = n
		return nil
	})
	if err != nil {
		// Rows published but not marked go out again; their Nats-Msg-Id
		// makes the stream store them once.
		return 0, err
	}
	return published, publishErr
}

// Prune deletes rows published before cutoff.
func (s *OutboxStore) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM messaging.outbox WHERE published_at < ?`, cutoff)
	if res.Error != nil {
		return 0, fmt.Errorf("prune outbox: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Backlog counts unpublished rows.
func (s *OutboxStore) Backlog(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM messaging.outbox WHERE published_at IS NULL`).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count outbox: %w", err)
	}
	return n, nil
}
