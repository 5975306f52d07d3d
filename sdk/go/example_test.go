package parley_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	parley "github.com/parleyhq/parley/sdk/go"
)

func ExampleNew() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"),
		parley.WithBaseURL("https://parley.example.com"),
		parley.WithRetry(parley.RetryPolicy{MaxAttempts: 5}),
	)
	me, err := c.Me(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(me.Workspace.Name, me.RateLimit.PerMinute)
}

func ExampleClient_SendMessage() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"))
	msg, err := c.SendMessage(context.Background(), parley.SendMessageRequest{
		ConversationID: "0192f3a4-0000-7000-8000-000000000001",
		Text:           "Which one?",
		Buttons: []parley.Button{
			{Type: parley.ButtonPostback, Title: "Blue", Payload: "SKU_BLUE"},
			{Type: parley.ButtonWebURL, Title: "All colours", URL: "https://shop.example.com/colours"},
		},
	})
	switch {
	case errors.Is(err, parley.ErrOutsideMessagingWindow):
		fmt.Println("the customer last wrote over 24 hours ago")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("sent", msg.ID)
	}
}

func ExampleClient_Invoke() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"))
	ctx := context.Background()
	flowID := "0192f3a4-0000-7000-8000-00000000f100"
	res, err := c.Invoke(ctx, flowID, map[string]any{"order_id": "A-1001"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.Text)
	}
	if res.Status == parley.RunWaiting {
		// The flow asked a question: answer it.
		res, err = c.Continue(ctx, flowID, res.SessionID, "Ada")
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(res.Status, res.Output)
}

func ExampleClient_InvokeStream() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"))
	events := c.InvokeStream(context.Background(), "0192f3a4-0000-7000-8000-00000000f100",
		map[string]any{"name": "Ada"})
	for ev, err := range events {
		if errors.Is(err, parley.ErrStreamDropped) {
			log.Fatal("the run is stored failed; run it again (a new call has a new key)")
		}
		if err != nil {
			log.Fatal(err)
		}
		switch ev := ev.(type) {
		case *parley.RunStart:
			fmt.Println("run", ev.RunID)
		case *parley.RunMessage:
			fmt.Println(ev.Text)
		case *parley.RunEnd:
			fmt.Println(ev.Status, ev.Usage.Tokens)
		}
	}
}

func ExampleClient_Conversations() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"))
	for conv, err := range c.Conversations(context.Background(), parley.ConversationsParams{Platform: parley.PlatformTelegram}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(conv.Contact.Name, conv.LastMessageAt)
	}
}

func ExampleError() {
	c := parley.New(os.Getenv("PARLEY_API_KEY"))
	_, err := c.Comment(context.Background(), "17900000000000001")
	var perr *parley.Error
	if errors.As(err, &perr) {
		fmt.Println(perr.Status, perr.Code, perr.RequestID)
	}
	if errors.Is(err, parley.ErrCommentNotFound) {
		fmt.Println("no such comment")
	}
}
