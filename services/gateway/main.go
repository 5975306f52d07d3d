// Command gateway is Parley's public door: it serves the Developer API on
// GATEWAY_ADDR, authenticates API keys (stored hashed in the "accounts"
// schema), applies each workspace's per-minute limit in Redis, answers
// /v1/me and forwards every other /v1 route to its owning service over NATS
// request/reply. Operators reach its admin API (workspaces, plans, keys)
// through the rpc "admin" endpoint with parleyctl.
package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	"github.com/parleyhq/parley/services/gateway/internal/adapters/observe"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
	"github.com/parleyhq/parley/services/gateway/migrations"
)

const version = "1.0.0"

func main() {
	service.Main(rpc.ServiceGateway, run)
}

// run reads the configuration from the environment and serves with
// production's seams.
func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := service.LoadConfig[gwconfig.Config](log, version)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, log, seams{})
}

// seams are what tests replace in the wiring; the zero value is
// production's.
type seams struct {
	// clock stamps workspaces and keys; time.Now when nil.
	clock func() time.Time
	// redisHook sees every call of the gateway's Redis client; none when
	// nil.
	redisHook redis.Hook
}

// serve opens the gateway's connections, wires it on them and serves until
// ctx ends. Tests run it with their own configuration and seams.
func serve(ctx context.Context, cfg gwconfig.Config, log *zap.Logger, s seams) error {
	svc, err := service.Open(ctx, rpc.ServiceGateway, version, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS), service.Redis(), service.NATS())
	if err != nil {
		return err
	}
	defer svc.Close()
	ports, err := wire(cfg, svc, s)
	if err != nil {
		return err
	}
	return svc.Serve(ctx, cfg.Addr, ports)
}

// wire builds the gateway's adapters, use cases and ports on svc's
// connections.
func wire(cfg gwconfig.Config, svc *service.App, s seams) (service.Ports, error) {
	if s.redisHook != nil {
		svc.Redis.AddHook(s.redisHook)
	}
	client := rpc.NewClient(svc.NATS, cfg.RPCSubjectPrefix)
	keys := redisx.Keys{Prefix: cfg.RedisPrefix}
	changes := adapters.NewChangeToken(svc.Redis, keys)
	accounts := app.New(app.Deps{
		Workspaces:           adapters.NewWorkspaceStore(svc.DB),
		Keys:                 adapters.NewKeyStore(svc.DB),
		Channels:             adapters.NewMessagingChannels(client),
		Changes:              changes,
		DefaultRatePerMinute: cfg.RatePerMinute,
		Clock:                s.clock,
	})
	return service.Ports{
		Public: httpport.NewPublic(httpport.PublicDeps{
			App:                   accounts,
			Limiter:               ratelimit.New(svc.Redis, keys, time.Minute),
			ChangeTokenKey:        changes.Key(),
			RPC:                   client,
			MaxPayload:            svc.NATS.MaxPayload(),
			AuthFailuresPerMinute: cfg.AuthFailuresPerMinute,
			Proxies:               cfg.Proxies(),
			SSEWriteTimeout:       cfg.SSEWriteTimeout,
			Observer:              observe.New(svc.Metrics),
			Log:                   svc.Log(),
		}),
		Endpoints: []service.Endpoint{{Name: rpc.EndpointAdmin, Handler: httpport.NewAdmin(httpport.AdminDeps{App: accounts, Log: svc.Log()})}},
		// A flow invoke it forwards may take the whole
		// rpc.LongHandlerTimeout: a rollout lets those in flight finish.
		LongRequests: true,
	}, nil
}
