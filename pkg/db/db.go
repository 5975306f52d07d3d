// Package db opens PostgreSQL through gorm for one service schema and applies
// that service's versioned migrations. Each service owns one schema
// (docs/architecture.md "The services and what each owns"); its tables are
// named "<schema>.<table>" by the naming
// strategy, so a service cannot reach another's tables by accident.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
	"go.uber.org/zap"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"
)

// ConnectTimeout bounds each new connection to PostgreSQL unless
// DATABASE_URL sets connect_timeout. A server that is down or unreachable
// then fails a request within it (503 service_unavailable, see
// errs.DependencyDown) instead of holding it for the operating system's TCP
// timeout; a healthy server connects in milliseconds.
const ConnectTimeout = 2 * time.Second

// maxConns is how many connections a process opens to PostgreSQL at most.
const maxConns = 20

// Setting is a run-time parameter every connection of a pool starts with
// (sent in its startup message, so it costs no round trip): a statement
// that depends on a server setting gets it whatever the server's default,
// without a transaction to SET LOCAL it in.
type Setting struct {
	Name, Value string
}

// Open connects to url, applies migrations (SQL files at the root of
// migrations) to schemaName and returns a gorm handle whose table names are
// qualified with that schema, each connection started with settings (over
// any of the same name in url). Migrations are serialized across processes
// with a Postgres advisory lock, so several instances may start at once.
func Open(ctx context.Context, url, schemaName string, migrations fs.FS, log *zap.Logger, settings ...Setting) (*gorm.DB, error) {
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if connCfg.ConnectTimeout == 0 {
		connCfg.ConnectTimeout = ConnectTimeout
	}
	for _, s := range settings {
		connCfg.RuntimeParams[s.Name] = s.Value
	}
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*connCfg)}), &gorm.Config{
		NamingStrategy:         schema.NamingStrategy{TablePrefix: schemaName + "."},
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// Every connection the pool opened stays while it is in use at least
	// once a minute: under load a pool that keeps fewer than it opens
	// closes one each time a query ends above that count and forks a new
	// backend for the next, whose start costs PostgreSQL many times the
	// query; on 2 cores that churn alone saturated the API's reads
	// (docs/operations.md "Scaling"). The minute lets the
	// connections of a burst go soon after it.
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxIdleTime(time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("reach postgres: %w", err)
	}
	if err := Migrate(ctx, sqlDB, schemaName, migrations, log); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return gdb, nil
}

// Migrate creates schemaName if needed and applies the pending migrations,
// recording them in <schema>.goose_db_version.
func Migrate(ctx context.Context, sqlDB *sql.DB, schemaName string, migrations fs.FS, log *zap.Logger) error {
	if _, err := sqlDB.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoteIdent(schemaName)); err != nil {
		// Two instances may race on CREATE SCHEMA before either holds the
		// migration lock; the loser sees a unique violation and can go on.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			return fmt.Errorf("create schema %s: %w", schemaName, err)
		}
	}
	store, err := database.NewStore(database.DialectPostgres, schemaName+".goose_db_version")
	if err != nil {
		return fmt.Errorf("migration store: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(advisoryLockID(schemaName)))
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	provider, err := goose.NewProvider("", sqlDB, migrations,
		goose.WithStore(store),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("load migrations for %s: %w", schemaName, err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schemaName, err)
	}
	for _, r := range results {
		log.Info("migration applied", zap.String("schema", schemaName), zap.String("file", r.Source.Path), zap.Duration("took", r.Duration))
	}
	return nil
}

// advisoryLockID gives each schema its own lock, so services migrating at the
// same time do not wait for each other.
func advisoryLockID(schemaName string) int64 {
	var h int64 = 0x5041524c // "PARL"
	for _, c := range schemaName {
		h = h*31 + int64(c)
	}
	return h
}

func quoteIdent(s string) string {
	return `"` + s + `"`
}

// IsUniqueViolation reports whether err is a unique-constraint violation.
func IsUniqueViolation(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// Close closes the pool behind gdb.
func Close(gdb *gorm.DB) error {
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks the connection, for readiness probes.
func Ping(ctx context.Context, gdb *gorm.DB) error {
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}
