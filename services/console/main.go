// Command console is Parley's operator console: a server-rendered web
// dashboard on CONSOLE_ADDR where operators sign in and look after a
// workspace. It keeps only its own operators and sessions (the "console"
// schema) and reaches every other service through their admin and API
// endpoints over NATS, via pkg/adminclient, the same calls parleyctl makes.
// parleyctl creates operators through the console's rpc "admin" endpoint.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/console/internal/adapters"
	"github.com/parleyhq/parley/services/console/internal/adapters/observe"
	"github.com/parleyhq/parley/services/console/internal/app"
	consoleconfig "github.com/parleyhq/parley/services/console/internal/config"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
	httpport "github.com/parleyhq/parley/services/console/internal/ports/http"
	"github.com/parleyhq/parley/services/console/migrations"
)

const version = "1.0.0"

// pruneEvery is how often expired sessions are deleted; each is refused
// from the moment it expires, so this only keeps the table small.
const pruneEvery = time.Minute

func main() {
	service.Main(rpc.ServiceConsole, run)
}

// run reads the configuration from the environment and serves with
// production's seams.
func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := service.LoadConfig[consoleconfig.Config](log, version)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, log, seams{})
}

// seams are what tests replace in the wiring; the zero value is
// production's.
type seams struct {
	// clock dates sessions and operators; time.Now when nil.
	clock func() time.Time
	// passwordCost is argon2id's cost of an operator's password;
	// operator.DefaultParams when zero. Tests make it cheap: every
	// operator created and every sign-in hashes.
	passwordCost operator.Params
	// redisHook sees every call of the console's Redis client; none when
	// nil.
	redisHook redis.Hook
	// upstream wraps the console's calls to the services when set: tests
	// give them a deadline shorter than rpc.CallTimeout, to meet a
	// service that answers too late.
	upstream func(adminclient.Caller) adminclient.Caller
}

// serve opens the console's connections, wires it on them and serves until
// ctx ends. Tests run it with their own configuration and seams.
func serve(ctx context.Context, cfg consoleconfig.Config, log *zap.Logger, s seams) error {
	svc, err := service.Open(ctx, rpc.ServiceConsole, version, log, cfg.Connections,
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

// wire builds the console's adapters, use cases and ports on svc's
// connections.
func wire(cfg consoleconfig.Config, svc *service.App, s seams) (service.Ports, error) {
	cost := s.passwordCost
	if cost == (operator.Params{}) {
		cost = operator.DefaultParams
	}
	hasher, err := operator.NewHasher(cost)
	if err != nil {
		return service.Ports{}, fmt.Errorf("password hasher: %w", err)
	}
	if s.redisHook != nil {
		svc.Redis.AddHook(s.redisHook)
	}
	limiter := ratelimit.New(svc.Redis, redisx.Keys{Prefix: cfg.RedisPrefix}, time.Minute)
	obs := observe.New(svc.Metrics)
	// The other services, through the one client parleyctl uses too.
	var upstream adminclient.Caller = rpc.NewClient(svc.NATS, cfg.RPCSubjectPrefix)
	if s.upstream != nil {
		upstream = s.upstream(upstream)
	}
	services := adminclient.New(obs.Upstream(upstream))
	console := app.New(app.Deps{
		Operators:  adapters.NewOperatorStore(svc.DB),
		Sessions:   adapters.NewSessionStore(svc.DB),
		Workspaces: services,
		APIKeys:    services,
		Channels:   services,
		Webhooks:   services,
		Flows:      services,
		Inbox:      services,
		Forms:      adapters.NewForms(idempotency.New(svc.Redis, redisx.Keys{Prefix: cfg.RedisPrefix}, formKeyScope, idempotency.Options{Log: svc.Log()})),
		Limiter:    adapters.NewSignInLimits(limiter, cfg.LoginFailuresPerMinute, cfg.LoginAccountFailuresPerMinute),
		Hasher:     hasher,
		Policy:     session.Policy{IdleTTL: cfg.SessionTTL, MaxAge: cfg.SessionMaxAge},
		NewID:      uuid.NewString,
		Clock:      s.clock,
	})
	svc.Go("session pruner", func(ctx context.Context) { pruneSessions(ctx, console, svc.Log()) })

	return service.Ports{
		Public: httpport.NewPublic(httpport.PublicDeps{
			App:             console,
			Proxies:         cfg.Proxies(),
			InsecureCookies: cfg.InsecureCookies,
			Observer:        obs,
			InboxChanges:    adapters.NewInboxChanges(svc.NATS, cfg.RPCSubjectPrefix),
			Log:             svc.Log(),
		}),
		Endpoints: []service.Endpoint{{Name: rpc.EndpointAdmin, Handler: httpport.NewAdmin(httpport.AdminDeps{App: console, Log: svc.Log()})}},
	}, nil
}

// formKeyScope is the Redis scope of the forms' ids (app.Deps.Forms).
const formKeyScope = "console.form"

// pruneSessions deletes expired sessions every pruneEvery until ctx ends.
func pruneSessions(ctx context.Context, a *app.App, log *zap.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := a.PruneSessions(ctx); err != nil {
				log.Warn("prune sessions", zap.Error(err))
			} else if n > 0 {
				log.Debug("sessions pruned", zap.Int64("count", n))
			}
		}
	}
}
