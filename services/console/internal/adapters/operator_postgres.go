package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// OperatorStore keeps operators in console.operators.
type OperatorStore struct {
	db *gorm.DB
}

var _ operator.Store = (*OperatorStore)(nil)

// NewOperatorStore returns a store on gdb.
func NewOperatorStore(gdb *gorm.DB) *OperatorStore { return &OperatorStore{db: gdb} }

type operatorRow struct {
	ID           string    `gorm:"column:id;primaryKey"`
	Email        string    `gorm:"column:email"`
	PasswordHash string    `gorm:"column:password_hash"`
	WorkspaceID  *string   `gorm:"column:workspace_id"`
	CreatedAt    time.Time `gorm:"column:created_at"`
}

func (operatorRow) TableName() string { return Schema + ".operators" }

func toOperatorRow(o operator.Operator) operatorRow {
	r := operatorRow{ID: o.ID, Email: o.Email, PasswordHash: o.PasswordHash, CreatedAt: o.CreatedAt.UTC()}
	if o.WorkspaceID != "" {
		ws := o.WorkspaceID
		r.WorkspaceID = &ws
	}
	return r
}

func (r operatorRow) toDomain() operator.Operator {
	o := operator.Operator{ID: r.ID, Email: r.Email, PasswordHash: r.PasswordHash, CreatedAt: r.CreatedAt.UTC()}
	if r.WorkspaceID != nil {
		o.WorkspaceID = *r.WorkspaceID
	}
	return o
}

// Create implements operator.Store.
func (s *OperatorStore) Create(ctx context.Context, o operator.Operator) error {
	row := toOperatorRow(o)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if db.IsUniqueViolation(err) {
			return operator.ErrExists
		}
		return fmt.Errorf("insert operator: %w", err)
	}
	return nil
}

// ByEmail implements operator.Store; lower(email) is what the unique index
// holds, so the lookup uses it.
func (s *OperatorStore) ByEmail(ctx context.Context, email string) (operator.Operator, error) {
	if !db.Storable(email) {
		return operator.Operator{}, operator.ErrNotFound // no operator has it (a NUL in a sign-in form)
	}
	return s.find(ctx, "lower(email) = lower(?)", email)
}

// ByID implements operator.Store.
func (s *OperatorStore) ByID(ctx context.Context, id string) (operator.Operator, error) {
	return s.find(ctx, "id = ?", id)
}

func (s *OperatorStore) find(ctx context.Context, where string, arg string) (operator.Operator, error) {
	var row operatorRow
	err := s.db.WithContext(ctx).Where(where, arg).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return operator.Operator{}, operator.ErrNotFound
	}
	if err != nil {
		return operator.Operator{}, fmt.Errorf("find operator: %w", err)
	}
	return row.toDomain(), nil
}
