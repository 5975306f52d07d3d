package db

import (
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// NewestFirst is the query side of paging.Paginate: rows ordered by the
// timestamp column, then the id column, newest first. With at, it selects
// every row stamped exactly at (a whole tie group, unlimited); otherwise
// before, when set, keeps strictly older rows and limit sizes the page.
func NewestFirst(column, idColumn string, before, at *time.Time, limit int) func(*gorm.DB) *gorm.DB {
	return func(tx *gorm.DB) *gorm.DB {
		if op, bound := pageBound(before, at); bound != nil {
			tx = tx.Where(column+" "+op+" ?", *bound)
		}
		if at == nil {
			tx = tx.Limit(limit)
		}
		return tx.Order(newestFirstOrder(column, idColumn))
	}
}

// pageBound is the condition on the timestamp column of NewestFirst and
// SQL.NewestFirst: the tie group at, else the rows before before, else
// none (nil).
func pageBound(before, at *time.Time) (op string, bound *time.Time) {
	switch {
	case at != nil:
		return "=", at
	case before != nil:
		return "<", before
	}
	return "", nil
}

func newestFirstOrder(column, idColumn string) string {
	return column + " DESC, " + idColumn + " DESC"
}

// SQL is a statement written by hand for QueryRows, with pgx's numbered
// parameters: a hot read whose shape depends only on which filters are set
// is cheaper built so than by gorm, which builds a statement through
// reflection and its clause machinery on every call.
type SQL struct {
	text strings.Builder
	args []any
}

// NewSQL starts a statement with text; size is about how long it will
// grow, so the text is allocated once.
func NewSQL(text string, size int) *SQL {
	s := &SQL{args: make([]any, 0, 8)}
	s.text.Grow(size)
	s.text.WriteString(text)
	return s
}

// Write appends text as it is.
func (s *SQL) Write(text string) *SQL {
	s.text.WriteString(text)
	return s
}

// Arg appends the placeholder of a new parameter of value v.
func (s *SQL) Arg(v any) *SQL {
	s.args = append(s.args, v)
	s.text.WriteByte('$')
	s.text.WriteString(strconv.Itoa(len(s.args)))
	return s
}

// NewestFirst appends what NewestFirst adds to a gorm query: " AND" the
// condition on column when before or at is set, then the order and,
// without at, the limit. The statement must have a WHERE clause already.
func (s *SQL) NewestFirst(column, idColumn string, before, at *time.Time, limit int) *SQL {
	if op, bound := pageBound(before, at); bound != nil {
		s.Write(" AND " + column + " " + op + " ").Arg(*bound)
	}
	s.Write(" ORDER BY " + newestFirstOrder(column, idColumn))
	if at == nil {
		s.Write(" LIMIT ").Arg(limit)
	}
	return s
}

// String is the statement's text.
func (s *SQL) String() string { return s.text.String() }

// Args are the statement's parameters, in their placeholders' order.
func (s *SQL) Args() []any { return s.args }
