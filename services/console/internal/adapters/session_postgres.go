package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

// SessionStore keeps sessions, by the hash of their token, in
// console.sessions.
type SessionStore struct {
	db *gorm.DB
}

var _ session.Store = (*SessionStore)(nil)

// NewSessionStore returns a store on gdb.
func NewSessionStore(gdb *gorm.DB) *SessionStore { return &SessionStore{db: gdb} }

type sessionRow struct {
	ID         string    `gorm:"column:id;primaryKey"`
	TokenHash  []byte    `gorm:"column:token_hash"`
	OperatorID string    `gorm:"column:operator_id"`
	CreatedAt  time.Time `gorm:"column:created_at"`
	ExpiresAt  time.Time `gorm:"column:expires_at"`
}

func (sessionRow) TableName() string { return Schema + ".sessions" }

// Create implements session.Store.
func (s *SessionStore) Create(ctx context.Context, ss session.Session) error {
	row := sessionRow{ID: ss.ID, TokenHash: ss.TokenHash, OperatorID: ss.OperatorID,
		CreatedAt: ss.CreatedAt.UTC(), ExpiresAt: ss.ExpiresAt.UTC()}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// ByTokenHash implements session.Store.
func (s *SessionStore) ByTokenHash(ctx context.Context, hash []byte) (session.Session, error) {
	var row sessionRow
	err := s.db.WithContext(ctx).Where("token_hash = ?", hash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return session.Session{}, session.ErrNotFound
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("find session: %w", err)
	}
	return session.Session{ID: row.ID, TokenHash: row.TokenHash, OperatorID: row.OperatorID,
		CreatedAt: row.CreatedAt.UTC(), ExpiresAt: row.ExpiresAt.UTC()}, nil
}

// Extend implements session.Store. It never moves an expiry back, so two
// requests sliding the same session at once keep the later one.
func (s *SessionStore) Extend(ctx context.Context, id string, expiresAt time.Time) error {
	err := s.db.WithContext(ctx).Model(&sessionRow{}).
		Where("id = ? AND expires_at < ?", id, expiresAt.UTC()).
		Update("expires_at", expiresAt.UTC()).Error
	if err != nil {
		return fmt.Errorf("extend session: %w", err)
	}
	return nil
}

// Delete implements session.Store.
func (s *SessionStore) Delete(ctx context.Context, id string) error {
	if err := s.db.WithContext(ctx).Where("id = ?", id).Delete(&sessionRow{}).Error; err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteExpired implements session.Store.
func (s *SessionStore) DeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now.UTC()).Delete(&sessionRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}
