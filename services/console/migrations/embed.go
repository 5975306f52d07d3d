// Package migrations holds the versioned SQL of the console's schema,
// "console" (operators and their sign-in sessions), applied at start.
package migrations

import "embed"

// FS holds the goose SQL files.
//
//go:embed *.sql
var FS embed.FS
