// Command parleyctl is the operator CLI (docs/operations.md "The operator
// CLI: parleyctl"): it creates
// workspaces, API keys and channels, publishes and deactivates flows,
// re-saves webhooks, replays webhook deliveries and seeds the demo
// workspace by calling the services' admin endpoints over NATS, through
// pkg/adminclient.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
	ctlconfig "github.com/parleyhq/parley/services/parleyctl/internal/config"
)

// connectTimeout bounds the wait for NATS.
const connectTimeout = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		os.Exit(fail(os.Stderr, err))
	}
}

// fail reports err as the operator CLI promises (docs/operations.md "The
// operator CLI: parleyctl"): one line on stderr, and the exit status, 2
// for a mistake in the command line and 1 otherwise.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "parleyctl: "+oneLine(err.Error()))
	var usage *cli.UsageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := config.Load[ctlconfig.Config]()
	if err != nil {
		return err
	}
	if text, ok := cli.Help(args); ok {
		fmt.Fprintln(stdout, text)
		return nil
	}
	// An operator waits a few seconds for a NATS that is starting, not for ever.
	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	nc, err := natsx.Connect(connectCtx, cfg.Connections, "parleyctl", zap.NewNop())
	if err != nil {
		return fmt.Errorf("%w (is `make run` up?)", err)
	}
	defer nc.Close()
	// Each call is bounded by rpc.CallTimeout (the client applies it); a
	// command making several (a replay queued in parts) is not cut short.
	return cli.New(cfg, rpc.NewClient(nc, cfg.RPCSubjectPrefix), stdout).Run(ctx, args)
}

// oneLine keeps the error on the single line the operator CLI promises
// (docs/operations.md "The operator CLI: parleyctl").
func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
