// Command webhook-receiver is an example receiver of Parley webhooks, the
// one the README's quick start runs. It is the Go client's webhook.NewHandler
// (docs/webhooks.md "Verifying a delivery"): it verifies X-Service-Signature
// over the raw body with the webhook's secret, refuses timestamps more than
// 300 seconds from now, deduplicates by X-Service-Delivery, and prints each
// event once.
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run ./e2e/cmd/webhook-receiver   # listens on 127.0.0.1:9000
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/sdk/go/webhook"
)

// newReceiver returns the receiver's handler: each event verified with
// secret and handled once is written to out as one line, its kind and its
// envelope.
func newReceiver(secret string, out io.Writer, opts ...webhook.Option) http.Handler {
	return webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), func(_ context.Context, ev *webhook.Event) error {
		envelope, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s %s\n", ev.Kind, envelope)
		return err
	}, opts...)
}

func main() {
	secret := os.Getenv("PARLEY_WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set PARLEY_WEBHOOK_SECRET to the secret PUT /v1/webhook returned")
	}
	addr := os.Getenv("RECEIVER_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9000"
	}
	// A request must arrive whole within HTTP_READ_TIMEOUT (30 s), so that
	// a client that sends slowly cannot hold the receiver's connections.
	listening, err := config.Load[config.Listening]()
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("receiving Parley webhooks on http://%s/", addr)
	log.Fatal(httpx.NewServer(addr, newReceiver(secret, os.Stdout), listening.HTTPReadTimeout).ListenAndServe())
}
