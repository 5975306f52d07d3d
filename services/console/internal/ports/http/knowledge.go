package http

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// maxMarkdown is the largest Markdown document the flow-runner takes
// (its knowledge.MaxDocumentBytes): a larger file is refused here, in
// words, before it is sent.
const maxMarkdown = 512 << 10

// mountKnowledge adds the knowledge-base pages to a workspace's group.
func (c *Console) mountKnowledge(ws *echo.Group) {
	ws.GET("/kb", c.knowledgePage)
	ws.POST("/kb", c.addDocument)
	ws.GET("/kb/:docId/delete", c.deleteDocumentForm)
	ws.POST("/kb/:docId/delete", c.deleteDocument)
}

// knowledgeView is the kb template's data: the list with the add form,
// or the confirmation of a deletion when Confirm is set.
type knowledgeView struct {
	Flash     string
	Documents []flowrunnerapi.KnowledgeDocument
	// Title and Markdown are what the add form was sent, kept when it is
	// drawn again.
	Title    string
	Markdown string
	Confirm  *flowrunnerapi.KnowledgeDocument
}

func (c *Console) knowledgeView(ctx echo.Context) view {
	v := c.view(ctx, "Knowledge base")
	v.Workspace, v.Current = ctx.Param("id"), "kb"
	return v
}

// knowledgePage lists the documents with the form adding one.
func (c *Console) knowledgePage(ctx echo.Context) error {
	return c.drawKnowledge(ctx, http.StatusOK, "", knowledgeView{Flash: knowledgeFlash(ctx.QueryParam("done"))})
}

func (c *Console) drawKnowledge(ctx echo.Context, status int, message string, kv knowledgeView) error {
	v := c.knowledgeView(ctx)
	docs, err := c.app.Documents(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"))
	kv.Documents = docs
	v.Page = kv
	if err != nil {
		return c.flowsError(ctx, "kb", v, err)
	}
	v.Status, v.Message = status, message
	return c.render(ctx, status, "kb", v)
}

// addDocument adds the Markdown of the textarea, or of the chosen file,
// under the title; a refusal redraws the form with what was sent.
func (c *Console) addDocument(ctx echo.Context) error {
	title := strings.TrimSpace(ctx.FormValue("title"))
	markdown, err := submittedText(ctx, "markdown", "file", maxMarkdown)
	kv := knowledgeView{Title: title, Markdown: markdown}
	if err != nil {
		return c.drawKnowledge(ctx, http.StatusBadRequest, err.Error(), kv)
	}
	if title == "" || strings.TrimSpace(markdown) == "" {
		return c.drawKnowledge(ctx, http.StatusBadRequest, "Give the document a title and its Markdown text (typed, or a .md file), then add it.", kv)
	}
	_, err = c.app.AddDocument(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), formID(ctx), title, markdown)
	added := workspacePath(ctx.Param("id")) + "/kb?done=added"
	if repeated, answer := c.formRepeat(ctx, err, func(string) string { return added }, "the documents below", func(status int, message string) error {
		return c.drawKnowledge(ctx, status, message, kv)
	}); repeated {
		return answer
	}
	if e, message, ok := c.refusal(ctx, "kb", err); ok {
		return c.drawKnowledge(ctx, e.Status, message+hintFor(e.Code), kv)
	}
	if err != nil {
		return c.flowsError(ctx, "kb", c.knowledgeView(ctx), err)
	}
	return ctx.Redirect(http.StatusSeeOther, added)
}

// deleteDocumentForm asks to confirm a deletion.
func (c *Console) deleteDocumentForm(ctx echo.Context) error {
	v := c.knowledgeView(ctx)
	docs, err := c.app.Documents(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"))
	if err != nil {
		return c.flowsError(ctx, "kb", v, err)
	}
	for _, d := range docs {
		if d.ID == ctx.Param("docId") {
			v.Title = "Delete " + d.Title
			v.Page = knowledgeView{Confirm: &d}
			return c.render(ctx, http.StatusOK, "kb", v)
		}
	}
	return documentNotFound()
}

// deleteDocument deletes the document and goes back to the list.
func (c *Console) deleteDocument(ctx echo.Context) error {
	err := c.app.DeleteDocument(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), ctx.Param("docId"))
	if errors.Is(err, app.ErrDocumentNotFound) {
		return documentNotFound()
	}
	if e, message, ok := c.refusal(ctx, "kb", err); ok {
		return c.drawKnowledge(ctx, e.Status, message+hintFor(e.Code), knowledgeView{})
	}
	if err != nil {
		return c.flowsError(ctx, "kb", c.knowledgeView(ctx), err)
	}
	return ctx.Redirect(http.StatusSeeOther, workspacePath(ctx.Param("id"))+"/kb?done=deleted")
}

func documentNotFound() error {
	return errs.NotFound("document_not_found", "this workspace has no such document: it may have been deleted already")
}

// knowledgeFlash says what the action that redirected here did.
func knowledgeFlash(done string) string {
	switch done {
	case "added":
		return "The document was added and split into passages for search."
	case "deleted":
		return "The document was deleted."
	}
	return ""
}
