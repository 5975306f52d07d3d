package http

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// CodeDocumentNotFound is a knowledge-base document that is unknown, or
// not the workspace's.
const CodeDocumentNotFound = "document_not_found"

// knowledgeDocumentDTO is a knowledge-base document of the admin contract.
type knowledgeDocumentDTO struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Passages  int    `json:"passages"`
	CreatedAt string `json:"created_at"`
}

func toKnowledgeDocumentDTO(d *catalog.KnowledgeDocument) knowledgeDocumentDTO {
	return knowledgeDocumentDTO{ID: d.ID, Title: d.Title, Passages: d.Passages, CreatedAt: httpx.Timestamp(d.CreatedAt)}
}

// addKnowledgeDocumentRequest is the body of an upload: the Markdown as a
// JSON string, which needs no encoding of its own and keeps Cyrillic
// readable.
type addKnowledgeDocumentRequest struct {
	Title    string `json:"title"`
	Markdown string `json:"markdown"`
}

type knowledgeDocumentResponse struct {
	Document knowledgeDocumentDTO `json:"document"`
}

type knowledgeDocumentsResponse struct {
	Documents []knowledgeDocumentDTO `json:"documents"`
}

type knowledgeDocumentDeletedResponse struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// adminWorkspace is the :ws of an admin route, which must be a workspace
// id.
func adminWorkspace(c echo.Context) (string, error) {
	ws := c.Param("ws")
	if _, err := uuid.Parse(ws); err != nil {
		return "", errs.InvalidRequest("workspace: %q is not a workspace id", ws)
	}
	return ws, nil
}

func (h *handlers) addKnowledgeDocument(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	var req addKnowledgeDocumentRequest
	if err := httpx.DecodeJSON(c.Request().Body, &req); err != nil {
		return err
	}
	d, err := h.app.AddKnowledgeDocument(c.Request().Context(), ws, req.Title, []byte(req.Markdown))
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusCreated, knowledgeDocumentResponse{Document: toKnowledgeDocumentDTO(d)})
}

func (h *handlers) listKnowledgeDocuments(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	docs, err := h.app.ListKnowledgeDocuments(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	out := knowledgeDocumentsResponse{Documents: make([]knowledgeDocumentDTO, 0, len(docs))}
	for _, d := range docs {
		out.Documents = append(out.Documents, toKnowledgeDocumentDTO(d))
	}
	return c.JSON(http.StatusOK, out)
}

// deleteKnowledgeDocument deletes a document wherever it is, or with
// ?workspace= only when it is that workspace's.
func (h *handlers) deleteKnowledgeDocument(c echo.Context) error {
	ws := c.QueryParam("workspace")
	if _, err := uuid.Parse(ws); ws != "" && err != nil {
		return errs.InvalidRequest("workspace: %q is not a workspace id", ws)
	}
	id := c.Param("id")
	if err := h.app.DeleteKnowledgeDocument(c.Request().Context(), ws, id); err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, knowledgeDocumentDeletedResponse{ID: id, Deleted: true})
}
