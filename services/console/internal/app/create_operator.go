package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// NewOperator is an operator to create; an empty WorkspaceID makes a
// platform operator.
type NewOperator struct {
	Email       string
	Password    string
	WorkspaceID string
}

// CreateOperator checks and stores a new operator, its password hashed.
// The email keeps the case it was given; uniqueness ignores case.
func (a *App) CreateOperator(ctx context.Context, in NewOperator) (operator.Operator, error) {
	if err := operator.ValidateEmail(in.Email); err != nil {
		return operator.Operator{}, err
	}
	if err := operator.ValidatePassword(in.Password); err != nil {
		return operator.Operator{}, err
	}
	if in.WorkspaceID != "" {
		// The zero operator is a platform one: it may see any workspace.
		if _, err := a.Workspace(ctx, operator.Operator{}, in.WorkspaceID); err != nil {
			if errors.Is(err, ErrWorkspaceNotFound) {
				return operator.Operator{}, &operator.InvalidError{Field: "workspace_id", Reason: fmt.Sprintf("no workspace %q", in.WorkspaceID)}
			}
			return operator.Operator{}, err
		}
	}
	hash, err := a.hasher.Hash(in.Password)
	if err != nil {
		return operator.Operator{}, fmt.Errorf("hash password: %w", err)
	}
	o := operator.Operator{ID: a.newID(), Email: in.Email, WorkspaceID: in.WorkspaceID, PasswordHash: hash, CreatedAt: a.now()}
	if err := a.operators.Create(ctx, o); err != nil {
		return operator.Operator{}, err
	}
	return o, nil
}
