// Quickstart talks to Parley with the Go client alone: it answers a
// customer, runs a flow, streams a second run of it, then serves the
// webhook and prints each verified event until interrupted.
//
//	PARLEY_API_KEY=pk_... PARLEY_WEBHOOK_SECRET=whsec_... go run ./quickstart \
//	    -conversation CONVERSATION_ID -flow FLOW_ID -input '{"name": "Ada"}'
//
// Run it in docs/examples. Every flag can come from the environment
// instead: PARLEY_API_KEY, PARLEY_BASE_URL, PARLEY_CONVERSATION_ID,
// PARLEY_FLOW_ID. The webhook listens on -listen (127.0.0.1:9000); save a
// URL that reaches it with PUT /v1/webhook, whose answer holds the secret.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"

	parley "github.com/parleyhq/parley/sdk/go"
	"github.com/parleyhq/parley/sdk/go/webhook"
)

func main() {
	key := flag.String("key", os.Getenv("PARLEY_API_KEY"), "the API key (PARLEY_API_KEY)")
	baseURL := flag.String("base-url", os.Getenv("PARLEY_BASE_URL"), "the API's base URL, without /v1 (PARLEY_BASE_URL; the client's default when empty)")
	conversation := flag.String("conversation", os.Getenv("PARLEY_CONVERSATION_ID"), "the conversation to answer (PARLEY_CONVERSATION_ID)")
	flowID := flag.String("flow", os.Getenv("PARLEY_FLOW_ID"), "the flow to invoke (PARLEY_FLOW_ID)")
	input := flag.String("input", "{}", "the flow's input, a JSON object")
	reply := flag.String("reply", "Thanks for writing! We are on it.", "the reply to send")
	listen := flag.String("listen", "127.0.0.1:9000", "where the webhook listens")
	flag.Parse()
	secret := os.Getenv("PARLEY_WEBHOOK_SECRET")
	if *key == "" || *conversation == "" || *flowID == "" || secret == "" {
		log.Fatal("set the API key, -conversation, -flow and PARLEY_WEBHOOK_SECRET")
	}
	var flowInput map[string]any
	if err := json.Unmarshal([]byte(*input), &flowInput); err != nil {
		log.Fatalf("-input: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var opts []parley.Option
	if *baseURL != "" {
		opts = append(opts, parley.WithBaseURL(*baseURL))
	}
	client := parley.New(*key, opts...)

	if err := answer(ctx, client, *conversation, *reply); err != nil {
		log.Fatal(err)
	}
	if err := invoke(ctx, client, *flowID, flowInput); err != nil {
		log.Fatal(err)
	}
	if err := stream(ctx, client, *flowID, flowInput); err != nil {
		log.Fatal(err)
	}
	if err := serveWebhook(ctx, *listen, secret); err != nil {
		log.Fatal(err)
	}
}

// answer sends a reply to the customer of a conversation. The client gives
// the send an Idempotency-Key and keeps it over its retries, so a send
// retried after a lost answer reaches the customer once.
func answer(ctx context.Context, client *parley.Client, conversationID, text string) error {
	msg, err := client.SendMessage(ctx, parley.SendMessageRequest{ConversationID: conversationID, Text: text})
	if errors.Is(err, parley.ErrOutsideMessagingWindow) {
		return fmt.Errorf("the customer's last message is too old to answer: %w", err)
	}
	if err != nil {
		return err
	}
	fmt.Printf("sent message %s (%s on the platform)\n", msg.ID, msg.ExternalID)
	return nil
}

// invoke runs the flow and prints what it said and returned.
func invoke(ctx context.Context, client *parley.Client, flowID string, input map[string]any) error {
	res, err := client.Invoke(ctx, flowID, input)
	if err != nil {
		return err
	}
	fmt.Printf("run %s: %s\n", res.RunID, res.Status)
	for _, m := range res.Messages {
		fmt.Printf("  says %q\n", m.Text)
	}
	if res.Error != nil {
		fmt.Printf("  failed: %s: %s\n", res.Error.Code, res.Error.Message)
	}
	return nil
}

// stream runs the flow again and prints its events as they come.
func stream(ctx context.Context, client *parley.Client, flowID string, input map[string]any) error {
	for ev, err := range client.InvokeStream(ctx, flowID, input) {
		if err != nil {
			return err // parley.ErrStreamDropped: run it again with a new key
		}
		switch ev := ev.(type) {
		case *parley.RunStart:
			fmt.Printf("stream: run %s started\n", ev.RunID)
		case *parley.NodeStart:
			fmt.Printf("stream: node %s (%s)\n", ev.NodeID, ev.Type)
		case *parley.RunMessage:
			fmt.Printf("stream: says %q\n", ev.Text)
		case *parley.RunEnd:
			fmt.Printf("stream: %s\n", ev.Status)
		}
	}
	return nil
}

// serveWebhook serves the webhook until ctx ends: the handler verifies
// each delivery (401 otherwise), decodes it, and calls back once per
// delivery id.
func serveWebhook(ctx context.Context, addr, secret string) error {
	handler := webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), func(_ context.Context, ev *webhook.Event) error {
		if data, ok := ev.Data.(*webhook.MessageReceived); ok {
			fmt.Printf("%s in %s: %s wrote %q\n", ev.Kind, data.ConversationID, data.Contact.Name, data.Message.Text)
			return nil
		}
		fmt.Printf("%s %s\n", ev.Kind, ev.ID) // webhook.Event.Data says more: see verify.go
		return nil
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("listening on %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
