package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// TestMessagingSurvivesSIGKILL: Telegram updates arrive from many
// connections at once on an external channel; in the middle, messaging is
// killed with SIGKILL, while events it committed wait to be published or
// deleted (docs/architecture.md "Customer events: the outbox and the EVENTS
// stream"), and started again. Updates answered with an error, or not at
// all, are posted again as Telegram does, until each has its 200. Then:
//
//   - every update reached the receiver, under one delivery id, however
//     often that id came (at least once, deduplicated by delivery id);
//   - the outbox is empty: what the killed process committed and had not
//     published went out with the restarted one's sweep, and what it had
//     published and not deleted went out again, stored once by the stream.
func TestMessagingSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	const (
		updates = 2_000
		senders = 32
		// sweepAge is short so that the sweep after the restart comes
		// soon; the publish after commit is unaffected.
		sweepAge = 2 * time.Second
	)
	_, botAPI := telegramfake.Start(t)
	s := startSuite(t, "TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "OUTBOX_SWEEP_AGE="+sweepAge.String())
	rcv := receiver.New(t, receiver.Status(http.StatusNoContent), receiver.Within(time.Minute))
	ws, key := s.developer(t)
	s.saveWebhook(t, key, rcv.URL)
	ch := s.addChannel(t, ws, "external", "--kind", "telegram", "--token", "700100300:AAH-kill-e2e-token")
	ingress := s.messagingURL + "/ingress/telegram/" + ch.ID

	pool, err := pgxpool.New(context.Background(), s.env.DatabaseURL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	outboxRows := func() int64 {
		var n int64
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM messaging.outbox`).Scan(&n); err != nil {
			t.Fatalf("count the outbox: %v", err)
		}
		return n
	}

	// Each sender posts its share of the updates in turn, each until it is
	// answered 200: a refused connection or a 5xx is what Telegram retries.
	var accepted, retried atomic.Int64
	killAt := int64(updates / 3)
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w + 1; i <= updates; i += senders {
				body := telegramMessage(i, int64(5000+w), "Kay", fmt.Sprintf("update %d", i))
				for postTelegram(ingress, ch.Secret, body) != http.StatusOK {
					retried.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
				if accepted.Add(1) == killAt {
					close(killed)
				}
			}
		}()
	}

	select {
	case <-killed:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d of %d updates accepted before the kill", accepted.Load(), updates)
	}
	s.procs["messaging"].kill(t)
	left := outboxRows()
	t.Logf("SIGKILLed messaging after %d updates accepted: %d outbox rows left (committed, not yet published or not yet deleted); %d delivered so far",
		accepted.Load(), left, rcv.Distinct())
	u, _ := url.Parse(s.messagingURL)
	port, _ := strconv.Atoi(u.Port())
	s.start(t, "messaging", port)
	wg.Wait()
	t.Logf("every update accepted; %d posts were retried around the kill", retried.Load())

	// Every update once by delivery id; repeats of an id are allowed.
	var deliveryOf map[string]string
	var repeats int
	rcv.Await(t, fmt.Sprintf("%d updates delivered", updates), func(got []receiver.Request) bool {
		var err error
		if deliveryOf, repeats, err = deliveriesByText(got); err != nil {
			t.Fatal(err)
		}
		return len(deliveryOf) >= updates
	})
	if len(deliveryOf) != updates {
		t.Fatalf("%d distinct updates delivered, want %d", len(deliveryOf), updates)
	}
	for i := 1; i <= updates; i++ {
		if _, ok := deliveryOf[fmt.Sprintf("update %d", i)]; !ok {
			t.Errorf("update %d never delivered", i)
		}
	}
	// The sweep has had its turn by the time the last delivery arrives; the
	// rows of what was published just before are deleted a moment later.
	deadline := time.Now().Add(sweepAge + 10*time.Second)
	for outboxRows() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d outbox rows left after every delivery", outboxRows())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d updates delivered through a SIGKILL of messaging, %d deliveries repeated (same delivery id)", updates, repeats)
}

// telegramMessage is a Telegram update carrying a customer's text message
// in a private chat, as Telegram posts it; the message's id is the
// update's.
func telegramMessage(updateID int, from int64, name, text string) string {
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": updateID, "date": time.Now().Unix(),
		"from": map[string]any{"id": from, "is_bot": false, "first_name": name},
		"chat": map[string]any{"id": from, "first_name": name, "type": "private"},
		"text": text,
	}})
	return string(b)
}

// deliveriesByText files the deliveries of customers' messages by the
// message's text: the delivery id each text came under, and how many
// deliveries came again under theirs (at least once, as docs/webhooks.md
// "Answering a delivery" allows). A text under two ids is an error: its
// message was stored twice.
func deliveriesByText(got []receiver.Request) (ids map[string]string, repeats int, err error) {
	ids = map[string]string{}
	for _, r := range got {
		var ev customerEvent
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			return nil, 0, fmt.Errorf("delivery %s: %w", r.Delivery(), err)
		}
		text, _ := ev.Data.Message["text"].(string)
		if id, ok := ids[text]; ok {
			if id != r.Delivery() {
				return nil, 0, fmt.Errorf("%q delivered under two ids, %s and %s: its message stored twice", text, id, r.Delivery())
			}
			repeats++
			continue
		}
		ids[text] = r.Delivery()
	}
	return ids, repeats, nil
}

// telegramClient posts updates as Telegram does, which gives up on an
// answer after a while and sends the update again.
var telegramClient = &http.Client{Timeout: 30 * time.Second}

// postTelegram posts a Telegram update as Telegram does and returns the
// status, 0 when there was no answer (the process is gone, or silent).
func postTelegram(url, secret, body string) int {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	resp, err := telegramClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
