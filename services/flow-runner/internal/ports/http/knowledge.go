package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ids"
)

// CodeDocumentNotFound is a knowledge-base document that is unknown, or
// not the workspace's.
const CodeDocumentNotFound = "document_not_found"

// adminWorkspace is the :ws of an admin route, which must be a workspace
// id.
func adminWorkspace(c echo.Context) (string, error) {
	ws := c.Param("ws")
	if !ids.Valid(ws) {
		return "", errs.InvalidID("workspace", "workspace")
	}
	return ws, nil
}

func (h *handlers) addKnowledgeDocument(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	var req flowrunnerapi.AddKnowledgeDocumentRequest
	if err := httpx.DecodeJSON(c.Request().Body, &req); err != nil {
		return err
	}
	d, err := h.app.AddKnowledgeDocument(c.Request().Context(), ws, req.Title, []byte(req.Markdown))
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusCreated, flowrunnerapi.KnowledgeDocumentResponse{Document: toAPIKnowledgeDocument(d)})
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
	out := flowrunnerapi.KnowledgeDocumentsResponse{Documents: make([]flowrunnerapi.KnowledgeDocument, 0, len(docs))}
	for _, d := range docs {
		out.Documents = append(out.Documents, toAPIKnowledgeDocument(d))
	}
	return c.JSON(http.StatusOK, out)
}

// deleteKnowledgeDocument deletes a document wherever it is, or with
// ?workspace= only when it is that workspace's.
func (h *handlers) deleteKnowledgeDocument(c echo.Context) error {
	ws := c.QueryParam("workspace")
	if ws != "" && !ids.Valid(ws) {
		return errs.InvalidID("workspace", "workspace")
	}
	id := c.Param("id")
	if err := h.app.DeleteKnowledgeDocument(c.Request().Context(), ws, id); err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, flowrunnerapi.DeletedDocument{ID: id, Deleted: true})
}
