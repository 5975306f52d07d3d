package webhook_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/sdk/go/webhook"
)

// A receiver: the secret is the one PUT /v1/webhook (the client's
// SaveWebhook) returned. Each event is handled once; a refused delivery is
// answered 401, a failed handle 500 and retried by Parley.
func ExampleNewHandler() {
	secret := "whsec_example"
	handler := webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), func(ctx context.Context, ev *webhook.Event) error {
		switch data := ev.Data.(type) {
		case *webhook.MessageReceived:
			fmt.Printf("%s from %s: %s\n", ev.Kind, data.Contact.Name, data.Message.Text)
		case *webhook.PostbackReceived:
			fmt.Printf("%s: %s\n", ev.Kind, data.Postback.Payload)
		case *webhook.CommentReceived:
			fmt.Printf("%s on %s: %s\n", ev.Kind, data.Comment.PostID, data.Comment.Text)
		case *webhook.Test:
			fmt.Printf("%s from workspace %s\n", ev.Kind, data.WorkspaceID)
		default:
			fmt.Printf("%s, a kind this receiver does not know\n", ev.Kind)
		}
		return nil
	})
	// In a program: http.ListenAndServe(":9000", handler). Here, a
	// delivery signed the way Parley signs it, sent twice.
	body := `{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{"workspace_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","sent_at":"2026-11-22T10:00:00.000Z"}}`
	for range 2 {
		ts := time.Now().Unix()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set(webhook.HeaderDelivery, "0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15")
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, ts, []byte(body)))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// test from workspace 7c9e6679-7425-40de-944b-e07fc1f90ae7
	// 200
	// 200
}

// Verifying and decoding by hand, in a handler of one's own.
func ExampleVerify() {
	secret := "whsec_example"
	http.HandleFunc("/hooks/parley", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := webhook.Parse(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.Printf("%s %s", ev.Kind, ev.ID) // deduplicate by ev.ID before acting
	})
}
