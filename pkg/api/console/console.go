// Package console declares the console's wire types: the bodies of its
// rpc "admin" endpoint, where parleyctl creates operators. The console
// renders them; pkg/adminclient decodes them.
package console

import (
	"net/http"

	"github.com/parleyhq/parley/pkg/api"
)

// AdminRoutes are the routes of the console's rpc "admin" endpoint.
var AdminRoutes = []api.Route{
	{Method: http.MethodPost, Path: "/admin/operators", Request: NewOperator{}, Response: Operator{}},
}

// NewOperator is POST /admin/operators. An empty WorkspaceID makes a
// platform operator, who sees every workspace; otherwise the operator sees
// that workspace only. The password goes to the console, which keeps only
// its argon2id hash.
type NewOperator struct {
	Email       string `json:"email"`
	Password    string `json:"password"`
	WorkspaceID string `json:"workspace_id,omitempty"`
}

// Operator is a console operator as the console answers it: never its
// password or hash. WorkspaceID is null for a platform operator.
type Operator struct {
	ID          string  `json:"id"`
	Email       string  `json:"email"`
	WorkspaceID *string `json:"workspace_id"`
}
