// Package gateway declares the gateway's wire types: the bodies of its
// admin routes (workspaces, their plans and features, AI units, API keys),
// served on its rpc "admin" endpoint, and of GET /v1/me, which it answers
// on its own listener. The gateway renders them; pkg/adminclient,
// parleyctl, the console and the flow-runner decode them.
package gateway

import (
	"net/http"

	"github.com/parleyhq/parley/pkg/api"
)

// AdminRoutes are the routes of the gateway's rpc "admin" endpoint.
var AdminRoutes = []api.Route{
	{Method: http.MethodPost, Path: "/admin/workspaces", Request: NewWorkspace{}, Response: WorkspaceAnswer{}},
	{Method: http.MethodGet, Path: "/admin/workspaces", Response: WorkspaceList{}},
	{Method: http.MethodGet, Path: "/admin/workspaces/:id", Response: WorkspaceAnswer{}},
	{Method: http.MethodPatch, Path: "/admin/workspaces/:id", Request: WorkspaceChanges{}, Response: WorkspaceAnswer{}},
	{Method: http.MethodPut, Path: "/admin/workspaces/:id/features/:feature", Request: FeatureSwitch{}, Response: WorkspaceAnswer{}},
	{Method: http.MethodPost, Path: "/admin/workspaces/:id/api-keys", Request: NewAPIKey{}, Response: CreatedAPIKey{}},
	{Method: http.MethodGet, Path: "/admin/workspaces/:id/api-keys", Response: APIKeyList{}},
	{Method: http.MethodDelete, Path: "/admin/api-keys/:id", Response: RevokedAPIKey{}},
	{Method: http.MethodPost, Path: "/admin/ai-units", Request: UseAIUnits{}, Response: AIUnitsAnswer{}},
}

// PublicRoutes are the /v1 routes the gateway answers itself instead of
// forwarding them to a service; the deprecated /api/v1 serves them too.
// HEAD answers GET's headers without a body.
var PublicRoutes = []api.Route{
	{Method: http.MethodGet, Path: "/v1/me", Response: Me{}},
	{Method: http.MethodHead, Path: "/v1/me"},
}

// The modules a plan may include: parts of the product a workspace pays
// for, refused (403 module_inactive) to a workspace whose plan lacks them.
const (
	ModuleDeveloperAPI = "developer_api"
	ModuleFlows        = "flows"
	ModuleFlowAI       = "flow_ai"
	ModuleFlowScript   = "flow_script"
)

// Modules are every module, in the order a plan lists them.
var Modules = []string{ModuleDeveloperAPI, ModuleFlows, ModuleFlowAI, ModuleFlowScript}

// FeatureFlowsAPI opens the headless flow routes (GET /v1/flows, invoke,
// a run's trace) for a workspace. It is on unless switched off for the
// workspace.
const FeatureFlowsAPI = "flows_api"

// Features are every feature a workspace may have switched on or off.
var Features = []string{FeatureFlowsAPI}
