package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Bounds of the shutdown steps, so a stuck one cannot hold the process
// for ever. HTTP waits httpx.DefaultShutdownGrace (LongRequestGrace for a
// service that forwards long rpc calls, see Ports.LongRequests) and the
// rpc server its StopWait (rpc.StopGrace, or its longest endpoint's own
// timeout).
const (
	// LongRequestGrace is how long a service serving LongRequests waits
	// for its HTTP requests in flight: the longest rpc call it may forward
	// (a synchronous flow run, rpc.LongHandlerTimeout) and a margin for
	// writing the answer.
	LongRequestGrace = rpc.LongHandlerTimeout + 5*time.Second
	// StepGrace bounds each step registered with OnStop or Go.
	StepGrace = 15 * time.Second
	// CloseGrace bounds closing each connection, the NATS drain among
	// them: what is buffered is flushed and what was received is handled.
	CloseGrace = 5 * time.Second
)

// App is one running service: its connections, its metrics, its rpc
// server and the workers it started, shut down in one order
// (docs/architecture.md "The anatomy of a service"):
//
//  1. stop taking HTTP requests and let those in flight finish (Serve);
//  2. stop the rpc servers and wait for their requests in flight;
//  3. stop consumers and workers (OnStop, Go), the latest registered first,
//     letting the work in hand finish;
//  4. drain NATS, close Redis, close the database;
//
// each step logged, then a final "stopped". A service's serve builds it
// with Open, defers Close (so a failure half-way through start-up stops
// what had started), wires adapters, app and ports on its connections into
// Ports, and ends with Serve.
type App struct {
	// DB, Redis and NATS are the connections Open was asked for; the
	// others are nil.
	DB    *gorm.DB
	Redis *redis.Client
	NATS  *nats.Conn
	// Metrics is the process's Prometheus registry, empty: the service
	// registers every collector it exports, the runtime's among them
	// (RegisterRuntime), with one function its metrics test calls too.
	// MountProbes serves it on /metrics.
	Metrics *prometheus.Registry

	name    string
	version string
	conn    config.Connections
	log     *zap.Logger
	checks  []httpx.Check
	shown   []httpx.Shown
	rpc     *rpc.Server // nil until Serve starts one
	steps   []step      // OnStop and Go, run latest first
	closes  []step      // the connections, in the order they close
	once    sync.Once
}

// step is one named part of the shutdown.
type step struct {
	done  string // logged when it has run, "relay stopped"
	stops []func(context.Context) error
}

// Option chooses a connection Open makes.
type Option func(*wants)

type wants struct {
	schema     string
	migrations fs.FS
	settings   []db.Setting
	redis      bool
	nats       bool
}

// Postgres opens the database, migrating schema with migrations, each
// connection started with settings (db.Open).
func Postgres(schema string, migrations fs.FS, settings ...db.Setting) Option {
	return func(w *wants) { w.schema, w.migrations, w.settings = schema, migrations, settings }
}

// Redis opens Redis.
func Redis() Option { return func(w *wants) { w.redis = true } }

// NATS connects to NATS (natsx.Connect).
func NATS() Option { return func(w *wants) { w.nats = true } }

// Open makes the connections the options ask for, whatever their order, as
// name at version (name is an rpc.Service* name: it is also the NATS
// connection's and the rpc server's name): PostgreSQL, then Redis, then
// NATS, each with its readiness check; Close undoes them in reverse. If one
// fails, those already made are closed and the error returned.
func Open(ctx context.Context, name, version string, log *zap.Logger, conn config.Connections, opts ...Option) (*App, error) {
	var w wants
	for _, o := range opts {
		o(&w)
	}
	a := &App{name: name, version: version, conn: conn, log: log, Metrics: prometheus.NewRegistry()}
	if err := a.open(ctx, conn, w); err != nil {
		a.closeConnections()
		return nil, err
	}
	return a, nil
}

// RegisterRuntime registers on reg the Go runtime's and the process's
// collectors (go_*, process_*), which every service exports: each
// service's registering function calls it, so that its metrics test
// (pkg/testenv/metricsdoc) sees them as main's path does.
func RegisterRuntime(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

func (a *App) open(ctx context.Context, conn config.Connections, w wants) error {
	if w.migrations != nil {
		gdb, err := db.Open(ctx, conn.DatabaseURL, w.schema, w.migrations, a.log, w.settings...)
		if err != nil {
			return err
		}
		a.DB = gdb
		a.checks = append(a.checks, httpx.Check{Name: "postgres", Check: func(ctx context.Context) error { return db.Ping(ctx, gdb) }})
		a.closes = append([]step{{done: "postgres closed", stops: []func(context.Context) error{
			func(context.Context) error { return db.Close(gdb) },
		}}}, a.closes...)
	}
	if w.redis {
		rdb, err := redisx.Open(ctx, conn.RedisURL)
		if err != nil {
			return err
		}
		a.Redis = rdb
		a.checks = append(a.checks, httpx.Check{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
		a.closes = append([]step{{done: "redis closed", stops: []func(context.Context) error{
			func(context.Context) error { return rdb.Close() },
		}}}, a.closes...)
	}
	if w.nats {
		nc, err := natsx.Connect(ctx, conn, a.name, a.log)
		if err != nil {
			return err
		}
		a.NATS = nc
		a.checks = append(a.checks, httpx.Check{Name: "nats", Check: func(context.Context) error { return natsx.Ready(nc) }})
		a.closes = append([]step{{done: "nats drained", stops: []func(context.Context) error{
			func(ctx context.Context) error { return drain(ctx, nc) },
		}}}, a.closes...)
	}
	return nil
}

// drain lets NATS flush what is buffered and hand over what was received,
// then closes the connection; past ctx it closes it anyway.
func drain(ctx context.Context, nc *nats.Conn) error {
	closed := nc.StatusChanged(nats.CLOSED)
	if err := nc.Drain(); err != nil {
		nc.Close()
		return err
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return errors.New("drain not finished in time; closed")
	}
}

// Log is the service's logger, as Open was given it.
func (a *App) Log() *zap.Logger { return a.log }

// OnStop registers a consumer or worker to stop after the rpc servers and
// before the connections close. Registrations stop the latest first; the
// stops given together run at once (two consumers that must stop pulling
// together), each with StepGrace.
func (a *App) OnStop(what string, stops ...func(ctx context.Context) error) {
	a.steps = append(a.steps, step{done: what + " stopped", stops: stops})
}

// Go runs a background worker until shutdown: its ctx ends at its step (see
// OnStop), not at the signal, so it keeps working while HTTP and rpc
// requests finish; the step waits for run to return.
func (a *App) Go(what string, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	a.OnStop(what, func(stepCtx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-stepCtx.Done():
			return errors.New("still running")
		}
	})
}

// PlacementsEvery is how often a service reads again where the streams
// and consumers it shows (ShowJetStream) are.
const PlacementsEvery = 10 * time.Second

// ShowJetStream logs where each of the streams and durable consumers the
// service ensured at start lives (of names them: natsx.Placement's Stream
// and Consumer), with its replicas, leader and the servers that hold it,
// and shows them on /readyz under "jetstream" from then on. They are read
// again every PlacementsEvery in the background, so a probe never waits on
// JetStream, and they never make the service unready: a stream electing a
// leader for a few seconds must not take every instance out of its
// Service at once, and what a service cannot publish meanwhile waits in
// its outbox or in the stream.
func (a *App) ShowJetStream(ctx context.Context, js jetstream.JetStream, of ...natsx.Placement) {
	placements := natsx.NewPlacements(ctx, js, of...)
	for _, p := range placements.Last() {
		switch {
		case p.Error != "":
			a.log.Warn("jetstream placement not read", zap.String("stream", p.Stream), zap.String("consumer", p.Consumer), zap.String("error", p.Error))
		case p.Consumer != "":
			a.log.Info("consumer ensured", p.Fields()...)
		default:
			a.log.Info("stream ensured", p.Fields()...)
		}
	}
	a.shown = append(a.shown, httpx.Shown{Name: "jetstream", Show: func() any { return placements.Last() }})
	a.Go("jetstream placements", func(ctx context.Context) { placements.Run(ctx, PlacementsEvery) })
}

// Ports are what a service serves, as its wiring built them.
type Ports struct {
	// Public is served on the service's own address, beside /healthz,
	// /readyz (every connection Open made) and /metrics (App.Metrics).
	// Nil serves only those.
	Public *echo.Echo
	// Endpoints are the service's rpc endpoints ("api", "admin"), served on
	// NATS in the service's queue group (pkg/rpc), so that every instance
	// shares their calls.
	Endpoints []Endpoint
	// LongRequests makes Serve wait LongRequestGrace for the HTTP requests
	// in flight when it stops, instead of httpx.DefaultShutdownGrace: a
	// service whose requests wait on long rpc calls (the gateway
	// forwarding flow invokes) lets them finish on a rollout rather than
	// cutting them.
	LongRequests bool
}

// Endpoint is one rpc endpoint: the HTTP routes a Handler serves to the
// callers of its Name.
type Endpoint struct {
	Name    string
	Handler http.Handler
	Options []rpc.EndpointOption
}

// Serve serves p until ctx ends (SIGINT or SIGTERM, see Main): p.Public
// with the probes on addr, each request read within the connections'
// HTTP_READ_TIMEOUT (httpx.NewServer), and p.Endpoints on NATS. Then it shuts the
// service down in order (see App) and returns. A listener or an endpoint
// that fails to start is returned as the error, after the same shutdown.
func (a *App) Serve(ctx context.Context, addr string, p Ports) error {
	public := p.Public
	if public == nil {
		public = httpx.NewEcho(a.log)
	}
	httpx.MountProbes(public, a.Metrics, a.checks, a.shown...)
	if err := a.serveEndpoints(p.Endpoints); err != nil {
		a.Close()
		return err
	}
	grace := httpx.DefaultShutdownGrace
	if p.LongRequests {
		grace = LongRequestGrace
	}
	a.log.Info("serving", zap.String("addr", addr))
	errc := make(chan error, 1)
	go func() { errc <- httpx.Serve(ctx, httpx.NewServer(addr, public, a.conn.HTTPReadTimeout), grace) }()
	var err error
	select {
	case err = <-errc:
		err = fmt.Errorf("serve %s: %w", addr, err)
		a.log.Info("stopping", zap.Error(err))
	case <-ctx.Done():
		a.log.Info("stopping", zap.String("reason", context.Cause(ctx).Error()))
		start := time.Now()
		if err = <-errc; err != nil {
			err = fmt.Errorf("stop serving %s: %w", addr, err)
			a.log.Warn("http server stopped", zap.Error(err), zap.Duration("took", time.Since(start)))
		} else {
			a.log.Info("http server stopped", zap.Duration("took", time.Since(start)))
		}
	}
	a.Close()
	return err
}

// serveEndpoints registers the service on NATS under its connections' rpc
// prefix, with every endpoint; the server stops right after HTTP, waiting
// for its requests in flight.
func (a *App) serveEndpoints(endpoints []Endpoint) error {
	if len(endpoints) == 0 {
		return nil
	}
	if a.NATS == nil {
		return errors.New("rpc endpoints need NATS: open it with service.NATS()")
	}
	srv, err := rpc.NewServer(a.NATS, a.conn.RPCSubjectPrefix, a.name, a.version, a.log)
	if err != nil {
		return err
	}
	a.rpc = srv
	for _, e := range endpoints {
		if err := srv.Handle(e.Name, e.Handler, e.Options...); err != nil {
			return fmt.Errorf("serve rpc endpoint %q: %w", e.Name, err)
		}
	}
	return nil
}

// Close shuts down everything after HTTP, in order, logging each step and
// then "stopped". Serve calls it; run defers it for the paths that return
// before Serve. Only the first call does anything.
func (a *App) Close() {
	a.once.Do(func() {
		if srv := a.rpc; srv != nil {
			a.run(step{done: "rpc server stopped", stops: []func(context.Context) error{
				func(context.Context) error { return srv.Stop() },
			}}, srv.StopWait()+time.Second)
		}
		for i := len(a.steps) - 1; i >= 0; i-- {
			a.run(a.steps[i], StepGrace)
		}
		a.closeConnections()
		a.log.Info("stopped")
	})
}

func (a *App) closeConnections() {
	for _, s := range a.closes {
		a.run(s, CloseGrace)
	}
	a.closes = nil
}

// run runs one step's stops at once, each bounded by grace, and logs the
// step with what went wrong, if anything.
func (a *App) run(s step, grace time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	errs := make([]error, len(s.stops))
	var wg sync.WaitGroup
	for i, stop := range s.stops {
		wg.Go(func() { errs[i] = stop(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		a.log.Warn(s.done, zap.Error(err), zap.Duration("took", time.Since(start)))
		return
	}
	a.log.Info(s.done, zap.Duration("took", time.Since(start)))
}
