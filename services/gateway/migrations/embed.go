// Package migrations holds the versioned SQL of the gateway's schema,
// "accounts" (workspaces, plans and modules, feature flags, API keys),
// applied by db.Open at start.
package migrations

import "embed"

// FS holds the goose SQL files.
//
//go:embed *.sql
var FS embed.FS
