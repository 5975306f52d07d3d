// Package http serves the flow-runner's JSON endpoints: the public flow
// routes (/v1/flows..., reached through the gateway over the rpc "api"
// endpoint, with the workspace and its modules and features the gateway
// authenticated) and the operator routes (/admin/..., rpc "admin", for
// parleyctl and the console). It maps domain errors to *errs.Error and
// renders domain objects as the wire types of pkg/api/flowrunner.
package http

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/knowledge"
)

// Modules and features of a workspace's plan that the routes consult.
const (
	ModuleFlows      = "flows"
	ModuleFlowScript = "flow_script"
	ModuleFlowAI     = "flow_ai"
	FeatureFlowsAPI  = "flows_api"
)

// Error codes of the flow routes.
const (
	CodeFlowNotFound     = "flow_not_found"
	CodeFlowNotInvokable = "flow_not_invokable"
	CodeInputInvalid     = "input_invalid"
	CodeSessionNotFound  = "session_not_found"
	CodeSessionExpired   = "session_expired"
	CodeSessionBusy      = "session_busy"
	CodeRunNotFound      = "run_not_found"
	CodeGuardNotWired    = "guard_not_wired"
	CodeFlowNotForChat   = "flow_not_for_chat"
	CodeChannelNotFound  = "channel_not_found"
)

// App is what the handlers need of the use cases.
type App interface {
	PublishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (*catalog.Flow, error)
	DeactivateFlow(ctx context.Context, workspaceID, flowID string) (*catalog.Flow, error)
	ListFlows(ctx context.Context, workspaceID string) ([]*catalog.Flow, error)
	ListAllFlows(ctx context.Context, workspaceID string) ([]*catalog.Flow, error)
	ListFlowVersions(ctx context.Context, workspaceID, flowID string) (*catalog.Flow, []catalog.VersionInfo, error)
	GetFlowVersion(ctx context.Context, workspaceID, flowID string, version int) ([]byte, error)
	ListRuns(ctx context.Context, workspaceID string, q catalog.RunQuery) (app.RunPage, error)
	GetRunTrace(ctx context.Context, workspaceID, runID string) (*catalog.Trace, error)
	SetChatFlow(ctx context.Context, workspaceID, channelID, flowID string) error
	ChatFlow(ctx context.Context, workspaceID, channelID string) (string, error)
	ClearChatFlow(ctx context.Context, workspaceID, channelID string) error
	Invoke(ctx context.Context, call app.InvokeCall) (*app.InvokeAnswer, error)
	GetRun(ctx context.Context, workspaceID, flowID, runID string) (*catalog.Trace, error)
	AddKnowledgeDocument(ctx context.Context, workspaceID, title string, markdown []byte) (*catalog.KnowledgeDocument, error)
	ListKnowledgeDocuments(ctx context.Context, workspaceID string) ([]*catalog.KnowledgeDocument, error)
	DeleteKnowledgeDocument(ctx context.Context, workspaceID, documentID string) error
}

// APIDeps are what the public routes need.
type APIDeps struct {
	App App
	// PingInterval is SSE_PING_INTERVAL: how often a stream sends ": ping".
	PingInterval time.Duration
	Log          *zap.Logger
}

// AdminDeps are what the operator routes need.
type AdminDeps struct {
	App App
	Log *zap.Logger
}

type handlers struct {
	app  App
	ping time.Duration
	log  *zap.Logger
}

// NewAPI returns the router of the public routes (rpc "api").
func NewAPI(d APIDeps) *echo.Echo {
	h := &handlers{app: d.App, ping: d.PingInterval, log: d.Log}
	e := httpx.NewEcho(d.Log)
	g := e.Group("/v1/flows", flowsAPIOn)
	g.GET("", h.listFlows)
	g.POST("/:id/invoke", h.invoke)
	g.GET("/:id/runs/:runId", h.getRun)
	return e
}

// NewAdmin returns the router of the operator routes (rpc "admin":
// parleyctl flow, kb, and the console's flows pages).
func NewAdmin(d AdminDeps) *echo.Echo {
	h := &handlers{app: d.App, log: d.Log}
	e := httpx.NewEcho(d.Log)
	e.POST("/admin/workspaces/:ws/flows", h.publishFlow)
	e.GET("/admin/workspaces/:ws/flows", h.listAllFlows)
	e.POST("/admin/flows/:id/deactivate", h.deactivateFlow)
	e.GET("/admin/flows/:id/versions", h.listFlowVersions)
	e.GET("/admin/flows/:id/versions/:version", h.getFlowVersion)
	e.GET("/admin/workspaces/:ws/runs", h.listRuns)
	e.GET("/admin/workspaces/:ws/runs/:id", h.getRunTrace)
	e.PUT("/admin/channels/:channel_id/chat-flow", h.setChatFlow)
	e.GET("/admin/channels/:channel_id/chat-flow", h.getChatFlow)
	e.DELETE("/admin/channels/:channel_id/chat-flow", h.clearChatFlow)
	e.POST("/admin/workspaces/:ws/kb/documents", h.addKnowledgeDocument)
	e.GET("/admin/workspaces/:ws/kb/documents", h.listKnowledgeDocuments)
	e.DELETE("/admin/kb/documents/:id", h.deleteKnowledgeDocument)
	return e
}

// flowsAPIOn answers every public flow route 404 not_found while the
// workspace's flows_api feature is off, as if the routes did not exist.
func flowsAPIOn(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !rpc.HasFeature(c.Request().Context(), FeatureFlowsAPI) {
			return errs.NotFound(errs.CodeNotFound, "not found")
		}
		return next(c)
	}
}

func (h *handlers) listFlows(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	flows, err := h.app.ListFlows(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	out := flowrunnerapi.FlowsResponse{Flows: make([]flowrunnerapi.Flow, 0, len(flows))}
	for _, f := range flows {
		out.Flows = append(out.Flows, toAPIFlow(f))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handlers) getRun(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	t, err := h.app.GetRun(c.Request().Context(), ws, c.Param("id"), c.Param("runId"))
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, toAPITrace(t))
}

func (h *handlers) publishFlow(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	doc, err := httpx.ReadBody(c.Request().Body, flow.MaxDefinitionBytes)
	if err != nil {
		return err
	}
	f, err := h.app.PublishFlow(c.Request().Context(), ws, c.QueryParam("flow_id"), doc)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusCreated, flowrunnerapi.PublishedFlow{ID: f.ID, PublishedVersion: f.PublishedVersion})
}

func (h *handlers) deactivateFlow(c echo.Context) error {
	ws, err := optionalWorkspaceQuery(c)
	if err != nil {
		return err
	}
	f, err := h.app.DeactivateFlow(c.Request().Context(), ws, c.Param("id"))
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, flowrunnerapi.DeactivatedFlow{ID: f.ID, Status: f.Status})
}

// validationError is a refused flow document: the parser's one line, and
// its parts as fields of their own (node_id and field left out when they
// do not apply), so the console marks the node and says why without
// reading the message.
func validationError(ve *flow.ValidationError) *errs.Error {
	e := errs.InvalidRequest("%s", ve.Error()).WithExtra("reason", strings.ReplaceAll(ve.Reason, "\n", " "))
	if ve.NodeID != "" {
		e = e.WithExtra("node_id", ve.NodeID)
	}
	if ve.Field != "" {
		e = e.WithExtra("field", ve.Field)
	}
	return e
}

func toHTTPError(err error) error {
	var (
		ve *flow.ValidationError
		ke *knowledge.ValidationError
		ni *flow.NotInvokableError
		nc *app.NotChatFlowError
		ie *app.InputError
		// the invoke contract's refusals
		busy   *app.ConcurrencyLimitedError
		capped *app.DailyCapError
		down   *app.ContractUnavailableError
	)
	switch {
	case errors.As(err, &ve):
		return validationError(ve)
	case errors.As(err, &ke):
		return errs.InvalidRequest("%s", ke.Error())
	case errors.As(err, &ni):
		return errs.New(http.StatusUnprocessableEntity, CodeFlowNotInvokable, ni.Error())
	case errors.As(err, &nc):
		return errs.New(http.StatusUnprocessableEntity, CodeFlowNotForChat, nc.Error())
	case errors.Is(err, catalog.ErrChannelOfAnotherWorkspace):
		return errs.NotFound(CodeChannelNotFound, "channel not found in the workspace: its chat flow was set in another workspace")
	case errors.As(err, &ie):
		return errs.New(http.StatusBadRequest, CodeInputInvalid, ie.Error())
	case errors.Is(err, catalog.ErrFlowNotFound):
		return errs.NotFound(CodeFlowNotFound, "flow not found")
	case errors.Is(err, catalog.ErrVersionNotFound):
		return errs.NotFound(CodeVersionNotFound, "flow version not found")
	case errors.Is(err, catalog.ErrDocumentNotFound):
		return errs.NotFound(CodeDocumentNotFound, "knowledge document not found")
	case errors.Is(err, catalog.ErrRunNotFound):
		return errs.NotFound(CodeRunNotFound, "run not found")
	case errors.Is(err, catalog.ErrSessionNotFound):
		return errs.NotFound(CodeSessionNotFound, "session not found: unknown, or its run has finished")
	case errors.Is(err, app.ErrSessionExpired):
		return errs.New(http.StatusGone, CodeSessionExpired, "session expired: continue within the session window of the run's start")
	case errors.Is(err, catalog.ErrSessionBusy):
		return errs.New(http.StatusConflict, CodeSessionBusy, "another continue of this session is running")
	case errors.Is(err, app.ErrFlowsModuleInactive):
		return errs.New(http.StatusForbidden, errs.CodeModuleInactive, "the workspace's plan does not include the flows module")
	case errors.As(err, &busy):
		return errs.Newf(http.StatusTooManyRequests, CodeConcurrencyLimited,
			"the workspace has %d runs going, its limit; retry when one ends", busy.Limit).WithHeader("Retry-After", "1")
	case errors.As(err, &capped):
		return errs.Newf(http.StatusTooManyRequests, CodeDailyInvokeCap,
			"the workspace reached its %d runs for today; the count resets at midnight (DAILY_RESET_TZ)", capped.Limit)
	case errors.As(err, &down):
		// Nothing ran and nothing was kept; the outage is the observer's
		// to log, not the developer's to read.
		return errs.ServiceUnavailable("%s are unavailable; try again shortly", down.What)
	case errors.Is(err, app.ErrGuardNotWired):
		// The reason (which node, what the guard said) is for the logs of
		// the platform, not for the developer: their flow is fine.
		return errs.New(http.StatusServiceUnavailable, CodeGuardNotWired,
			"flow temporarily unavailable: the safety guard its AI nodes need is not reachable; retry shortly")
	}
	return err
}
