package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// ListWorkspaces returns the workspace with slug (none or one), or every
// workspace when slug is "". A slug no workspace can have (not lowercase
// letters, digits and hyphens, a NUL) is refused as a field of a new
// workspace is, not looked for.
func (a *App) ListWorkspaces(ctx context.Context, slug string) ([]account.Workspace, error) {
	if slug != "" {
		if err := account.ValidateSlug(slug); err != nil {
			return nil, err
		}
	}
	return a.workspaces.List(ctx, slug)
}
