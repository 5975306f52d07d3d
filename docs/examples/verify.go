// A webhook receiver that checks every delivery's signature before it
// trusts the body. Standard library only:
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run verify.go
//
// It listens on 127.0.0.1:$PORT (9000 when PORT is unset; 0 picks a free
// port) and prints the address it took, then one line per delivery.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// replayWindow is how far X-Service-Timestamp may be from this machine's
// clock, either way, before a delivery is refused as a possible replay.
const replayWindow = 300 * time.Second

// verifySignature checks X-Service-Signature against the raw body: it must
// be "sha256=" and the hex HMAC-SHA256 of "<timestamp>.<body>" keyed with
// the webhook's secret, and the timestamp must be within replayWindow of now.
func verifySignature(secret, timestamp, signature string, body []byte, now time.Time) error {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(body)
	expected := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(signature), []byte(expected)) { // constant time
		return errors.New("bad signature")
	}
	unix, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("bad timestamp")
	}
	skew := now.Sub(time.Unix(unix, 0))
	if skew > replayWindow || skew < -replayWindow {
		return errors.New("stale timestamp")
	}
	return nil
}

type receiver struct {
	secret string
	mu     sync.Mutex
	seen   map[string]bool // delivery ids already handled; keep them in your database
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The signature covers the bytes as sent: read them before any parsing.
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	err = verifySignature(rc.secret, r.Header.Get("X-Service-Timestamp"),
		r.Header.Get("X-Service-Signature"), body, time.Now())
	if err != nil {
		log.Printf("refused: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// Retries and replays carry the same X-Service-Delivery: answer 2xx
	// every time, act once.
	id := r.Header.Get("X-Service-Delivery")
	rc.mu.Lock()
	first := !rc.seen[id]
	rc.seen[id] = true
	rc.mu.Unlock()
	if first {
		fmt.Printf("accepted %s %s %s\n", r.Header.Get("X-Service-Event"), id, body)
	}
	w.WriteHeader(http.StatusNoContent)
}

func main() {
	secret := os.Getenv("PARLEY_WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set PARLEY_WEBHOOK_SECRET to the secret PUT /v1/webhook returned")
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "9000"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, &receiver{secret: secret, seen: map[string]bool{}}))
}
