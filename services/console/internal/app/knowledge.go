package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// Documents lists the workspace's knowledge-base documents.
func (a *App) Documents(ctx context.Context, op operator.Operator, workspaceID string) ([]flowrunnerapi.KnowledgeDocument, error) {
	if err := visible(op, workspaceID); err != nil {
		return nil, err
	}
	docs, err := a.flows.ListDocuments(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	return docs, nil
}

// AddDocument adds a Markdown document to the workspace's knowledge base.
// formID is the add form's: posted again, it adds nothing (once).
func (a *App) AddDocument(ctx context.Context, op operator.Operator, workspaceID, formID, title, markdown string) (flowrunnerapi.KnowledgeDocument, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.KnowledgeDocument{}, err
	}
	input := [2]string{title, markdown}
	return once(ctx, a, workspaceID, formID, FormAddDocument, input, func() (flowrunnerapi.KnowledgeDocument, error) {
		d, err := written(a.flows.AddDocument(ctx, workspaceID, title, markdown))
		if err != nil {
			return flowrunnerapi.KnowledgeDocument{}, fmt.Errorf("add document: %w", err)
		}
		return d, nil
	}, func(d flowrunnerapi.KnowledgeDocument) string { return d.ID })
}

// ErrDocumentNotFound is a document the workspace does not have.
var ErrDocumentNotFound = fmt.Errorf("no such document")

// DeleteDocument deletes one of the workspace's documents; the flow-runner
// is given the workspace, so another workspace's document is not found.
func (a *App) DeleteDocument(ctx context.Context, op operator.Operator, workspaceID, documentID string) error {
	if err := visible(op, workspaceID); err != nil {
		return err
	}
	if !IsID(documentID) {
		// Names no document: the flow-runner is not asked.
		return ErrDocumentNotFound
	}
	_, err := a.flows.DeleteDocument(ctx, documentID, workspaceID)
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound {
		return ErrDocumentNotFound
	}
	if err != nil {
		return fmt.Errorf("delete document: %w", err)
	}
	return nil
}
