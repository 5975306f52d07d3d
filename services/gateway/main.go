// Command gateway is Parley's public door: it serves the Developer API on
// GATEWAY_ADDR, authenticates API keys (stored hashed in the "accounts"
// schema), applies each workspace's per-minute limit in Redis, answers
// /v1/me and forwards every other /v1 route to its owning service over NATS
// request/reply. Operators reach its admin API (workspaces, plans, keys)
// through the rpc "admin" endpoint with parleyctl.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
	"github.com/parleyhq/parley/services/gateway/migrations"
)

const version = "1.0.0"

func main() {
	service.Main(rpc.ServiceGateway, run)
}

func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := config.Load[gwconfig.Config]()
	if err != nil {
		return err
	}
	log.Info("starting", zap.String("version", version), zap.Any("config", config.Masked(cfg)))

	gdb, err := db.Open(ctx, cfg.DatabaseURL, adapters.Schema, migrations.FS, log)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	rdb, err := redisx.Open(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	nc, err := natsx.Connect(ctx, cfg.Connections, rpc.ServiceGateway, log)
	if err != nil {
		return err
	}
	defer nc.Drain()

	// adapters -> app -> ports
	client := rpc.NewClient(nc, cfg.RPCSubjectPrefix)
	accounts := app.New(adapters.NewWorkspaceStore(gdb), adapters.NewKeyStore(gdb), adapters.NewMessagingChannels(client), cfg.RatePerMinute)
	limiter := ratelimit.New(rdb, redisx.Keys{Prefix: cfg.RedisPrefix}, time.Minute)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	public := httpx.NewEcho(log)
	httpx.MountProbes(public, reg,
		httpx.Check{Name: "postgres", Check: func(ctx context.Context) error { return db.Ping(ctx, gdb) }},
		httpx.Check{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		httpx.Check{Name: "nats", Check: func(context.Context) error { return natsx.Ready(nc) }},
	)
	httpport.NewPublic(accounts, limiter, client, nc.MaxPayload(), httpport.NewMetrics(reg), log,
		httpport.WithAuthFailuresPerMinute(cfg.AuthFailuresPerMinute), httpport.WithProxies(cfg.Proxies())).Mount(public)

	admin := httpx.NewEcho(log)
	httpport.NewAdmin(accounts).Mount(admin)
	srv, err := rpc.NewServer(nc, cfg.RPCSubjectPrefix, rpc.ServiceGateway, version, log)
	if err != nil {
		return err
	}
	defer stopRPC(srv, log)
	if err := srv.Handle(rpc.EndpointAdmin, admin); err != nil {
		return fmt.Errorf("serve admin endpoint: %w", err)
	}

	log.Info("listening", zap.String("addr", cfg.Addr))
	// Serve returns once ctx is done and the HTTP requests in flight have
	// finished; the deferred closes then run in reverse: rpc server, NATS,
	// Redis, Postgres.
	return serve(ctx, public, cfg.Addr)
}

func serve(ctx context.Context, e *echo.Echo, addr string) error {
	if err := httpx.Serve(ctx, e, addr); err != nil {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}

func stopRPC(srv *rpc.Server, log *zap.Logger) {
	if err := srv.Stop(); err != nil {
		log.Warn("stop rpc server", zap.Error(err))
	}
}
