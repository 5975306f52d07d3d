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
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
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
	if text, ok := cli.Help(args); ok {
		fmt.Fprintln(stdout, text)
		return nil
	}
	// The settings are read, and NATS reached, at the first call, once the
	// command line is read: help and a mistake in the command line are
	// told at once, whatever the environment holds and NATS up or not.
	caller := &lazyCaller{}
	defer caller.close()
	// Each call is bounded by rpc.CallTimeout (the client applies it); a
	// command making several (a replay queued in parts) is not cut short.
	return cli.NewLazy(caller.settings, caller, stdout).Run(ctx, args)
}

// lazyCaller reads the settings and connects to NATS at its first call,
// and makes every call through that one connection.
type lazyCaller struct {
	cfg    *ctlconfig.Config // the settings, once read
	client *rpc.Client
	closed func() // closes the connection, once made
}

// settings reads parleyctl's settings from the environment the first time
// and returns them after; a setting that is wrong is refused, naming its
// variable.
func (c *lazyCaller) settings() (ctlconfig.Config, error) {
	if c.cfg != nil {
		return *c.cfg, nil
	}
	cfg, err := config.Load[ctlconfig.Config]()
	if err != nil {
		return ctlconfig.Config{}, err
	}
	c.cfg = &cfg
	return cfg, nil
}

func (c *lazyCaller) connect(ctx context.Context) (*rpc.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	cfg, err := c.settings()
	if err != nil {
		return nil, err
	}
	// An operator waits a few seconds for a NATS that is starting, not for ever.
	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	nc, err := natsx.Connect(connectCtx, cfg.Connections, "parleyctl", zap.NewNop())
	if err != nil {
		return nil, fmt.Errorf("%w (is `make run` up?)", err)
	}
	c.client, c.closed = rpc.NewClient(nc, cfg.RPCSubjectPrefix), nc.Close
	return c.client, nil
}

func (c *lazyCaller) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	client, err := c.connect(ctx)
	if err != nil {
		return err
	}
	return client.CallJSON(ctx, service, endpoint, workspaceID, method, path, in, out)
}

func (c *lazyCaller) CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	client, err := c.connect(ctx)
	if err != nil {
		return err
	}
	return client.CallRaw(ctx, service, endpoint, req, out)
}

func (c *lazyCaller) close() {
	if c.closed != nil {
		c.closed()
	}
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
