package adminclient

import (
	"context"
	"net/http"

	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	"github.com/parleyhq/parley/pkg/rpc"
)

// CreateOperator creates a console operator: 409 operator_exists when the
// email (in any case) is taken; 400 for a malformed email, a password under
// 12 characters or a workspace that does not exist.
func (c *Client) CreateOperator(ctx context.Context, o consoleapi.NewOperator) (consoleapi.Operator, error) {
	var out consoleapi.Operator
	err := c.admin(ctx, rpc.ServiceConsole, http.MethodPost, "/admin/operators", o, &out)
	return out, err
}
