package http

import (
	"errors"
	"net/http"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// Error codes of the console beyond the shared ones.
const (
	codeOperatorExists    = "operator_exists"
	codeWorkspaceNotFound = "workspace_not_found"
)

// toHTTP turns a domain error into the *errs.Error the caller sees; errors
// it does not know pass through and become 500 internal_error.
func toHTTP(err error) error {
	var invalid *operator.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &invalid):
		return errs.InvalidRequest("%s", invalid.Error())
	case errors.Is(err, operator.ErrExists):
		return errs.New(http.StatusConflict, codeOperatorExists, "an operator with this email exists")
	case errors.Is(err, app.ErrWorkspaceNotFound):
		return errs.NotFound(codeWorkspaceNotFound, "workspace not found")
	}
	return err
}
