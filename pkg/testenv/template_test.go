package testenv

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/testenv/localserver"
)

// migrations is a schema's migrations with a marker unique to this test
// process, so the template is built here (not found from an earlier run)
// and can be dropped at the end without touching anyone else's.
func migrations(marker string) fstest.MapFS {
	return fstest.MapFS{
		"00001_init.sql": {Data: []byte(`-- +goose Up
-- ` + marker + `
CREATE TABLE kit.items (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO kit.items VALUES (1, 'seeded by a migration');
`)},
	}
}

func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	u, err := url.Parse(getenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/parley?sslmode=disable"))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func dropTemplate(t *testing.T, name string) {
	conn := adminConn(t)
	for _, sql := range []string{
		`ALTER DATABASE "` + name + `" WITH IS_TEMPLATE false`,
		`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`,
	} {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Logf("drop template %s: %v", name, err)
		}
	}
}

func TestMigratedClonesOneTemplateBuiltOnce(t *testing.T) {
	mig := migrations(fmt.Sprintf("%s %d", t.Name(), time.Now().UnixNano()))
	name, err := templateName([]schemaSet{{"kit", mig}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTemplate(t, name) })

	// Many tests at once, as a parallel suite starts: one builds, all clone.
	const n = 6
	urls := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			defer wg.Done()
			env := New(t, Migrated("kit", mig))
			urls[i] = env.DatabaseURL
			conn, err := pgx.Connect(context.Background(), env.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var got string
			if err := conn.QueryRow(context.Background(), `SELECT name FROM kit.items WHERE id = 1`).Scan(&got); err != nil || got != "seeded by a migration" {
				t.Fatalf("clone holds %q, %v; want the migrated row", got, err)
			}
			// The clone is the test's own: a write here is not in the others.
			if _, err := conn.Exec(context.Background(), `INSERT INTO kit.items VALUES (2, $1)`, env.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("check", func(t *testing.T) {
		t.Parallel()
		wg.Wait()
		conn := adminConn(t)
		var allow, isTemplate bool
		if err := conn.QueryRow(context.Background(), `SELECT datallowconn, datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&allow, &isTemplate); err != nil {
			t.Fatalf("template %s: %v", name, err)
		}
		if allow || !isTemplate {
			t.Errorf("template %s: allows connections %v, is a template %v; want false, true", name, allow, isTemplate)
		}
		var builds int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`, name+"_build").Scan(&builds); err != nil || builds != 0 {
			t.Errorf("unfinished builds left: %d, %v", builds, err)
		}
	})
}

func TestTemplateNameFollowsTheMigrations(t *testing.T) {
	t.Parallel()
	a, _ := templateName([]schemaSet{{"kit", migrations("a")}})
	again, _ := templateName([]schemaSet{{"kit", migrations("a")}})
	changed, _ := templateName([]schemaSet{{"kit", migrations("b")}})
	otherSchema, _ := templateName([]schemaSet{{"kit2", migrations("a")}})
	two, _ := templateName([]schemaSet{{"kit", migrations("a")}, {"kit2", migrations("a")}})
	if a != again {
		t.Errorf("same migrations, two names: %s, %s", a, again)
	}
	seen := map[string]bool{}
	for _, n := range []string{a, changed, otherSchema, two} {
		if seen[n] {
			t.Errorf("name %s given to two different sets", n)
		}
		seen[n] = true
		if len(n) > 63 {
			t.Errorf("name %s is longer than PostgreSQL's 63", n)
		}
	}
}

func TestNewWithoutMigratedIsEmpty(t *testing.T) {
	t.Parallel()
	env := New(t)
	conn, err := pgx.Connect(context.Background(), env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables, %v; want an empty database", n, err)
	}
}

// Servers puts the test's database, and Migrated's template, in a
// server of the test's own, and its Redis keys in a Redis of its own; the
// same migrations on the shared server get that server's template, built
// there too.
func TestServersHoldTheTestsDatabaseAndTemplate(t *testing.T) {
	t.Parallel()
	pg := localserver.StartPostgres(t)
	rd := localserver.StartRedis(t)
	mig := migrations(fmt.Sprintf("%s %d", t.Name(), time.Now().UnixNano()))
	name, err := templateName([]schemaSet{{"kit", mig}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTemplate(t, name) })

	own := New(t, Servers(pg.URL, rd.URL), Migrated("kit", mig))
	shared := New(t, Migrated("kit", mig))
	for _, tc := range []struct {
		env  *Env
		host string
	}{{own, fmt.Sprintf("127.0.0.1:%d", pg.Port)}, {shared, ""}} {
		u, err := url.Parse(tc.env.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" && u.Host != tc.host {
			t.Fatalf("database %s, want it on %s", tc.env.DatabaseURL, tc.host)
		}
		conn, err := pgx.Connect(context.Background(), tc.env.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(context.Background(), `SELECT name FROM kit.items WHERE id = 1`).Scan(&got)
		conn.Close(context.Background())
		if err != nil || got != "seeded by a migration" {
			t.Fatalf("%s holds %q, %v; want the migrated row", tc.env.DatabaseURL, got, err)
		}
	}
	if own.RedisURL != rd.URL || shared.RedisURL == rd.URL {
		t.Fatalf("Redis: own %s, shared %s; want %s for the own only", own.RedisURL, shared.RedisURL, rd.URL)
	}
	if err := own.Redis(t).Set(context.Background(), own.RedisPrefix+"k", "v", 0).Err(); err != nil {
		t.Fatalf("the own Redis: %v", err)
	}
}
