package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/rpc"
)

// KnowledgeDocument is a document of a workspace's knowledge base, split
// into Passages for search.
type KnowledgeDocument struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Passages  int    `json:"passages"`
	CreatedAt string `json:"created_at"`
}

// DeletedDocument is the flow-runner's answer to a deletion.
type DeletedDocument struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func documentsPath(workspaceID string) string {
	return "/admin/workspaces/" + segment(workspaceID) + "/kb/documents"
}

// AddDocument adds a Markdown document to a workspace's knowledge base.
// markdown must be UTF-8: JSON would carry other bytes as U+FFFD.
func (c *Client) AddDocument(ctx context.Context, workspaceID, title, markdown string) (KnowledgeDocument, error) {
	var out struct {
		Document KnowledgeDocument `json:"document"`
	}
	body := map[string]string{"title": title, "markdown": markdown}
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPost, documentsPath(workspaceID), body, &out)
	return out.Document, err
}

// ListDocuments returns a workspace's knowledge-base documents.
func (c *Client) ListDocuments(ctx context.Context, workspaceID string) ([]KnowledgeDocument, error) {
	var out struct {
		Documents []KnowledgeDocument `json:"documents"`
	}
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodGet, documentsPath(workspaceID), nil, &out)
	return out.Documents, err
}

// DeleteDocument deletes a document; with workspaceID only when it is that
// workspace's (404 document_not_found otherwise), a guard against a
// mistyped id.
func (c *Client) DeleteDocument(ctx context.Context, documentID, workspaceID string) (DeletedDocument, error) {
	var query url.Values
	if workspaceID != "" {
		query = url.Values{"workspace": {workspaceID}}
	}
	var out DeletedDocument
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodDelete, withQuery("/admin/kb/documents/"+segment(documentID), query), nil, &out)
	return out, err
}
