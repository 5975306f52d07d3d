// Package adapters implements the flow-runner's stores on PostgreSQL (the
// flows schema, through gorm) and the run engine's Flows port over them.
// Row structs and their converters live here, so tables can change without
// touching the rules. The http node's caller and the script sandbox live in
// the sub-packages httpcall and script.
package adapters

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parleyhq/parley/pkg/ids"
)

// Schema is the PostgreSQL schema the flow-runner owns.
const Schema = "flows"

// validID reports whether id can be a stored id at all; anything else is
// simply not found (and never reaches PostgreSQL as a malformed uuid).
func validID(id string) bool {
	return ids.Valid(id)
}

// lockNotAvailable reports whether err is PostgreSQL refusing a NOWAIT lock.
func lockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// pgText makes s storable in a text column, which cannot hold a NUL byte
// (a flow's name, a node error quoting what a script threw): each NUL
// becomes U+FFFD rather than failing the write.
func pgText(s string) string {
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// jsonList is a list of strings in a jsonb column.
type jsonList []string

// Value implements driver.Valuer.
func (l jsonList) Value() (driver.Value, error) {
	if l == nil {
		l = jsonList{}
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

// Scan implements sql.Scanner.
func (l *jsonList) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("scan json list from %T", src)
	}
	return json.Unmarshal(b, (*[]string)(l))
}
