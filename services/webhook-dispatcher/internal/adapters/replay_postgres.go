package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// ReplayStore is the delivery log as replays use it, in
// dispatch.deliveries.
type ReplayStore struct {
	db *gorm.DB
}

var _ replay.Deliveries = (*ReplayStore)(nil)

// NewReplayStore returns the store over gdb (opened for Schema).
func NewReplayStore(gdb *gorm.DB) *ReplayStore { return &ReplayStore{db: gdb} }

// Claim implements replay.Deliveries in one statement: a missing delivery
// is inserted pending; a stored one of the same workspace becomes pending
// unless it is pending and was written within busyFor. Either way the row
// comes back, so the claim and the read cannot be split by another round.
func (s *ReplayStore) Claim(ctx context.Context, d *delivery.Delivery, busyFor time.Duration) (*delivery.Delivery, error) {
	in, err := deliveryToRow(d)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	var rows []deliveryRow
	err = s.db.WithContext(ctx).Raw(`
		INSERT INTO `+Schema+`.deliveries AS d (id, workspace_id, event, payload, status, attempts, attempt_history, created_at, updated_at)
		VALUES (?, ?, ?, ?, 'pending', 0, '[]', ?, ?)
		ON CONFLICT (id) DO UPDATE SET status = 'pending', updated_at = EXCLUDED.updated_at
		WHERE d.workspace_id = EXCLUDED.workspace_id
		  AND (d.status <> 'pending' OR d.updated_at < ?)
		RETURNING *`,
		in.ID, in.WorkspaceID, in.Event, in.Payload, in.CreatedAt, now, now.Add(-busyFor),
	).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("claim delivery: %w", err)
	}
	if len(rows) == 1 {
		return rows[0].toDomain()
	}
	// The row exists and was left alone: say why.
	var existing deliveryRow
	if err := s.db.WithContext(ctx).Select("workspace_id").Where("id = ?", d.ID).Take(&existing).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			// Purged between the two statements: the next try inserts it.
			return nil, replay.ErrBusy
		}
		return nil, fmt.Errorf("load delivery %s: %w", d.ID, err)
	}
	if existing.WorkspaceID != d.WorkspaceID {
		return nil, replay.ForeignError(d.ID)
	}
	return nil, replay.ErrBusy
}

// CreateSkipped implements replay.Deliveries.
func (s *ReplayStore) CreateSkipped(ctx context.Context, d *delivery.Delivery) error {
	row, err := deliveryToRow(d)
	if err != nil {
		return err
	}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("insert delivery: %w", err)
	}
	return nil
}
