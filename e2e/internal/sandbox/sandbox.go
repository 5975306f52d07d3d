// Package sandbox runs the local stand-ins that make run starts beside the
// services (the Telegram and LLM sandboxes): an HTTP server on addr until
// SIGINT or SIGTERM, then a short graceful shutdown.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
)

// Serve serves h on addr, printing banner once listening is under way,
// until SIGINT or SIGTERM, each request read within HTTP_READ_TIMEOUT as
// by the services; a server that cannot listen, or a bad
// HTTP_READ_TIMEOUT, exits the process with status 1, naming name.
func Serve(name, addr, banner string, h http.Handler) {
	listening, err := config.Load[config.Listening]()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	srv := httpx.NewServer(addr, h, listening.HTTPReadTimeout)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-signals
		// Later signals (make run sends its group's and its own) must not
		// kill the process while it shuts down or exits.
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Println(banner)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	<-stopped
}
