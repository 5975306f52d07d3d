// A webhook receiver that checks every delivery's signature before it
// trusts the body, with the Go client's webhook package:
//
//	PARLEY_WEBHOOK_SECRET=whsec_... go run verify.go
//
// It listens on 127.0.0.1:$PORT (9000 when PORT is unset; 0 picks a free
// port) and prints the address it took, then one line per delivery.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/parleyhq/parley/sdk/go/webhook"
)

// handle is called once per delivery, after its signature and timestamp
// were checked and its body decoded.
func handle(_ context.Context, ev *webhook.Event) error {
	switch data := ev.Data.(type) {
	case *webhook.MessageReceived:
		fmt.Printf("accepted %s %s: %s wrote %q\n", ev.Kind, ev.ID, data.Contact.Name, data.Message.Text)
	case *webhook.PostbackReceived:
		fmt.Printf("accepted %s %s: %s tapped %q\n", ev.Kind, ev.ID, data.Contact.Name, data.Postback.Payload)
	case *webhook.CommentReceived:
		fmt.Printf("accepted %s %s: %s commented %q\n", ev.Kind, ev.ID, data.Comment.From.Name, data.Comment.Text)
	default: // the test event, or a kind newer than this program
		fmt.Printf("accepted %s %s\n", ev.Kind, ev.ID)
	}
	return nil
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
	// The handler verifies the raw body (401 with the reason when the
	// signature does not match or the timestamp is more than 300 s away),
	// decodes it, and calls handle once per X-Service-Delivery: a retry or
	// replay of a delivery already handled is answered 200 again. The
	// store keeps the ids in this process; instances behind one URL need a
	// store they share (webhook.Store).
	handler := webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), handle)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, handler))
}
