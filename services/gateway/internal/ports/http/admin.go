package http

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// AdminDeps are what NewAdmin builds the admin API from.
type AdminDeps struct {
	App *app.App
	Log *zap.Logger
}

// admin is the operators' API (parleyctl, the console) and the
// flow-runner's billing call.
type admin struct {
	app *app.App
}

// NewAdmin returns the admin API, served on the rpc "admin" endpoint; its
// routes and bodies are gatewayapi.AdminRoutes.
func NewAdmin(d AdminDeps) *echo.Echo {
	a := &admin{app: d.App}
	e := httpx.NewEcho(d.Log)
	e.POST("/admin/workspaces", a.createWorkspace)
	e.GET("/admin/workspaces", a.listWorkspaces)
	e.GET("/admin/workspaces/:id", a.getWorkspace)
	e.PATCH("/admin/workspaces/:id", a.updateWorkspace)
	e.PUT("/admin/workspaces/:id/features/:feature", a.setFeature)
	e.POST("/admin/workspaces/:id/api-keys", a.createAPIKey)
	e.GET("/admin/workspaces/:id/api-keys", a.listAPIKeys)
	e.DELETE("/admin/api-keys/:id", a.revokeAPIKey)
	e.POST("/admin/ai-units", a.useAIUnits)
	return e
}

func (a *admin) toAPIWorkspace(w account.Workspace) gatewayapi.Workspace {
	modules := make([]string, len(w.Plan.Modules))
	for i, m := range w.Plan.Modules {
		modules[i] = string(m)
	}
	return gatewayapi.Workspace{
		ID:        w.ID,
		Name:      w.Name,
		Slug:      w.Slug,
		Plan:      gatewayapi.Plan{Name: w.Plan.Name, Modules: modules, AIUsed: w.Plan.AIUsed, AILimit: w.Plan.AILimit},
		RateLimit: gatewayapi.RateLimit{PerMinute: w.RateLimit(a.app.DefaultRatePerMinute())},
		Features:  w.EnabledFeatures(),
		CreatedAt: httpx.Timestamp(w.CreatedAt),
	}
}

func (a *admin) workspace(c echo.Context, status int, w account.Workspace, err error) error {
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(status, gatewayapi.WorkspaceAnswer{Workspace: a.toAPIWorkspace(w)})
}

func (a *admin) createWorkspace(c echo.Context) error {
	var in gatewayapi.NewWorkspace
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	w, err := a.app.CreateWorkspace(c.Request().Context(), account.NewWorkspace{
		Name: in.Name, Slug: in.Slug, Modules: in.Modules, AILimit: in.AILimit, RatePerMinute: in.RatePerMinute,
	})
	return a.workspace(c, http.StatusCreated, w, err)
}

func (a *admin) getWorkspace(c echo.Context) error {
	w, err := a.app.GetWorkspace(c.Request().Context(), c.Param("id"))
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *admin) listWorkspaces(c echo.Context) error {
	ws, err := a.app.ListWorkspaces(c.Request().Context(), c.QueryParam("slug"))
	if err != nil {
		return toHTTP(err)
	}
	out := gatewayapi.WorkspaceList{Workspaces: make([]gatewayapi.Workspace, len(ws))}
	for i, w := range ws {
		out.Workspaces[i] = a.toAPIWorkspace(w)
	}
	return c.JSON(http.StatusOK, out)
}

func (a *admin) updateWorkspace(c echo.Context) error {
	var in gatewayapi.WorkspaceChanges
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	w, err := a.app.UpdateWorkspace(c.Request().Context(), c.Param("id"), account.Changes{
		Modules: in.Modules, AILimit: in.AILimit, RatePerMinute: in.RatePerMinute,
	})
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *admin) setFeature(c echo.Context) error {
	var in gatewayapi.FeatureSwitch
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	if in.On == nil {
		return errs.InvalidRequest("on is required (true or false)")
	}
	w, err := a.app.SetFeature(c.Request().Context(), c.Param("id"), c.Param("feature"), *in.On)
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *admin) createAPIKey(c echo.Context) error {
	var in gatewayapi.NewAPIKey
	// The body is optional: a key with no name needs none.
	if c.Request().ContentLength != 0 {
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
	}
	k, err := a.app.CreateAPIKey(c.Request().Context(), c.Param("id"), in.Name, in.Key)
	if err != nil {
		return toHTTP(err)
	}
	status := http.StatusCreated
	if k.Existed {
		status = http.StatusOK
	}
	return c.JSON(status, gatewayapi.CreatedAPIKey{ID: k.ID, Key: k.Key})
}

func (a *admin) listAPIKeys(c echo.Context) error {
	keys, err := a.app.ListAPIKeys(c.Request().Context(), c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	out := gatewayapi.APIKeyList{APIKeys: make([]gatewayapi.APIKey, len(keys))}
	for i, k := range keys {
		out.APIKeys[i] = gatewayapi.APIKey{
			ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: httpx.Timestamp(k.CreatedAt),
			LastUsedAt: httpx.OptionalTimestamp(k.LastUsedAt), RevokedAt: httpx.OptionalTimestamp(k.RevokedAt),
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (a *admin) revokeAPIKey(c echo.Context) error {
	k, err := a.app.RevokeAPIKey(c.Request().Context(), c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, gatewayapi.RevokedAPIKey{ID: k.ID, RevokedAt: httpx.Timestamp(*k.RevokedAt)})
}

// useAIUnits is the flow-runner's billing call: each use adds its units
// to its workspace's ai_used (negative units give them back), all or
// nothing per workspace, and is answered in order: the plan's units, or
// why it was refused (quota_exceeded, workspace_not_found) without
// touching the others. Input that is not a list of valid uses is 400
// invalid_request, and no use is made.
func (a *admin) useAIUnits(c echo.Context) error {
	var in gatewayapi.UseAIUnits
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	uses := make([]account.AIUnitsUse, len(in.Uses))
	for i, u := range in.Uses {
		uses[i] = account.AIUnitsUse{WorkspaceID: u.WorkspaceID, Units: u.Units}
	}
	used, err := a.app.UseAIUnits(c.Request().Context(), uses)
	if err != nil {
		return toHTTP(err)
	}
	out := gatewayapi.AIUnitsAnswer{Uses: make([]gatewayapi.AIUnitsUsed, len(used))}
	for i, u := range used {
		out.Uses[i] = gatewayapi.AIUnitsUsed{WorkspaceID: in.Uses[i].WorkspaceID, AIUsed: u.Plan.AIUsed, AILimit: u.Plan.AILimit}
		if u.Err != nil {
			e, ok := errs.As(toHTTP(u.Err))
			if !ok {
				return u.Err
			}
			out.Uses[i].Error = &gatewayapi.AIUnitsRefusal{Code: e.Code, Message: e.Message}
		}
	}
	return c.JSON(http.StatusOK, out)
}
