// Package http serves the dispatcher's JSON endpoints: the public webhook
// management routes (/v1/webhook..., reached through the gateway over the
// rpc "api" endpoint) and the operator routes (/admin/..., rpc "admin").
// It maps domain errors to *errs.Error and domain objects to the public
// shapes.
package http

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/api"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// Error codes of the missing: a workspace without a webhook, a delivery
// the workspace's log does not hold.
const (
	CodeWebhookNotFound  = "webhook_not_found"
	CodeDeliveryNotFound = "delivery_not_found"
)

// App is what the handlers need of the use cases.
type App interface {
	SaveWebhook(ctx context.Context, workspaceID, rawURL string) (*webhook.Webhook, error)
	GetWebhook(ctx context.Context, workspaceID string) (*webhook.Webhook, error)
	DeleteWebhook(ctx context.Context, workspaceID string) error
	ResaveWebhook(ctx context.Context, workspaceID string) (*webhook.Webhook, error)
	SendTestEvent(ctx context.Context, workspaceID string) (*delivery.Delivery, error)
	ListDeliveries(ctx context.Context, workspaceID string, q delivery.ListQuery) (app.DeliveryPage, error)
	GetDelivery(ctx context.Context, workspaceID, id string) (*delivery.Delivery, error)
}

type handlers struct {
	app     App
	replays Replayer
}

// APIDeps are what the public routes need.
type APIDeps struct {
	App App
	Log *zap.Logger
}

// NewAPI returns the router of the public routes
// (dispatcherapi.APIRoutes). The workspace is the one the gateway
// authenticated (rpc.WorkspaceID).
func NewAPI(deps APIDeps) *echo.Echo {
	h := &handlers{app: deps.App}
	e := httpx.NewEcho(deps.Log)
	e.PUT("/v1/webhook", h.putWebhook)
	e.GET("/v1/webhook", h.getWebhook)
	e.DELETE("/v1/webhook", h.deleteWebhook)
	e.POST("/v1/webhook/test", h.testWebhook)
	e.GET("/v1/webhook/deliveries", h.listDeliveries)
	return e
}

// AdminDeps are what the operator routes need.
type AdminDeps struct {
	App     App
	Replays Replayer
	Log     *zap.Logger
}

// NewAdmin returns the router of the operator routes
// (dispatcherapi.AdminRoutes; parleyctl, the console):
//
//	GET  /admin/webhooks/:workspace_id -> {"webhook": {..., consecutive_failures, paused_at}}
//	GET  /admin/webhooks/:workspace_id/deliveries/:id -> {"delivery": {..., attempt_history}}
//	POST /admin/webhooks/:workspace_id/resave -> {"webhook", "secret"}
//	POST /admin/replays -> 202 {"replay", "next"} (startReplay)
func NewAdmin(deps AdminDeps) *echo.Echo {
	h := &handlers{app: deps.App, replays: deps.Replays}
	e := httpx.NewEcho(deps.Log)
	e.GET("/admin/webhooks/:workspace_id", h.adminGetWebhook)
	e.GET("/admin/webhooks/:workspace_id/deliveries/:id", h.adminGetDelivery)
	e.POST("/admin/webhooks/:workspace_id/resave", h.resaveWebhook)
	e.POST("/admin/replays", h.startReplay)
	return e
}

// workspaceParam is the :workspace_id of an operator route.
func workspaceParam(c echo.Context) (string, error) {
	ws := c.Param("workspace_id")
	if !ids.Valid(ws) {
		return "", errs.InvalidID("workspace_id", "workspace")
	}
	return ws, nil
}

func (h *handlers) adminGetWebhook(c echo.Context) error {
	ws, err := workspaceParam(c)
	if err != nil {
		return err
	}
	w, err := h.app.GetWebhook(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, dispatcherapi.WebhookStatusResponse{Webhook: toAPIWebhookStatus(w)})
}

func (h *handlers) adminGetDelivery(c echo.Context) error {
	ws, err := workspaceParam(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if !ids.Valid(id) {
		return errs.InvalidID("id", "delivery")
	}
	d, err := h.app.GetDelivery(c.Request().Context(), ws, id)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, dispatcherapi.DeliveryDetailResponse{Delivery: toAPIDeliveryDetail(d)})
}

func (h *handlers) putWebhook(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	var in dispatcherapi.SaveWebhookRequest
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	w, err := h.app.SaveWebhook(c.Request().Context(), ws, in.URL)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, toAPISaved(w))
}

func (h *handlers) getWebhook(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	w, err := h.app.GetWebhook(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, dispatcherapi.WebhookResponse{Webhook: toAPIWebhook(w)})
}

func (h *handlers) deleteWebhook(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	if err := h.app.DeleteWebhook(c.Request().Context(), ws); err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, api.OK{OK: true})
}

func (h *handlers) testWebhook(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	d, err := h.app.SendTestEvent(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, dispatcherapi.DeliveryResponse{Delivery: toAPIDelivery(d)})
}

func (h *handlers) listDeliveries(c echo.Context) error {
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	q, err := parseListQuery(c)
	if err != nil {
		return err
	}
	page, err := h.app.ListDeliveries(c.Request().Context(), ws, q)
	if err != nil {
		return toHTTPError(err)
	}
	out := dispatcherapi.DeliveryPage{
		Deliveries: make([]dispatcherapi.Delivery, 0, len(page.Deliveries)),
		NextBefore: httpx.OptionalTimestamp(page.NextBefore),
	}
	for _, d := range page.Deliveries {
		out.Deliveries = append(out.Deliveries, toAPIDelivery(d))
	}
	return c.JSON(http.StatusOK, out)
}

func parseListQuery(c echo.Context) (delivery.ListQuery, error) {
	var q delivery.ListQuery
	if err := paging.Once(c.QueryParams(), "limit", "status", "event", "before"); err != nil {
		return q, err
	}
	var err error
	if q.Limit, err = paging.ParseLimit(c.QueryParam("limit"), paging.DefaultLimit, paging.MaxLimit); err != nil {
		return q, err
	}
	if s := c.QueryParam("status"); s != "" {
		if !slices.Contains(delivery.Statuses, delivery.Status(s)) {
			names := make([]string, len(delivery.Statuses))
			for i, st := range delivery.Statuses {
				names[i] = string(st)
			}
			return q, errs.InvalidRequest("status must be one of %s", strings.Join(names, ", "))
		}
		q.Status = delivery.Status(s)
	}
	if s := c.QueryParam("event"); s != "" {
		if !slices.Contains(delivery.Events, s) {
			return q, errs.InvalidRequest("event must be one of %s", strings.Join(delivery.Events, ", "))
		}
		q.Event = s
	}
	if q.Before, err = paging.ParseBefore(c.QueryParam("before")); err != nil {
		return q, err
	}
	return q, nil
}

func (h *handlers) resaveWebhook(c echo.Context) error {
	ws, err := workspaceParam(c)
	if err != nil {
		return err
	}
	w, err := h.app.ResaveWebhook(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, toAPISaved(w))
}

func toHTTPError(err error) error {
	var ue *safehttp.URLError
	switch {
	case errors.As(err, &ue):
		return errs.InvalidRequest("%s", ue.Error())
	case errors.Is(err, webhook.ErrNotFound):
		return errs.NotFound(CodeWebhookNotFound, "no webhook is saved for this workspace")
	case errors.Is(err, delivery.ErrNotFound):
		return errs.NotFound(CodeDeliveryNotFound, "the workspace's delivery log has no delivery with this id (the log is purged after its retention)")
	}
	return err
}
