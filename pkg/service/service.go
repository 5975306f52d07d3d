// Package service is the lifecycle every Parley service shares
// (docs/architecture.md "The anatomy of a service"): Main builds the
// logger, runs the service until SIGINT or SIGTERM, and is the only place
// that exits; LoadConfig reads and logs the configuration; App opens the
// connections, serves the Ports a service's wiring built beside the probes
// and metrics, and shuts everything down in one order, logging each step
// and a final "stopped".
package service

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/logging"
)

// Run is a service's body: it reads its config, opens its connections and
// serves until ctx ends, returning nil after a clean shutdown.
type Run func(ctx context.Context, log *zap.Logger) error

// Main runs run for the named service and exits 1 if it fails.
//
// The first SIGINT or SIGTERM starts the shutdown; later ones are ignored
// until it is done, so a terminal's Ctrl-C followed by a supervisor's
// SIGTERM (make run sends both) still lets it finish. Every step of the
// shutdown is bounded instead (App).
func Main(name string, run Run) {
	// A log reader that goes away (make run's prefixer, a closed terminal)
	// must not kill the process with SIGPIPE in the middle of its
	// shutdown: ignored, a write to it fails, the line is lost, and the
	// shutdown goes on.
	signal.Ignore(syscall.SIGPIPE)
	if len(os.Args) == 3 && os.Args[1] == HealthcheckCommand {
		if err := healthcheck(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	log, err := logging.New(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = run(ctx, log)
	// From here the process only exits: a late signal must not kill it
	// before it says how it ended (status 143 instead of 0).
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	if err != nil {
		log.Error("service failed", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
	_ = log.Sync()
}

// LoadConfig reads a service's configuration C from the environment
// (pkg/config: each setting's default, then C's own validation) and logs
// it, with its secrets masked, as the start's first line.
func LoadConfig[C any](log *zap.Logger, version string) (C, error) {
	cfg, err := config.Load[C]()
	if err != nil {
		return cfg, err
	}
	log.Info("starting", zap.String("version", version), zap.Any("config", config.Masked(cfg)))
	return cfg, nil
}
