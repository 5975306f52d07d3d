package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Admin is the operators' API (parleyctl), served on the rpc "admin"
// endpoint; the bodies are the team's admin contract.
type Admin struct {
	app *app.App
}

// NewAdmin returns the admin API.
func NewAdmin(a *app.App) *Admin { return &Admin{app: a} }

// Mount adds the admin routes to e.
func (a *Admin) Mount(e *echo.Echo) {
	e.POST("/admin/workspaces", a.createWorkspace)
	e.GET("/admin/workspaces", a.listWorkspaces)
	e.GET("/admin/workspaces/:id", a.getWorkspace)
	e.PATCH("/admin/workspaces/:id", a.updateWorkspace)
	e.PUT("/admin/workspaces/:id/features/:feature", a.setFeature)
	e.POST("/admin/workspaces/:id/ai-units", a.useAIUnits)
	e.POST("/admin/workspaces/:id/api-keys", a.createAPIKey)
	e.GET("/admin/workspaces/:id/api-keys", a.listAPIKeys)
	e.DELETE("/admin/api-keys/:id", a.revokeAPIKey)
}

// workspaceDTO is W of the admin contract.
type workspaceDTO struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
	Plan struct {
		Name    string   `json:"name"`
		Modules []string `json:"modules"`
		AIUsed  int64    `json:"ai_used"`
		AILimit int64    `json:"ai_limit"`
	} `json:"plan"`
	RateLimit rateLimitDTO `json:"rate_limit"`
	Features  []string     `json:"features"`
	CreatedAt string       `json:"created_at"`
}

func (a *Admin) toDTO(w account.Workspace) workspaceDTO {
	var d workspaceDTO
	d.ID, d.Name, d.Slug = w.ID, w.Name, w.Slug
	d.Plan.Name, d.Plan.AIUsed, d.Plan.AILimit = w.Plan.Name, w.Plan.AIUsed, w.Plan.AILimit
	d.Plan.Modules = make([]string, len(w.Plan.Modules))
	for i, m := range w.Plan.Modules {
		d.Plan.Modules[i] = string(m)
	}
	d.RateLimit.PerMinute = w.RateLimit(a.app.DefaultRatePerMinute())
	d.Features = w.EnabledFeatures()
	d.CreatedAt = httpx.Timestamp(w.CreatedAt)
	return d
}

func (a *Admin) workspace(c echo.Context, status int, w account.Workspace, err error) error {
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(status, map[string]workspaceDTO{"workspace": a.toDTO(w)})
}

func (a *Admin) createWorkspace(c echo.Context) error {
	var in struct {
		Name          string    `json:"name"`
		Slug          string    `json:"slug"`
		Modules       *[]string `json:"modules"`
		AILimit       *int64    `json:"ai_limit"`
		RatePerMinute *int      `json:"rate_per_minute"`
	}
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	nw := account.NewWorkspace{Name: in.Name, Slug: in.Slug, AILimit: in.AILimit, RatePerMinute: in.RatePerMinute}
	if in.Modules != nil {
		nw.Modules = append([]string{}, *in.Modules...)
	}
	w, err := a.app.CreateWorkspace(c.Request().Context(), nw)
	return a.workspace(c, http.StatusCreated, w, err)
}

func (a *Admin) getWorkspace(c echo.Context) error {
	w, err := a.app.GetWorkspace(c.Request().Context(), c.Param("id"))
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *Admin) listWorkspaces(c echo.Context) error {
	ws, err := a.app.ListWorkspaces(c.Request().Context(), c.QueryParam("slug"))
	if err != nil {
		return toHTTP(err)
	}
	out := make([]workspaceDTO, len(ws))
	for i, w := range ws {
		out[i] = a.toDTO(w)
	}
	return c.JSON(http.StatusOK, map[string][]workspaceDTO{"workspaces": out})
}

func (a *Admin) updateWorkspace(c echo.Context) error {
	var in struct {
		Modules       *[]string `json:"modules"`
		AILimit       *int64    `json:"ai_limit"`
		RatePerMinute *int      `json:"rate_per_minute"`
	}
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	ch := account.Changes{AILimit: in.AILimit, RatePerMinute: in.RatePerMinute}
	if in.Modules != nil {
		ch.Modules = append([]string{}, *in.Modules...)
	}
	w, err := a.app.UpdateWorkspace(c.Request().Context(), c.Param("id"), ch)
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *Admin) setFeature(c echo.Context) error {
	var in struct {
		On *bool `json:"on"`
	}
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	if in.On == nil {
		return errs.InvalidRequest("on is required (true or false)")
	}
	w, err := a.app.SetFeature(c.Request().Context(), c.Param("id"), c.Param("feature"), *in.On)
	return a.workspace(c, http.StatusOK, w, err)
}

func (a *Admin) createAPIKey(c echo.Context) error {
	var in struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
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
	return c.JSON(status, map[string]string{"id": k.ID, "key": k.Key})
}

// apiKeyDTO is a key as the operators' list shows it: never the key or its
// hash, only the prefix that tells keys apart. last_used_at is when it last
// authenticated a request, to within a minute; null if never. revoked_at
// is null while the key is active.
type apiKeyDTO struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Prefix     string  `json:"prefix"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
	RevokedAt  *string `json:"revoked_at"`
}

func (a *Admin) listAPIKeys(c echo.Context) error {
	keys, err := a.app.ListAPIKeys(c.Request().Context(), c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	out := make([]apiKeyDTO, len(keys))
	for i, k := range keys {
		out[i] = apiKeyDTO{
			ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: httpx.Timestamp(k.CreatedAt),
			LastUsedAt: httpx.OptionalTimestamp(k.LastUsedAt), RevokedAt: httpx.OptionalTimestamp(k.RevokedAt),
		}
	}
	return c.JSON(http.StatusOK, map[string][]apiKeyDTO{"api_keys": out})
}

func (a *Admin) revokeAPIKey(c echo.Context) error {
	k, err := a.app.RevokeAPIKey(c.Request().Context(), c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, map[string]string{"id": k.ID, "revoked_at": httpx.Timestamp(*k.RevokedAt)})
}

// maxAIUnitsPerCall bounds one use of AI units, so that a mistaken call
// cannot spend a plan at once.
const maxAIUnitsPerCall = 1000

// useAIUnits is the flow-runner's billing call: {"units": n} adds n to the
// plan's ai_used (a negative n gives units back) and answers the plan;
// 409 quota_exceeded when the use would pass ai_limit.
func (a *Admin) useAIUnits(c echo.Context) error {
	var in struct {
		Units *int64 `json:"units"`
	}
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	if in.Units == nil || *in.Units == 0 || *in.Units > maxAIUnitsPerCall || *in.Units < -maxAIUnitsPerCall {
		return errs.InvalidRequest("units: must be a non-zero integer from %d to %d", -maxAIUnitsPerCall, maxAIUnitsPerCall)
	}
	plan, err := a.app.UseAIUnits(c.Request().Context(), c.Param("id"), *in.Units)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, map[string]int64{"ai_used": plan.AIUsed, "ai_limit": plan.AILimit})
}
