package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// DeliveryStore keeps the delivery log in dispatch.deliveries.
type DeliveryStore struct {
	db *gorm.DB
}

var _ delivery.Store = (*DeliveryStore)(nil)

// NewDeliveryStore returns the store over gdb (opened for Schema).
func NewDeliveryStore(gdb *gorm.DB) *DeliveryStore { return &DeliveryStore{db: gdb} }

type deliveryRow struct {
	ID             string `gorm:"primaryKey"`
	WorkspaceID    string
	Event          string
	Payload        string
	Status         string
	Attempts       int
	ResponseStatus *int
	LastError      *string
	AttemptHistory string `gorm:"type:jsonb"`
	DeliveredAt    *time.Time
	CreatedAt      time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt      time.Time `gorm:"autoUpdateTime:false"`
}

func (deliveryRow) TableName() string { return Schema + ".deliveries" }

// attemptJSON is one element of attempt_history.
type attemptJSON struct {
	Number         int       `json:"number"`
	StartedAt      time.Time `json:"started_at"`
	DurationMS     float64   `json:"duration_ms"`
	ResponseStatus *int      `json:"response_status"`
	Error          *string   `json:"error"`
}

func deliveryToRow(d *delivery.Delivery) (deliveryRow, error) {
	history := make([]attemptJSON, 0, len(d.History))
	for _, a := range d.History {
		h := attemptJSON{
			Number:     a.Number,
			StartedAt:  a.StartedAt.UTC(),
			DurationMS: math.Round(float64(a.Duration)/float64(time.Microsecond)) / 1000,
		}
		if a.ResponseStatus != 0 {
			s := a.ResponseStatus
			h.ResponseStatus = &s
		}
		if a.Error != "" {
			e := a.Error
			h.Error = &e
		}
		history = append(history, h)
	}
	raw, err := json.Marshal(history)
	if err != nil {
		return deliveryRow{}, fmt.Errorf("encode attempt history: %w", err)
	}
	return deliveryRow{
		ID:             d.ID,
		WorkspaceID:    d.WorkspaceID,
		Event:          d.Event,
		Payload:        string(d.Payload),
		Status:         string(d.Status),
		Attempts:       d.Attempts,
		ResponseStatus: d.ResponseStatus,
		LastError:      d.LastError,
		AttemptHistory: string(raw),
		DeliveredAt:    d.DeliveredAt,
		CreatedAt:      d.CreatedAt,
		UpdatedAt:      time.Now().UTC(),
	}, nil
}

func (r deliveryRow) toDomain() (*delivery.Delivery, error) {
	var history []attemptJSON
	if err := json.Unmarshal([]byte(r.AttemptHistory), &history); err != nil {
		return nil, fmt.Errorf("decode attempt history of %s: %w", r.ID, err)
	}
	d := &delivery.Delivery{
		ID:             r.ID,
		WorkspaceID:    r.WorkspaceID,
		Event:          r.Event,
		Payload:        []byte(r.Payload),
		Status:         delivery.Status(r.Status),
		Attempts:       r.Attempts,
		ResponseStatus: r.ResponseStatus,
		LastError:      r.LastError,
		CreatedAt:      r.CreatedAt.UTC(),
	}
	if r.DeliveredAt != nil {
		t := r.DeliveredAt.UTC()
		d.DeliveredAt = &t
	}
	for _, h := range history {
		a := delivery.Attempt{
			Number:    h.Number,
			StartedAt: h.StartedAt.UTC(),
			Duration:  time.Duration(h.DurationMS * float64(time.Millisecond)),
		}
		if h.ResponseStatus != nil {
			a.ResponseStatus = *h.ResponseStatus
		}
		if h.Error != nil {
			a.Error = *h.Error
		}
		d.History = append(d.History, a)
	}
	return d, nil
}

// Create implements delivery.Store with an insert that does nothing when
// the id exists, then reads the row that is there.
func (s *DeliveryStore) Create(ctx context.Context, d *delivery.Delivery) (*delivery.Delivery, bool, error) {
	row, err := deliveryToRow(d)
	if err != nil {
		return nil, false, err
	}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return nil, false, fmt.Errorf("insert delivery: %w", res.Error)
	}
	if res.RowsAffected == 1 {
		return d, true, nil
	}
	var existing deliveryRow
	if err := s.db.WithContext(ctx).Where("id = ?", d.ID).Take(&existing).Error; err != nil {
		return nil, false, fmt.Errorf("load delivery %s: %w", d.ID, err)
	}
	stored, err := existing.toDomain()
	return stored, false, err
}

// stateColumns are what changes as a delivery goes on.
var stateColumns = []string{"status", "attempts", "response_status", "last_error", "attempt_history", "delivered_at", "updated_at"}

func updateState(tx *gorm.DB, d *delivery.Delivery) error {
	row, err := deliveryToRow(d)
	if err != nil {
		return err
	}
	res := tx.Model(&deliveryRow{}).Where("id = ?", d.ID).Select(stateColumns).Updates(&row)
	if res.Error != nil {
		return fmt.Errorf("update delivery %s: %w", d.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		// Purged or never created: writing nowhere would lose the outcome.
		return fmt.Errorf("update delivery %s: %w", d.ID, gorm.ErrRecordNotFound)
	}
	return nil
}

// Progress implements delivery.Store.
func (s *DeliveryStore) Progress(ctx context.Context, d *delivery.Delivery) error {
	return updateState(s.db.WithContext(ctx), d)
}

// Finish implements delivery.Store.
func (s *DeliveryStore) Finish(ctx context.Context, d *delivery.Delivery, count func(*webhook.Webhook) bool) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := updateState(tx, d); err != nil {
			return err
		}
		if count == nil {
			return nil
		}
		var row webhookRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("workspace_id = ?", d.WorkspaceID).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil // deleted meanwhile: nothing to count
		}
		if err != nil {
			return fmt.Errorf("load webhook: %w", err)
		}
		w := row.toDomain()
		if !count(w) {
			return nil
		}
		next := webhookToRow(w)
		if err := tx.Save(&next).Error; err != nil {
			return fmt.Errorf("update webhook: %w", err)
		}
		return nil
	})
}

// List implements delivery.Store.
func (s *DeliveryStore) List(ctx context.Context, workspaceID string, q delivery.ListQuery) ([]*delivery.Delivery, error) {
	tx := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID)
	if q.Status != "" {
		tx = tx.Where("status = ?", string(q.Status))
	}
	if q.Event != "" {
		tx = tx.Where("event = ?", q.Event)
	}
	switch {
	case q.At != nil:
		tx = tx.Where("created_at = ?", *q.At)
	case q.Before != nil:
		tx = tx.Where("created_at < ?", *q.Before)
	}
	if q.At == nil {
		tx = tx.Limit(q.Limit)
	}
	var rows []deliveryRow
	if err := tx.Order("created_at DESC, id DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out := make([]*delivery.Delivery, 0, len(rows))
	for _, r := range rows {
		d, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Purge implements delivery.Store.
func (s *DeliveryStore) Purge(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`
		DELETE FROM `+Schema+`.deliveries
		WHERE id IN (SELECT id FROM `+Schema+`.deliveries WHERE created_at < ? LIMIT ?)`, cutoff, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("purge deliveries: %w", res.Error)
	}
	return res.RowsAffected, nil
}
