// Command webhook-receiver is an example receiver of Parley webhooks, the
// one the README's quick start runs: it verifies X-Service-Signature over
// the raw body with the webhook's secret, refuses timestamps more than 300
// seconds from now, deduplicates by X-Service-Delivery, and prints each
// event.
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run ./e2e/cmd/webhook-receiver   # listens on 127.0.0.1:9000
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// maxSkew is the replay window: a delivery signed longer ago (or ahead) is
// refused, so a captured request cannot be replayed later.
const maxSkew = receiver.MaxSkew

// Receiver verifies and deduplicates deliveries, then hands each event's raw
// JSON body to Handle once.
type Receiver struct {
	Secret string
	Handle func(event string, body []byte)
	Now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // X-Service-Delivery → first seen
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	// The check docs/webhooks.md "Verifying a delivery" describes, in the
	// one implementation the
	// tests use too: HMAC-SHA256 over "<timestamp>.<raw body>", compared
	// in constant time, the timestamp within maxSkew of now.
	if err := receiver.Verify(rc.Secret, r.Header, body, rc.Now()); errors.Is(err, receiver.ErrTimestamp) {
		http.Error(w, "stale timestamp", http.StatusUnauthorized)
		return
	} else if err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	// Retries and replays carry the same delivery id: answer 2xx, do the
	// work once.
	if rc.firstTime(r.Header.Get("X-Service-Delivery")) {
		rc.Handle(r.Header.Get("X-Service-Event"), body)
	}
	w.WriteHeader(http.StatusNoContent)
}

// firstTime records id and reports whether it is new. Ids older than the
// replay window can be forgotten: their signatures no longer pass.
func (rc *Receiver) firstTime(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	now := rc.Now()
	for seen, at := range rc.seen {
		if now.Sub(at) > 2*maxSkew {
			delete(rc.seen, seen)
		}
	}
	if _, dup := rc.seen[id]; dup {
		return false
	}
	rc.seen[id] = now
	return true
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
	rc := &Receiver{Secret: secret, Now: time.Now, seen: map[string]time.Time{}, Handle: func(event string, body []byte) {
		fmt.Printf("%s %s\n", event, body)
	}}
	// A request must arrive whole within HTTP_READ_TIMEOUT (30 s), so that
	// a client that sends slowly cannot hold the receiver's connections.
	listening, err := config.Load[config.Listening]()
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("receiving Parley webhooks on http://%s/", addr)
	log.Fatal(httpx.NewServer(addr, rc, listening.HTTPReadTimeout).ListenAndServe())
}
