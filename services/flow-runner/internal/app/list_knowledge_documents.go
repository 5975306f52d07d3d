package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// ListKnowledgeDocuments returns the documents of the workspace's
// knowledge base, newest first.
func (a *App) ListKnowledgeDocuments(ctx context.Context, workspaceID string) ([]*catalog.KnowledgeDocument, error) {
	return a.knowledge.ListDocuments(ctx, workspaceID)
}
