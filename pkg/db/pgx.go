package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// ScanRows runs the query q describes (its table, joins, conditions, order
// and limit, as Find would send it) on a connection of q's pool through
// pgx itself, and hands each row to scan, which reads it with Scan into
// typed variables. It is for hot reads: gorm's Scan and database/sql
// convert every column of every row through reflection and an interface
// value, which for a page of 50 rows costs several times what PostgreSQL
// spends on the query; pgx decodes each column straight into its
// variable. q is built by gorm as any query, so its filters keep one home;
// it must not be a transaction's.
func ScanRows(ctx context.Context, q *gorm.DB, scan func(pgx.Rows) error) error {
	stmt := q.Session(&gorm.Session{DryRun: true}).Find(&[]map[string]any{}).Statement
	if stmt.Error != nil {
		return stmt.Error
	}
	sqlDB, err := q.DB()
	if err != nil {
		return fmt.Errorf("pool of the query: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errors.New("the pool's connections are not pgx's")
		}
		rows, err := c.Conn().Query(ctx, stmt.SQL.String(), stmt.Vars...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}
