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

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
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

	svc, err := service.Open(ctx, rpc.ServiceGateway, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS), service.Redis(), service.NATS())
	if err != nil {
		return err
	}
	defer svc.Close()

	// adapters -> app -> ports
	client := rpc.NewClient(svc.NATS, cfg.RPCSubjectPrefix)
	accounts := app.New(adapters.NewWorkspaceStore(svc.DB), adapters.NewKeyStore(svc.DB), adapters.NewMessagingChannels(client), cfg.RatePerMinute)
	limiter := ratelimit.New(svc.Redis, redisx.Keys{Prefix: cfg.RedisPrefix}, time.Minute)

	public := httpx.NewEcho(log)
	svc.MountProbes(public)
	httpport.NewPublic(accounts, limiter, client, svc.NATS.MaxPayload(), httpport.NewMetrics(svc.Metrics), log,
		httpport.WithAuthFailuresPerMinute(cfg.AuthFailuresPerMinute), httpport.WithProxies(cfg.Proxies())).Mount(public)

	admin := httpx.NewEcho(log)
	httpport.NewAdmin(accounts).Mount(admin)
	srv, err := svc.RPCServer(cfg.RPCSubjectPrefix, version)
	if err != nil {
		return err
	}
	if err := srv.Handle(rpc.EndpointAdmin, admin); err != nil {
		return fmt.Errorf("serve admin endpoint: %w", err)
	}
	// A flow invoke it forwards may take the whole rpc.LongHandlerTimeout:
	// a rollout lets those in flight finish.
	return svc.Serve(ctx, public, cfg.Addr, service.LongRequests())
}
