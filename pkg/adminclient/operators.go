package adminclient

import (
	"context"
	"net/http"

	"github.com/parleyhq/parley/pkg/rpc"
)

// NewOperator is a console operator to create. An empty WorkspaceID makes a
// platform operator, who sees every workspace; otherwise the operator sees
// that workspace only. The password goes to the console, which keeps only
// its argon2id hash.
type NewOperator struct {
	Email       string `json:"email"`
	Password    string `json:"password"`
	WorkspaceID string `json:"workspace_id,omitempty"`
}

// Operator is a console operator as the console answers it; WorkspaceID is
// nil for a platform operator.
type Operator struct {
	ID          string  `json:"id"`
	Email       string  `json:"email"`
	WorkspaceID *string `json:"workspace_id"`
}

// CreateOperator creates a console operator: 409 operator_exists when the
// email (in any case) is taken; 400 for a malformed email, a password under
// 12 characters or a workspace that does not exist.
func (c *Client) CreateOperator(ctx context.Context, o NewOperator) (Operator, error) {
	var out Operator
	err := c.admin(ctx, rpc.ServiceConsole, http.MethodPost, "/admin/operators", o, &out)
	return out, err
}
