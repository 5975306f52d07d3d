// Command webhook-receiver is an example receiver of Parley webhooks, the
// one the README's quick start runs. It is the Go client's webhook.NewHandler
// (docs/webhooks.md "Verifying a delivery"): it verifies X-Service-Signature
// over the raw body with the webhook's secret, refuses timestamps more than
// 300 seconds from now, deduplicates by X-Service-Delivery, and prints each
// event once, as its kind and its body exactly as Parley sent it.
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run ./e2e/cmd/webhook-receiver   # listens on 127.0.0.1:9000
package main

import (
	"bytes"
	"context"
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
// body as it arrived. The body, not the parsed event encoded again: that
// would differ from what Parley sent and its delivery log keeps (HTML
// characters escaped, timestamps' zero milliseconds dropped).
func newReceiver(secret string, out io.Writer, opts ...webhook.Option) http.Handler {
	handler := webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), func(ctx context.Context, ev *webhook.Event) error {
		body := ctx.Value(bodyKey{}).(*bytes.Buffer)
		_, err := fmt.Fprintf(out, "%s %s\n", ev.Kind, body.Bytes())
		return err
	}, opts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handler reads the body, within its limit; what it read is
		// kept for the line printed.
		body := new(bytes.Buffer)
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, body), r.Body}
		handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)))
	})
}

// bodyKey keys the request's body, as read, in its context.
type bodyKey struct{}

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
