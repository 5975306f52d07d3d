// Package testenv gives each integration test its own slice of the real
// servers: a fresh PostgreSQL database, a Redis key prefix, and JetStream
// stream and subject names, so tests run in parallel, and beside another
// checkout's, without colliding. Everything is removed when the test ends.
//
// The servers are found through DATABASE_URL, REDIS_URL and NATS_URL (the
// defaults of docs/operations.md "Configuration"); scripts/deps.sh starts
// them when stopped. A test that breaks a server runs its own
// (localserver) and points New at it with Servers.
//
// Its packages are the rest of the one test kit every module uses: wait
// (poll until), ports (free loopback ports), receiver (a developer's
// webhook endpoint and the signature check), telegramfake and metafake
// (the platforms' APIs, speaking their real JSON), localserver (a test's
// own Redis and PostgreSQL, to flush, kill and restart).
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/redisx"
)

// Env is one test's share of PostgreSQL, Redis and NATS.
type Env struct {
	// ID is unique to this test and names everything it owns.
	ID          string
	DatabaseURL string
	RedisURL    string
	RedisPrefix string
	NATSURL     string
	Stream      natsx.EventsStream
	RPCPrefix   string
}

// New creates the test's database, prefix and names, and registers their
// removal with t.Cleanup. The database is empty, or with Migrated a clone
// of a migrated template.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	id := "t" + randomHex(6)
	e := &Env{
		ID:          id,
		RedisURL:    o.redisURL,
		RedisPrefix: "parleytest:" + id + ":",
		NATSURL:     o.natsURL,
		Stream:      natsx.EventsStream{Name: "EVENTS_" + strings.ToUpper(id), SubjectPrefix: id + ".events"},
		RPCPrefix:   id + ".rpc",
	}
	if e.RedisURL == "" {
		e.RedisURL = getenv("REDIS_URL", "redis://127.0.0.1:6379/0")
	}
	if e.NATSURL == "" {
		e.NATSURL = getenv("NATS_URL", nats.DefaultURL)
		anchorJetStream(t, e.NATSURL)
	}
	base := o.databaseURL
	if base == "" {
		base = getenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/parley?sslmode=disable")
	}
	e.DatabaseURL = createDatabase(t, base, "parley_"+id, o.schemas)
	t.Cleanup(func() { e.cleanRedis(t); e.cleanNATS(t) })
	return e
}

// Connections returns the settings a service would load with this Env.
func (e *Env) Connections() config.Connections {
	return config.Connections{
		DatabaseURL:         e.DatabaseURL,
		RedisURL:            e.RedisURL,
		NATSURL:             e.NATSURL,
		RedisPrefix:         e.RedisPrefix,
		EventsStream:        e.Stream.Name,
		EventsSubjectPrefix: e.Stream.SubjectPrefix,
		// One server: EVENTS_REPLICAS's default.
		EventsReplicas:   1,
		RPCSubjectPrefix: e.RPCPrefix,
		DailyResetTZ:     "Asia/Ulaanbaatar",
		Listening:        config.Listening{HTTPReadTimeout: 30 * time.Second},
	}
}

// Environ returns the environment a service binary needs to run in this Env,
// as KEY=VALUE pairs to append to os.Environ().
func (e *Env) Environ() []string {
	return []string{
		"DATABASE_URL=" + e.DatabaseURL,
		"REDIS_URL=" + e.RedisURL,
		"REDIS_PREFIX=" + e.RedisPrefix,
		"NATS_URL=" + e.NATSURL,
		"EVENTS_STREAM=" + e.Stream.Name,
		"EVENTS_SUBJECT_PREFIX=" + e.Stream.SubjectPrefix,
		"RPC_SUBJECT_PREFIX=" + e.RPCPrefix,
	}
}

// Setenv sets the environment of Environ for the rest of t, so a
// service's run loads its configuration from it as main does. t must not
// be parallel (testing.T.Setenv).
func (e *Env) Setenv(t testing.TB) {
	for _, kv := range e.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Logger returns a logger that writes through t.
func (e *Env) Logger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// DB opens the test database for schemaName with its migrations applied,
// each connection started with settings (db.Open).
func (e *Env) DB(t testing.TB, schemaName string, migrations fs.FS, settings ...db.Setting) *gorm.DB {
	t.Helper()
	gdb, err := db.Open(context.Background(), e.DatabaseURL, schemaName, migrations, zap.NewNop(), settings...)
	if err != nil {
		t.Fatalf("testenv: open database: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) })
	return gdb
}

// Redis returns a client; keys must start with e.RedisPrefix.
func (e *Env) Redis(t testing.TB) *redis.Client {
	t.Helper()
	client, err := redisx.Open(context.Background(), e.RedisURL)
	if err != nil {
		t.Fatalf("testenv: %v (start it with scripts/deps.sh)", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// NATS returns a connection closed at the end of the test.
func (e *Env) NATS(t testing.TB) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := natsx.Connect(ctx, e.Connections(), "test-"+e.ID, zap.NewNop())
	if err != nil {
		t.Fatalf("testenv: %v (start it with scripts/deps.sh)", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream handle on a fresh connection.
func (e *Env) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(e.NATS(t))
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	return js
}

func createDatabase(t testing.TB, base, name string, schemas []schemaSet) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: DATABASE_URL: %v", err)
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatalf("testenv: reach postgres at %s: %v (start it with scripts/deps.sh)", admin.Host, err)
	}
	defer conn.Close(ctx)
	create := `CREATE DATABASE "` + name + `"`
	if len(schemas) > 0 {
		tpl, err := ensureTemplate(ctx, conn, &admin, schemas)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		create += ` TEMPLATE "` + tpl + `"`
	}
	// A template accepts no connections, so none can be in the way of the
	// copy; should one be (a template altered by hand), the copy waits.
	if err := retryInUse(ctx, func() error { _, err := conn.Exec(ctx, create); return err }); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	own := *u
	own.Path = "/" + name
	return own.String()
}

// ForgetRedis deletes every key of the test's prefix, as a flush of
// Redis, or a failover to a replica that had none of them, loses them all.
func (e *Env) ForgetRedis(t testing.TB) {
	t.Helper()
	if err := e.deleteRedisKeys(); err != nil {
		t.Fatalf("testenv: forget redis keys: %v", err)
	}
}

func (e *Env) cleanRedis(t testing.TB) {
	if err := e.deleteRedisKeys(); err != nil {
		t.Logf("testenv: clean redis: %v", err)
	}
}

// deleteRedisKeys deletes every key of the test's prefix; a Redis that
// cannot be reached has none left to delete.
func (e *Env) deleteRedisKeys() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := redisx.Open(ctx, e.RedisURL)
	if err != nil {
		return nil
	}
	defer client.Close()
	iter := client.Scan(ctx, 0, e.RedisPrefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		if err := client.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// withJetStream runs f on a connection of its own to the servers at
// natsURL, bounded by 10 s; servers that cannot be reached have nothing
// for f (the test's own use of them reports it), and f does not run.
func withJetStream(natsURL string, f func(ctx context.Context, js jetstream.JetStream)) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f(ctx, js)
}

func (e *Env) cleanNATS(t testing.TB) {
	withJetStream(e.NATSURL, func(ctx context.Context, js jetstream.JetStream) { e.deleteStreams(ctx, t, js) })
}

// deleteStreams deletes the test's streams.
func (e *Env) deleteStreams(ctx context.Context, t testing.TB, js jetstream.JetStream) {
	// The test's streams are its events stream and any named after it
	// (the dispatcher's <EVENTS_STREAM>_REPLAY work queue); another test's
	// names never start with this one's, as the ids have one length.
	names := []string{e.Stream.Name}
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		if strings.HasPrefix(name, e.Stream.Name) && name != e.Stream.Name {
			names = append(names, name)
		}
	}
	if err := lister.Err(); err != nil {
		t.Logf("testenv: list streams: %v", err)
	}
	for _, name := range names {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("testenv: delete stream %s: %v", name, err)
		}
	}
}

// anchorStream is a stream kept on the shared NATS server for good, so
// that its account always holds one. nats-server 2.9 removes an
// account's storage directory when its last file-stored stream is
// deleted, and a stream created at that moment fails ("could not create
// storage directory", 10077, answered as 10049 "error creating store for
// stream"): with tests creating and deleting streams in parallel, the
// count reached zero between two of them and a service failed to start.
// The anchor is tiny (one message at most, never written) and shared by
// every checkout's tests.
const anchorStream = "PARLEY_TESTENV_ANCHOR"

// anchored holds the servers this process made sure of the anchor on.
var anchored sync.Map

// anchorJetStream makes sure the anchor stream is on the server at
// natsURL, once per process. A server that cannot be reached is left to
// the test's own use of it to report.
func anchorJetStream(t testing.TB, natsURL string) {
	if _, done := anchored.Load(natsURL); done {
		return
	}
	withJetStream(natsURL, func(ctx context.Context, js jetstream.JetStream) {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:     anchorStream,
			Subjects: []string{"parley_testenv.anchor"},
			Storage:  jetstream.FileStorage,
			MaxMsgs:  1,
		})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			t.Logf("testenv: anchor stream: %v", err)
			return
		}
		anchored.Store(natsURL, true)
	})
}

func getenv(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testenv: random: %v", err))
	}
	return hex.EncodeToString(b)
}
