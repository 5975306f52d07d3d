// Command telegram-sandbox is a local stand-in for the Telegram Bot API, for
// trying Parley without a real bot: point TELEGRAM_API_BASE at it and it
// prints what your bot would have sent to the customer. `make run` starts it
// when DEMO_TELEGRAM_TOKEN is not set to a real bot's token.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/parleyhq/parley/e2e/internal/sandbox"
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
	sandbox.Serve("telegram-sandbox", addr, fmt.Sprintf("telegram sandbox listening on http://%s", addr), fake)
}
