package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/rpc"
)

// Workspace is a workspace as the gateway's admin routes answer it.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Slug      string    `json:"slug"`
	Plan      Plan      `json:"plan"`
	RateLimit RateLimit `json:"rate_limit"`
	Features  []string  `json:"features"`
	CreatedAt string    `json:"created_at"`
}

// Plan is a workspace's plan: its modules and its AI units.
type Plan struct {
	Name    string   `json:"name"`
	Modules []string `json:"modules"`
	AIUsed  int64    `json:"ai_used"`
	AILimit int64    `json:"ai_limit"`
}

// RateLimit is the API requests a workspace may make a minute (its own or
// the gateway's default).
type RateLimit struct {
	PerMinute int `json:"per_minute"`
}

// Plan modules (the gateway's account modules).
const (
	ModuleDeveloperAPI = "developer_api"
	ModuleFlows        = "flows"
	ModuleFlowAI       = "flow_ai"
	ModuleFlowScript   = "flow_script"
)

// FeatureFlowsAPI opens the headless flow routes (GET /v1/flows, invoke,
// a run's trace) for a workspace.
const FeatureFlowsAPI = "flows_api"

// NewWorkspace is a workspace to create. Nil fields are left to the
// gateway's defaults (modules: developer_api; ai_limit: 0; rate: the
// gateway's RATE_LIMIT_PER_MINUTE); a non-nil empty Modules is a plan
// without modules.
type NewWorkspace struct {
	Name          string   `json:"name"`
	Slug          string   `json:"slug,omitempty"`
	Modules       []string `json:"modules,omitzero"`
	AILimit       *int64   `json:"ai_limit,omitempty"`
	RatePerMinute *int     `json:"rate_per_minute,omitempty"`
}

// WorkspaceChanges changes a workspace's plan; nil fields stay as they are.
type WorkspaceChanges struct {
	Modules       []string `json:"modules,omitzero"`
	AILimit       *int64   `json:"ai_limit,omitempty"`
	RatePerMinute *int     `json:"rate_per_minute,omitempty"`
}

type workspaceAnswer struct {
	Workspace Workspace `json:"workspace"`
}

func workspacePath(id string) string { return "/admin/workspaces/" + segment(id) }

// CreateWorkspace creates a workspace.
func (c *Client) CreateWorkspace(ctx context.Context, w NewWorkspace) (Workspace, error) {
	var out workspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPost, "/admin/workspaces", w, &out)
	return out.Workspace, err
}

// UpdateWorkspace changes a workspace's plan.
func (c *Client) UpdateWorkspace(ctx context.Context, id string, ch WorkspaceChanges) (Workspace, error) {
	var out workspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPatch, workspacePath(id), ch, &out)
	return out.Workspace, err
}

// GetWorkspace returns a workspace; 404 not_found (an *Error) when there
// is none.
func (c *Client) GetWorkspace(ctx context.Context, id string) (Workspace, error) {
	var out workspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodGet, workspacePath(id), nil, &out)
	return out.Workspace, err
}

// ListWorkspaces returns every workspace.
func (c *Client) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	return c.listWorkspaces(ctx, nil)
}

// FindWorkspaceBySlug returns the workspace with slug, and false when there
// is none.
func (c *Client) FindWorkspaceBySlug(ctx context.Context, slug string) (Workspace, bool, error) {
	found, err := c.listWorkspaces(ctx, url.Values{"slug": {slug}})
	if err != nil || len(found) == 0 {
		return Workspace{}, false, err
	}
	return found[0], true, nil
}

func (c *Client) listWorkspaces(ctx context.Context, query url.Values) ([]Workspace, error) {
	var out struct {
		Workspaces []Workspace `json:"workspaces"`
	}
	err := c.get(ctx, rpc.ServiceGateway, "/admin/workspaces", query, &out)
	return out.Workspaces, err
}

// SetFeature turns a workspace's feature flag on or off and returns the
// workspace.
func (c *Client) SetFeature(ctx context.Context, workspaceID, feature string, on bool) (Workspace, error) {
	var out workspaceAnswer
	path := workspacePath(workspaceID) + "/features/" + segment(feature)
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPut, path, map[string]bool{"on": on}, &out)
	return out.Workspace, err
}
