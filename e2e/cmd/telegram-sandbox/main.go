// Command telegram-sandbox is a local stand-in for the Telegram Bot API, for
// trying Parley without a real bot: point TELEGRAM_API_BASE at it and it
// prints what your bot would have sent to the customer. `make run` starts it
// when DEMO_TELEGRAM_TOKEN is not set to a real bot's token.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

func main() {
	addr := os.Getenv("TELEGRAM_SANDBOX_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8089"
	}
	fake := &telegramfake.Server{OnCall: func(c telegramfake.Call) {
		params, _ := json.Marshal(c.Params)
		fmt.Printf("bot %s -> %s %s\n", c.Token, c.Method, params)
	}}
	srv := &http.Server{Addr: addr, Handler: fake, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Printf("telegram sandbox listening on http://%s\n", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "telegram-sandbox:", err)
		os.Exit(1)
	}
}
