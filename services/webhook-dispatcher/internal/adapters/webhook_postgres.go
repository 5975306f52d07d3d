package adapters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/groupcommit"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// WebhookStore keeps webhooks in dispatch.webhooks.
type WebhookStore struct {
	db *gorm.DB
	// reads batches the Gets of concurrent deliveries into one query.
	reads *groupcommit.Committer[*webhookRead]
}

var _ webhook.Store = (*WebhookStore)(nil)

// NewWebhookStore returns the store over gdb (opened for Schema).
func NewWebhookStore(gdb *gorm.DB) *WebhookStore {
	s := &WebhookStore{db: gdb}
	s.reads = groupcommit.New(DefaultWriteBatch, groupWriters, groupLinger, nil, s.readBatch)
	return s
}

type webhookRow struct {
	ID                  string `gorm:"primaryKey"`
	WorkspaceID         string
	URL                 string
	Secret              string
	Status              string
	ConsecutiveFailures int
	PausedAt            *time.Time
	CreatedAt           time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt           time.Time `gorm:"autoUpdateTime:false"`
}

func (webhookRow) TableName() string { return Schema + ".webhooks" }

func webhookToRow(w *webhook.Webhook) webhookRow {
	return webhookRow{
		ID:                  w.ID,
		WorkspaceID:         w.WorkspaceID,
		URL:                 w.URL,
		Secret:              w.Secret,
		Status:              string(w.Status),
		ConsecutiveFailures: w.ConsecutiveFailures,
		PausedAt:            w.PausedAt,
		CreatedAt:           w.CreatedAt,
		UpdatedAt:           w.UpdatedAt,
	}
}

func (r webhookRow) toDomain() *webhook.Webhook {
	w := &webhook.Webhook{
		ID:                  r.ID,
		WorkspaceID:         r.WorkspaceID,
		URL:                 r.URL,
		Secret:              r.Secret,
		Status:              webhook.Status(r.Status),
		ConsecutiveFailures: r.ConsecutiveFailures,
		CreatedAt:           r.CreatedAt.UTC(),
		UpdatedAt:           r.UpdatedAt.UTC(),
	}
	if r.PausedAt != nil {
		t := r.PausedAt.UTC()
		w.PausedAt = &t
	}
	return w
}

// webhookRead is one Get waiting for its batch.
type webhookRead struct {
	workspaceID string
	found       *webhook.Webhook
}

// Get implements webhook.Store. Every delivery starts with it, so the Gets
// of concurrent deliveries share one query (a group read): each still sees
// the webhook as stored after it asked, never an older copy — a save,
// resave, delete or pause takes effect for every delivery that starts
// after it.
func (s *WebhookStore) Get(ctx context.Context, workspaceID string) (*webhook.Webhook, error) {
	if !ids.Valid(workspaceID) {
		return nil, webhook.ErrNotFound // no webhook has such a workspace id
	}
	r := &webhookRead{workspaceID: workspaceID}
	if err := s.reads.Do(ctx, r); err != nil {
		return nil, err
	}
	if r.found == nil {
		return nil, webhook.ErrNotFound
	}
	return r.found, nil
}

// readBatch reads the webhooks of a batch of Gets in one query.
func (s *WebhookStore) readBatch(ctx context.Context, batch []*groupcommit.Job[*webhookRead]) error {
	workspaces := make([]string, 0, len(batch))
	for _, j := range batch {
		workspaces = append(workspaces, ids.Canonical(j.Item.workspaceID))
	}
	slices.Sort(workspaces)
	workspaces = slices.Compact(workspaces)
	hooks, err := loadWebhooks(ctx, s.db.Statement.ConnPool, workspaces, false)
	if err != nil {
		return err
	}
	for _, j := range batch {
		j.Item.found = nil
		if w := hooks[ids.Canonical(j.Item.workspaceID)]; w != nil {
			// Each caller gets its own copy to change.
			c := *w.Webhook
			j.Item.found = &c
		}
	}
	return nil
}

// Put implements webhook.Store in one statement, so two saves racing for a
// workspace without a webhook end in one row.
func (s *WebhookStore) Put(ctx context.Context, w *webhook.Webhook) (*webhook.Webhook, error) {
	in := webhookToRow(w)
	var out webhookRow
	err := s.db.WithContext(ctx).Raw(`
		INSERT INTO `+Schema+`.webhooks (id, workspace_id, url, secret, status, consecutive_failures, paused_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace_id) DO UPDATE SET
			url = EXCLUDED.url,
			secret = EXCLUDED.secret,
			status = EXCLUDED.status,
			consecutive_failures = EXCLUDED.consecutive_failures,
			paused_at = EXCLUDED.paused_at,
			updated_at = EXCLUDED.updated_at
		RETURNING *`,
		in.ID, in.WorkspaceID, in.URL, in.Secret, in.Status, in.ConsecutiveFailures, in.PausedAt, in.CreatedAt, in.UpdatedAt,
	).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("save webhook: %w", err)
	}
	return out.toDomain(), nil
}

// Update implements webhook.Store.
func (s *WebhookStore) Update(ctx context.Context, workspaceID string, fn func(*webhook.Webhook) error) (*webhook.Webhook, error) {
	var out *webhook.Webhook
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row webhookRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("workspace_id = ?", workspaceID).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return webhook.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("load webhook: %w", err)
		}
		w := row.toDomain()
		if err := fn(w); err != nil {
			return err
		}
		next := webhookToRow(w)
		if err := tx.Save(&next).Error; err != nil {
			return fmt.Errorf("update webhook: %w", err)
		}
		out = w
		return nil
	})
	return out, err
}

// Delete implements webhook.Store.
func (s *WebhookStore) Delete(ctx context.Context, workspaceID string) error {
	res := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID).Delete(&webhookRow{})
	if res.Error != nil {
		return fmt.Errorf("delete webhook: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return webhook.ErrNotFound
	}
	return nil
}
