package db_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/db"
)

// SQL numbers its parameters in order and pages as NewestFirst does: the
// rows before a time with a limit, or the whole tie group at a time.
func TestSQLNewestFirst(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		before, at *time.Time
		text       string
		args       []any
	}{
		{nil, nil, "SELECT 1 WHERE a = $1 ORDER BY t DESC, id DESC LIMIT $2", []any{"x", 51}},
		{&at, nil, "SELECT 1 WHERE a = $1 AND t < $2 ORDER BY t DESC, id DESC LIMIT $3", []any{"x", at, 51}},
		{&at, &at, "SELECT 1 WHERE a = $1 AND t = $2 ORDER BY t DESC, id DESC", []any{"x", at}},
	}
	for _, c := range cases {
		s := db.NewSQL("SELECT 1 WHERE a = ", 64).Arg("x").NewestFirst("t", "id", c.before, c.at, 51)
		if s.String() != c.text || !reflect.DeepEqual(s.Args(), c.args) {
			t.Errorf("before %v, at %v: %q %v, want %q %v", c.before, c.at, s.String(), s.Args(), c.text, c.args)
		}
	}
}
