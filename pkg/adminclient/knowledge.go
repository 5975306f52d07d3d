package adminclient

import (
	"context"
	"net/http"
	"net/url"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/rpc"
)

func documentsPath(workspaceID string) string {
	return "/admin/workspaces/" + segment(workspaceID) + "/kb/documents"
}

// AddDocument adds a Markdown document to a workspace's knowledge base.
// markdown must be UTF-8: JSON would carry other bytes as U+FFFD.
func (c *Client) AddDocument(ctx context.Context, workspaceID, title, markdown string) (flowrunnerapi.KnowledgeDocument, error) {
	var out flowrunnerapi.KnowledgeDocumentResponse
	body := flowrunnerapi.AddKnowledgeDocumentRequest{Title: title, Markdown: markdown}
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPost, documentsPath(workspaceID), body, &out)
	return out.Document, err
}

// ListDocuments returns a workspace's knowledge-base documents.
func (c *Client) ListDocuments(ctx context.Context, workspaceID string) ([]flowrunnerapi.KnowledgeDocument, error) {
	var out flowrunnerapi.KnowledgeDocumentsResponse
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodGet, documentsPath(workspaceID), nil, &out)
	return out.Documents, err
}

// DeleteDocument deletes a document; with workspaceID only when it is that
// workspace's (404 document_not_found otherwise), a guard against a
// mistyped id.
func (c *Client) DeleteDocument(ctx context.Context, documentID, workspaceID string) (flowrunnerapi.DeletedDocument, error) {
	var query url.Values
	if workspaceID != "" {
		query = url.Values{"workspace": {workspaceID}}
	}
	var out flowrunnerapi.DeletedDocument
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodDelete, withQuery("/admin/kb/documents/"+segment(documentID), query), nil, &out)
	return out, err
}
