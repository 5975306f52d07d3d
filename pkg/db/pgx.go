package db

import (
	"context"
	"encoding/hex"
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
	return QueryRows(ctx, q, stmt.SQL.String(), stmt.Vars, scan)
}

// QueryRows is ScanRows for a statement written by hand (SQL): the
// hottest reads skip gorm's building of the statement too, a dry run of
// its clauses through reflection on every call. gdb gives the pool; it
// must not be a transaction's.
func QueryRows(ctx context.Context, gdb *gorm.DB, sql string, args []any, scan func(pgx.Rows) error) error {
	sqlDB, err := gdb.DB()
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
		rows, err := c.Conn().Query(ctx, sql, args...)
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

// AppendUUID appends u in its canonical text form (lower-case hex,
// 8-4-4-4-12), as PostgreSQL writes a uuid: a hot read scans uuid columns
// into pgtype.UUID and formats them where it wants, instead of a string
// allocated for each by pgx.
func AppendUUID(dst []byte, u [16]byte) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return append(dst, buf[:]...)
}
