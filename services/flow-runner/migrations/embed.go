// Package migrations holds the versioned SQL of the flows schema, applied
// by db.Open at start.
package migrations

import "embed"

// FS holds the goose migrations, in version order by file name.
//
//go:embed *.sql
var FS embed.FS
