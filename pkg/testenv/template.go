package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/db"
)

// Option changes what New prepares.
type Option func(*options)

type options struct {
	schemas     []schemaSet
	databaseURL string
	redisURL    string
	natsURL     string
}

type schemaSet struct {
	name       string
	migrations fs.FS
}

// Migrated makes New's database a clone of a template that has schema's
// migrations applied, so the test (or the service it starts) finds them
// done instead of running them. Give it once per schema the test uses, in
// the order the services migrate.
//
// The template is built once per set of schemas and migrations, on the
// first New that asks for it, and kept between runs: it is named after a
// hash of the migrations, so a changed migration gets a new template and
// concurrent processes and checkouts never share one that differs. It is
// never dropped by a test (one may be cloning it); see docs/testing.md
// "Migrated templates, measured" for removing old ones.
func Migrated(schema string, migrations fs.FS) Option {
	return func(o *options) { o.schemas = append(o.schemas, schemaSet{schema, migrations}) }
}

// Servers makes New use the PostgreSQL server of databaseURL and the Redis
// of redisURL instead of the shared ones of DATABASE_URL and REDIS_URL: a
// test's own servers (pkg/testenv/localserver), which it may stop, kill or
// flush. Either may be "" to keep the shared one. The test's database,
// Migrated's template included, is made in that server as in the shared
// one; NATS stays the shared server (see NATS).
func Servers(databaseURL, redisURL string) Option {
	return func(o *options) { o.databaseURL, o.redisURL = databaseURL, redisURL }
}

// NATS makes the test's NATS the servers at url (comma-separated, as
// NATS_URL takes them: a natscluster's URL) instead of the shared server,
// for a test that breaks its own. The test's streams are removed from
// them when it ends, so they must outlive the Env: start them first.
func NATS(url string) Option {
	return func(o *options) { o.natsURL = url }
}

// templateRecipe changes when the way templates are built changes, so an
// older build under the same migrations is not reused.
const templateRecipe = "testenv-template-v1"

// templates holds, per server and template name, the one build of this
// process.
var templates sync.Map // templateKey -> *templateBuild

// templateKey names a template in one server: a test's own server
// (Servers) has none of the shared server's templates. The server is told
// by its system identifier, unique to each initdb, so that a later server
// on a port an earlier one used is not taken for it.
type templateKey struct {
	server uint64
	name   string
}

type templateBuild struct {
	once sync.Once
	err  error
}

// templateName is "parley_tpl_" and a hash of the recipe, the schema names
// and every migration file's path and content, in order.
func templateName(schemas []schemaSet) (string, error) {
	h := sha256.New()
	h.Write([]byte(templateRecipe))
	for _, s := range schemas {
		fmt.Fprintf(h, "\x00schema %s\x00", s.name)
		err := fs.WalkDir(s.migrations, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(s.migrations, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("read %s migrations: %w", s.name, err)
		}
	}
	return "parley_tpl_" + hex.EncodeToString(h.Sum(nil))[:24], nil
}

// ensureTemplate builds the template for schemas unless it exists, and
// returns its name. Builders in other processes are kept out by an
// advisory lock on the template's name; the template is built under a
// temporary name and renamed when complete, so a template that exists is
// whole. It accepts no connections: a session connected to a template
// makes CREATE DATABASE ... TEMPLATE fail, and with none allowed there can
// be none.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, admin *url.URL, schemas []schemaSet) (string, error) {
	name, err := templateName(schemas)
	if err != nil {
		return "", err
	}
	var server uint64
	if err := conn.QueryRow(ctx, `SELECT system_identifier FROM pg_control_system()`).Scan(&server); err != nil {
		return "", fmt.Errorf("identify the server at %s: %w", admin.Host, err)
	}
	v, _ := templates.LoadOrStore(templateKey{server, name}, &templateBuild{})
	b := v.(*templateBuild)
	b.once.Do(func() { b.err = buildTemplate(ctx, admin, name, schemas) })
	return name, b.err
}

func buildTemplate(ctx context.Context, admin *url.URL, name string, schemas []schemaSet) error {
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("reach postgres at %s: %w (start it with scripts/deps.sh)", admin.Host, err)
	}
	defer conn.Close(context.Background())
	sum := sha256.Sum256([]byte(name))
	lockID := int64(binary.BigEndian.Uint64(sum[:8]))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockID); err != nil {
		return fmt.Errorf("lock template %s: %w", name, err)
	}
	// Closing the connection would release it too; unlocking says so.
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lockID) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look for template %s: %w", name, err)
	}
	if exists {
		return nil
	}
	// A build left by a process killed mid-way is not in use: only the
	// holder of the lock builds.
	building := name + "_build"
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS "`+building+`" WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop unfinished template: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE "`+building+`"`); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	own := *admin
	own.Path = "/" + building
	for _, s := range schemas {
		gdb, err := db.Open(ctx, own.String(), s.name, s.migrations, zap.NewNop())
		if err != nil {
			return fmt.Errorf("migrate template %s: %w", name, err)
		}
		if err := db.Close(gdb); err != nil {
			return fmt.Errorf("migrate template %s: %w", name, err)
		}
	}
	// No one may connect from now on; a backend of the closed pool may
	// still be exiting, so end those, then rename (which needs none).
	if _, err := conn.Exec(ctx, `ALTER DATABASE "`+building+`" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true`); err != nil {
		return fmt.Errorf("seal template %s: %w", name, err)
	}
	return retryInUse(ctx, func() error {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, building); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, `ALTER DATABASE "`+building+`" RENAME TO "`+name+`"`)
		return err
	})
}

// retryInUse runs f until it does not fail with "object in use" (another
// session is connected to a database that must have none), 10 s at most.
func retryInUse(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
