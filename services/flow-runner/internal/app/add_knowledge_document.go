package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/knowledge"
)

// AddKnowledgeDocument splits a Markdown document into passages and adds
// it to the workspace's knowledge base, where knowledge nodes find it at
// once. A refused document is a *knowledge.ValidationError naming the
// field (title or markdown).
func (a *App) AddKnowledgeDocument(ctx context.Context, workspaceID, title string, markdown []byte) (*catalog.KnowledgeDocument, error) {
	doc, err := knowledge.Split(title, markdown)
	if err != nil {
		return nil, err
	}
	return a.knowledge.AddDocument(ctx, catalog.KnowledgeUpload{
		ID: a.newID(), WorkspaceID: workspaceID, Title: doc.Title, Passages: doc.Passages, Now: a.now().UTC(),
	})
}
