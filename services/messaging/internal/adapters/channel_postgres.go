package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// ChannelStore keeps channels in messaging.channels.
type ChannelStore struct {
	db *gorm.DB
}

var _ channel.Store = (*ChannelStore)(nil)

// NewChannelStore returns a store on gdb.
func NewChannelStore(gdb *gorm.DB) *ChannelStore { return &ChannelStore{db: gdb} }

type channelRow struct {
	ID          string `gorm:"column:id;primaryKey"`
	WorkspaceID string `gorm:"column:workspace_id"`
	Kind        string `gorm:"column:kind"`
	ExternalID  string `gorm:"column:external_id"`
	Token       string `gorm:"column:token"`
	Secret      string `gorm:"column:secret"`
	AIMode      string `gorm:"column:ai_mode"`
	Status      string `gorm:"column:status"`
	CreatedAt   time.Time
}

func (channelRow) TableName() string { return "messaging.channels" }

// prefixedChannelColumns are channelRow's columns of the channels joined
// as ch, each named with the prefix ch_ (a channelRow embedded with
// embeddedPrefix:ch_ reads them).
const prefixedChannelColumns = `ch.id AS ch_id, ch.workspace_id AS ch_workspace_id, ch.kind AS ch_kind,
	ch.external_id AS ch_external_id, ch.token AS ch_token, ch.secret AS ch_secret, ch.ai_mode AS ch_ai_mode,
	ch.status AS ch_status, ch.created_at AS ch_created_at`

func channelToRow(c channel.Channel) channelRow {
	return channelRow{
		ID: c.ID, WorkspaceID: c.WorkspaceID, Kind: string(c.Kind), ExternalID: c.ExternalID,
		Token: c.Token, Secret: c.Secret, AIMode: string(c.AIMode), Status: string(c.Status), CreatedAt: c.CreatedAt,
	}
}

func (r channelRow) toDomain() channel.Channel {
	return channel.Channel{
		ID: r.ID, WorkspaceID: r.WorkspaceID, Kind: channel.Kind(r.Kind), ExternalID: r.ExternalID,
		Token: r.Token, Secret: r.Secret, AIMode: channel.AIMode(r.AIMode), Status: channel.Status(r.Status),
		CreatedAt: utc(r.CreatedAt),
	}
}

// Create stores a new channel; ErrExists when its kind and external id are
// taken.
func (s *ChannelStore) Create(ctx context.Context, c channel.Channel) error {
	row := channelToRow(c)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if db.IsUniqueViolation(err) {
			return channel.ErrExists
		}
		return fmt.Errorf("insert channel: %w", err)
	}
	return nil
}

// GetByExternalID implements channel.Store.
func (s *ChannelStore) GetByExternalID(ctx context.Context, kind channel.Kind, externalID string) (channel.Channel, error) {
	if externalID == "" {
		return channel.Channel{}, channel.ErrNotFound
	}
	var row channelRow
	err := s.db.WithContext(ctx).Where("kind = ? AND external_id = ?", string(kind), externalID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return channel.Channel{}, channel.ErrNotFound
	}
	if err != nil {
		return channel.Channel{}, fmt.Errorf("load %s channel %s: %w", kind, externalID, err)
	}
	return row.toDomain(), nil
}

// Get returns the channel with id.
func (s *ChannelStore) Get(ctx context.Context, id string) (channel.Channel, error) {
	if !validID(id) {
		return channel.Channel{}, channel.ErrNotFound
	}
	var row channelRow
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return channel.Channel{}, channel.ErrNotFound
	}
	if err != nil {
		return channel.Channel{}, fmt.Errorf("load channel %s: %w", id, err)
	}
	return row.toDomain(), nil
}

// ListByWorkspace returns the workspace's channels, oldest first.
func (s *ChannelStore) ListByWorkspace(ctx context.Context, workspaceID string) ([]channel.Channel, error) {
	if !validID(workspaceID) {
		return []channel.Channel{}, nil
	}
	var rows []channelRow
	if err := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	out := make([]channel.Channel, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// Update locks the channel row, applies fn and saves the result.
func (s *ChannelStore) Update(ctx context.Context, id string, fn func(*channel.Channel) error) (channel.Channel, error) {
	if !validID(id) {
		return channel.Channel{}, channel.ErrNotFound
	}
	var out channel.Channel
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row channelRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return channel.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("load channel %s: %w", id, err)
		}
		c := row.toDomain()
		if err := fn(&c); err != nil {
			return err
		}
		updated := channelToRow(c)
		if err := tx.Model(&channelRow{}).Where("id = ?", id).Updates(map[string]any{
			"external_id": updated.ExternalID,
			"token":       updated.Token,
			"secret":      updated.Secret,
			"ai_mode":     updated.AIMode,
			"status":      updated.Status,
		}).Error; err != nil {
			if db.IsUniqueViolation(err) {
				return channel.ErrExists
			}
			return fmt.Errorf("update channel %s: %w", id, err)
		}
		out = c
		return nil
	})
	return out, err
}
