// Package migrations holds the versioned SQL of the messaging schema, applied
// by db.Open at start.
package migrations

import "embed"

// FS is the migrations, 00001_init.sql onwards.
//
//go:embed *.sql
var FS embed.FS
