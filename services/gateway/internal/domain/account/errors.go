package account

import (
	"errors"
	"fmt"
)

// Errors of workspaces and keys.
var (
	ErrWorkspaceNotFound = errors.New("workspace not found")
	ErrAPIKeyNotFound    = errors.New("api key not found")
	ErrSlugTaken         = errors.New("slug taken")
	// ErrQuotaExceeded is a use of AI units past the plan's ai_limit.
	ErrQuotaExceeded = errors.New("the plan's AI units are used up")
	// ErrKeyExists is a store's answer to a second key with the same hash.
	ErrKeyExists = errors.New("api key exists")
	// ErrKeyTaken: a given key already belongs to another workspace.
	ErrKeyTaken = errors.New("api key belongs to another workspace")
	// ErrKeyRevoked: a given key was revoked; it cannot be brought back.
	ErrKeyRevoked = errors.New("api key revoked")
)

// Authentication failures; each is a 401 to the caller.
var (
	ErrMissingCredentials   = errors.New("missing credentials")
	ErrMalformedCredentials = errors.New("malformed credentials")
	ErrUnknownKey           = errors.New("unknown or revoked api key")
)

// KeyInQueryError is a request that carries an API key (or something named
// like one) in its query string. It is refused even beside a valid header:
// query strings end up in logs, proxies and browser history.
type KeyInQueryError struct {
	Param string
}

func (e *KeyInQueryError) Error() string {
	return fmt.Sprintf("api key in query parameter %q", e.Param)
}

// ModuleInactiveError is a plan that lacks a module a route needs.
type ModuleInactiveError struct {
	Module Module
}

func (e *ModuleInactiveError) Error() string {
	return fmt.Sprintf("module %s is not in the plan", e.Module)
}

// ValidationError is invalid input; Field names the offending field as the
// caller spelled it.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + " " + e.Message }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}
