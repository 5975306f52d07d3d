package catalog

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/knowledge"
)

// ErrDocumentNotFound is a knowledge-base document that is unknown, or of
// another workspace than the one asked for.
var ErrDocumentNotFound = errors.New("knowledge document not found")

// KnowledgeDocument is a document of a workspace's knowledge base.
type KnowledgeDocument struct {
	ID          string
	WorkspaceID string
	Title       string
	// Passages is how many passages the document was split into.
	Passages  int
	CreatedAt time.Time
}

// KnowledgeUpload is a split document to store.
type KnowledgeUpload struct {
	ID          string
	WorkspaceID string
	Title       string
	Passages    []knowledge.Passage
	Now         time.Time
}

// KnowledgeStore keeps the workspaces' knowledge bases. Its search is the
// engine's run.KnowledgeBase.
type KnowledgeStore interface {
	// AddDocument stores a document and its passages together.
	AddDocument(ctx context.Context, u KnowledgeUpload) (*KnowledgeDocument, error)
	// ListDocuments returns the workspace's documents, newest first.
	ListDocuments(ctx context.Context, workspaceID string) ([]*KnowledgeDocument, error)
	// DeleteDocument deletes a document and its passages:
	// ErrDocumentNotFound when it is unknown or, with a workspaceID, not
	// that workspace's (an empty workspaceID deletes it wherever it is).
	DeleteDocument(ctx context.Context, workspaceID, documentID string) error
}
