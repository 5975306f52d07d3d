// Command console is Parley's operator console: a server-rendered web
// dashboard on CONSOLE_ADDR where operators sign in and look after a
// workspace. It keeps only its own operators and sessions (the "console"
// schema) and reaches every other service through their admin and API
// endpoints over NATS, via pkg/adminclient, the same calls parleyctl makes.
package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/service"
	"github.com/parleyhq/parley/services/console/internal/adapters"
	consoleconfig "github.com/parleyhq/parley/services/console/internal/config"
	"github.com/parleyhq/parley/services/console/migrations"
)

const version = "1.0.0"

func main() {
	service.Main(rpc.ServiceConsole, run)
}

func run(ctx context.Context, log *zap.Logger) error {
	cfg, err := config.Load[consoleconfig.Config]()
	if err != nil {
		return err
	}
	log.Info("starting", zap.String("version", version), zap.Any("config", config.Masked(cfg)))

	svc, err := service.Open(ctx, rpc.ServiceConsole, log, cfg.Connections,
		service.Postgres(adapters.Schema, migrations.FS), service.Redis(), service.NATS())
	if err != nil {
		return err
	}
	defer svc.Close()

	public := httpx.NewEcho(log)
	svc.MountProbes(public)
	return svc.Serve(ctx, public, cfg.Addr)
}
