package http

import (
	"errors"
	"net/http"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Error codes of the gateway beyond the shared ones.
const (
	codeWorkspaceNotFound = "workspace_not_found"
	codeAPIKeyNotFound    = "api_key_not_found"
	codeSlugTaken         = "slug_taken"
	codeAPIKeyTaken       = "api_key_taken"
	codeAPIKeyRevoked     = "api_key_revoked"
)

// wwwAuthenticate tells a refused client which scheme to use (RFC 6750 §3).
const wwwAuthenticate = `Bearer realm="parley"`

// toHTTP turns a domain error into the *errs.Error the caller sees; errors it
// does not know pass through and become 500 internal_error.
func toHTTP(err error) error {
	var (
		ve *account.ValidationError
		kq *account.KeyInQueryError
		mi *account.ModuleInactiveError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		return errs.InvalidRequest("%s", ve.Error())
	case errors.As(err, &kq):
		return unauthorized("API keys are accepted only in the Authorization header, never in the query string: remove the %q parameter and send Authorization: Bearer <API_KEY>", kq.Param)
	case errors.Is(err, account.ErrMissingCredentials):
		return unauthorized("missing API key: send Authorization: Bearer <API_KEY>")
	case errors.Is(err, account.ErrMalformedCredentials):
		return unauthorized("malformed Authorization header: expected Bearer <API_KEY>")
	case errors.Is(err, account.ErrUnknownKey):
		return unauthorized("unknown or revoked API key")
	case errors.As(err, &mi):
		return errs.Newf(http.StatusForbidden, errs.CodeModuleInactive, "the workspace's plan does not include the %s module", mi.Module)
	case errors.Is(err, account.ErrWorkspaceNotFound):
		return errs.NotFound(codeWorkspaceNotFound, "workspace not found")
	case errors.Is(err, account.ErrAPIKeyNotFound):
		return errs.NotFound(codeAPIKeyNotFound, "API key not found")
	case errors.Is(err, account.ErrQuotaExceeded):
		return errs.New(http.StatusConflict, errs.CodeQuotaExceeded, "the plan's AI units are used up")
	case errors.Is(err, account.ErrSlugTaken):
		return errs.New(http.StatusConflict, codeSlugTaken, "slug is already used by another workspace")
	case errors.Is(err, account.ErrKeyTaken):
		return errs.New(http.StatusConflict, codeAPIKeyTaken, "key belongs to another workspace")
	case errors.Is(err, account.ErrKeyRevoked):
		return errs.New(http.StatusConflict, codeAPIKeyRevoked, "key was revoked and cannot be used again; create a new one")
	}
	return err
}

func unauthorized(format string, args ...any) *errs.Error {
	return errs.Newf(http.StatusUnauthorized, errs.CodeUnauthorized, format, args...).WithHeader("WWW-Authenticate", wwwAuthenticate)
}
