package adminclient

import (
	"context"
	"net/http"
	"net/url"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/rpc"
)

func workspacePath(id string) string { return "/admin/workspaces/" + segment(id) }

// CreateWorkspace creates a workspace.
func (c *Client) CreateWorkspace(ctx context.Context, w gatewayapi.NewWorkspace) (gatewayapi.Workspace, error) {
	var out gatewayapi.WorkspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPost, "/admin/workspaces", w, &out)
	return out.Workspace, err
}

// UpdateWorkspace changes a workspace's plan.
func (c *Client) UpdateWorkspace(ctx context.Context, id string, ch gatewayapi.WorkspaceChanges) (gatewayapi.Workspace, error) {
	var out gatewayapi.WorkspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPatch, workspacePath(id), ch, &out)
	return out.Workspace, err
}

// GetWorkspace returns a workspace; 404 not_found (an *Error) when there
// is none.
func (c *Client) GetWorkspace(ctx context.Context, id string) (gatewayapi.Workspace, error) {
	var out gatewayapi.WorkspaceAnswer
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodGet, workspacePath(id), nil, &out)
	return out.Workspace, err
}

// ListWorkspaces returns every workspace.
func (c *Client) ListWorkspaces(ctx context.Context) ([]gatewayapi.Workspace, error) {
	return c.listWorkspaces(ctx, nil)
}

// FindWorkspaceBySlug returns the workspace with slug, and false when there
// is none.
func (c *Client) FindWorkspaceBySlug(ctx context.Context, slug string) (gatewayapi.Workspace, bool, error) {
	found, err := c.listWorkspaces(ctx, url.Values{"slug": {slug}})
	if err != nil || len(found) == 0 {
		return gatewayapi.Workspace{}, false, err
	}
	return found[0], true, nil
}

func (c *Client) listWorkspaces(ctx context.Context, query url.Values) ([]gatewayapi.Workspace, error) {
	var out gatewayapi.WorkspaceList
	err := c.get(ctx, rpc.ServiceGateway, "/admin/workspaces", query, &out)
	return out.Workspaces, err
}

// SetFeature turns a workspace's feature flag on or off and returns the
// workspace.
func (c *Client) SetFeature(ctx context.Context, workspaceID, feature string, on bool) (gatewayapi.Workspace, error) {
	var out gatewayapi.WorkspaceAnswer
	path := workspacePath(workspaceID) + "/features/" + segment(feature)
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPut, path, gatewayapi.FeatureSwitch{On: &on}, &out)
	return out.Workspace, err
}
