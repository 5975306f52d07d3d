package app

import "context"

// DeleteKnowledgeDocument removes a document and its passages from its
// knowledge base; searches stop finding them at once. With a workspaceID
// the document must be that workspace's (catalog.ErrDocumentNotFound
// otherwise), so that a mistyped id cannot delete another workspace's.
func (a *App) DeleteKnowledgeDocument(ctx context.Context, workspaceID, documentID string) error {
	return a.knowledge.DeleteDocument(ctx, workspaceID, documentID)
}
