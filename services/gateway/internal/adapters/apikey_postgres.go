package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// KeyStore keeps API keys, hashed, in accounts.api_keys.
type KeyStore struct {
	db *gorm.DB
}

var _ account.KeyStore = (*KeyStore)(nil)

// NewKeyStore returns a store on gdb.
func NewKeyStore(gdb *gorm.DB) *KeyStore {
	return &KeyStore{db: gdb}
}

type apiKeyRow struct {
	ID            string     `gorm:"column:id;primaryKey"`
	WorkspaceID   string     `gorm:"column:workspace_id"`
	Name          string     `gorm:"column:name"`
	KeyHash       string     `gorm:"column:key_hash"`
	DisplayPrefix string     `gorm:"column:display_prefix"`
	CreatedAt     time.Time  `gorm:"column:created_at"`
	RevokedAt     *time.Time `gorm:"column:revoked_at"`
	LastUsedAt    *time.Time `gorm:"column:last_used_at"`
}

func (apiKeyRow) TableName() string { return Schema + ".api_keys" }

func toAPIKeyRow(k account.APIKey) apiKeyRow {
	return apiKeyRow{
		ID: k.ID, WorkspaceID: k.WorkspaceID, Name: k.Name, KeyHash: k.Hash,
		DisplayPrefix: k.Prefix, CreatedAt: k.CreatedAt.UTC(), RevokedAt: utcPtr(k.RevokedAt), LastUsedAt: utcPtr(k.LastUsedAt),
	}
}

func (r apiKeyRow) toDomain() account.APIKey {
	return account.APIKey{
		ID: r.ID, WorkspaceID: r.WorkspaceID, Name: r.Name, Hash: r.KeyHash,
		Prefix: r.DisplayPrefix, CreatedAt: r.CreatedAt.UTC(), RevokedAt: utcPtr(r.RevokedAt), LastUsedAt: utcPtr(r.LastUsedAt),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Create implements account.KeyStore.
func (s *KeyStore) Create(ctx context.Context, k account.APIKey) error {
	row := toAPIKeyRow(k)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if db.IsUniqueViolation(err) {
			return account.ErrKeyExists
		}
		if errors.Is(err, gorm.ErrForeignKeyViolated) {
			return account.ErrWorkspaceNotFound
		}
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// FindByHash implements account.KeyStore.
func (s *KeyStore) FindByHash(ctx context.Context, hash string) (account.APIKey, error) {
	var row apiKeyRow
	err := s.db.WithContext(ctx).Where("key_hash = ?", hash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return account.APIKey{}, account.ErrAPIKeyNotFound
	}
	if err != nil {
		return account.APIKey{}, fmt.Errorf("find api key: %w", err)
	}
	return row.toDomain(), nil
}

// credentialRow is a key and its workspace in one row; the columns are
// prefixed (k_, w_) because both tables have an id, a name and a
// created_at.
type credentialRow struct {
	Key       apiKeyRow    `gorm:"embedded;embeddedPrefix:k_"`
	Workspace workspaceRow `gorm:"embedded;embeddedPrefix:w_"`
}

// fields are where Scan puts findCredential's columns, in their order.
func (r *credentialRow) fields() []any {
	k, w := &r.Key, &r.Workspace
	return []any{
		&k.ID, &k.WorkspaceID, &k.Name, &k.KeyHash, &k.DisplayPrefix, &k.CreatedAt, &k.RevokedAt, &k.LastUsedAt,
		&w.ID, &w.Name, &w.Slug, &w.PlanName, (*[]string)(&w.Modules), &w.AIUsed, &w.AILimit, &w.RatePerMinute,
		(*[]string)(&w.FeaturesOn), (*[]string)(&w.FeaturesOff), &w.CreatedAt, &w.UpdatedAt,
	}
}

// findCredential reads a key and its workspace and, in the same statement,
// records the key's use when it is active and its stored last use is
// missing or stale: most authentications write nothing, and the row is
// locked only for the one a minute that does. The main SELECT sees the
// table as it was before the CTE's UPDATE, so the new time comes from the
// UPDATE's RETURNING. Parameters: the hash, the time of use, the time
// before which a stored use is stale, the hash again.
const findCredential = `WITH used AS (
	UPDATE ` + Schema + `.api_keys SET last_used_at = ?
	WHERE key_hash = ? AND revoked_at IS NULL AND (last_used_at IS NULL OR last_used_at < ?)
	RETURNING id, last_used_at
)
SELECT
	k.id AS k_id, k.workspace_id AS k_workspace_id, k.name AS k_name, k.key_hash AS k_key_hash,
	k.display_prefix AS k_display_prefix, k.created_at AS k_created_at, k.revoked_at AS k_revoked_at,
	COALESCE(u.last_used_at, k.last_used_at) AS k_last_used_at,
	w.id AS w_id, w.name AS w_name, w.slug AS w_slug, w.plan_name AS w_plan_name, w.modules AS w_modules,
	w.ai_used AS w_ai_used, w.ai_limit AS w_ai_limit, w.rate_per_minute AS w_rate_per_minute,
	w.features AS w_features, w.features_off AS w_features_off, w.created_at AS w_created_at, w.updated_at AS w_updated_at
FROM ` + Schema + `.api_keys k JOIN ` + Schema + `.workspaces w ON w.id = k.workspace_id
LEFT JOIN used u ON u.id = k.id
WHERE k.key_hash = ?`

// FindCredential implements account.KeyStore.
func (s *KeyStore) FindCredential(ctx context.Context, hash string, usedAt time.Time) (account.APIKey, account.Workspace, error) {
	usedAt = usedAt.UTC()
	stale := usedAt.Add(-account.LastUsedResolution)
	// Every API request reads its key: the row is scanned by pgx, not
	// gorm (db.ScanRows), whose reflection cost more than the query.
	var row credentialRow
	found := false
	err := db.ScanRows(ctx, s.db.WithContext(ctx).Raw(findCredential, usedAt, hash, stale, hash), func(rows pgx.Rows) error {
		found = true
		return rows.Scan(row.fields()...)
	})
	if err != nil {
		return account.APIKey{}, account.Workspace{}, fmt.Errorf("find api key: %w", err)
	}
	if !found {
		return account.APIKey{}, account.Workspace{}, account.ErrAPIKeyNotFound
	}
	return row.Key.toDomain(), row.Workspace.toDomain(), nil
}

// ListByWorkspace implements account.KeyStore.
func (s *KeyStore) ListByWorkspace(ctx context.Context, workspaceID string) ([]account.APIKey, error) {
	if !ids.Valid(workspaceID) {
		return []account.APIKey{}, nil
	}
	var rows []apiKeyRow
	// Version 7 ids order keys created in the same microsecond.
	if err := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out := make([]account.APIKey, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// Update implements account.KeyStore.
func (s *KeyStore) Update(ctx context.Context, id string, change func(*account.APIKey) error) (account.APIKey, error) {
	if !ids.Valid(id) {
		return account.APIKey{}, account.ErrAPIKeyNotFound
	}
	var out account.APIKey
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row apiKeyRow
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return account.ErrAPIKeyNotFound
		}
		if err != nil {
			return fmt.Errorf("load api key %s: %w", id, err)
		}
		k := row.toDomain()
		if err := change(&k); err != nil {
			return err
		}
		next := toAPIKeyRow(k)
		if err := tx.Save(&next).Error; err != nil {
			return fmt.Errorf("save api key %s: %w", id, err)
		}
		out = next.toDomain()
		return nil
	})
	return out, err
}
