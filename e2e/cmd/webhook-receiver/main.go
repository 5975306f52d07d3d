// Command webhook-receiver is an example receiver of Parley webhooks, the
// one the README shows: it verifies X-Service-Signature over the raw body
// with the webhook's secret, refuses timestamps more than 300 seconds from
// now, deduplicates by X-Service-Delivery, and prints each event.
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run ./e2e/cmd/webhook-receiver   # listens on 127.0.0.1:9000
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// maxSkew is the replay window: a delivery signed longer ago (or ahead) is
// refused, so a captured request cannot be replayed later.
const maxSkew = 300 * time.Second

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
	ts := r.Header.Get("X-Service-Timestamp")
	if !rc.validSignature(ts, body, r.Header.Get("X-Service-Signature")) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if !rc.fresh(ts) {
		http.Error(w, "stale timestamp", http.StatusUnauthorized)
		return
	}
	// Retries and replays carry the same delivery id: answer 2xx, do the
	// work once.
	if rc.firstTime(r.Header.Get("X-Service-Delivery")) {
		rc.Handle(r.Header.Get("X-Service-Event"), body)
	}
	w.WriteHeader(http.StatusNoContent)
}

// validSignature checks "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + raw body))
// in constant time.
func (rc *Receiver) validSignature(ts string, body []byte, header string) bool {
	mac := hmac.New(sha256.New, []byte(rc.Secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(header), []byte(want))
}

func (rc *Receiver) fresh(ts string) bool {
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	skew := rc.Now().Sub(time.Unix(unix, 0))
	return math.Abs(float64(skew)) <= float64(maxSkew)
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
	log.Printf("receiving Parley webhooks on http://%s/", addr)
	srv := &http.Server{Addr: addr, Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
