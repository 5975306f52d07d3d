package adapters

import (
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"
)

// typeMaps decode PostgreSQL arrays for database/sql, which has no array
// support of its own. A pgtype.Map caches plans as it scans and is not safe
// for concurrent use, so each scan borrows one of its own.
var typeMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// textArray is a text[] column.
type textArray []string

// Scan reads a text[] value.
func (a *textArray) Scan(src any) error {
	var out []string
	typeMap := typeMaps.Get().(*pgtype.Map)
	defer typeMaps.Put(typeMap)
	if err := typeMap.SQLScanner(&out).Scan(src); err != nil {
		return fmt.Errorf("scan text[]: %w", err)
	}
	if out == nil {
		out = []string{}
	}
	*a = out
	return nil
}

// Value renders the array literal, quoting every element so that no value
// can change the array's shape.
func (a textArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}
