package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestEventsReplicasRaisedOnARunningSystem: Parley runs on a three-server
// NATS cluster of its own with EVENTS_REPLICAS=1, customer messages
// flowing from Telegram ingress to a signed webhook. Every service and
// parleyctl is given NATS_URL as a list whose first server is down. Then
// the services that ensure streams (messaging, the webhook-dispatcher, the
// flow-runner) are replaced one by one, as a rolling change does, by
// instances started with EVENTS_REPLICAS=3, each new one ready before the
// old one is interrupted, while messages keep flowing. Then:
//
//   - EVENTS, EVENTS_CHAT and EVENTS_REPLAY are on three servers, all
//     current, and so are the durable consumers on them;
//   - each new instance's /readyz shows its streams and consumers on three
//     servers;
//   - every accepted message reached the receiver, signed, under one
//     delivery id; an id that came again is counted and reported, as the
//     at-least-once delivery of docs/webhooks.md allows.
func TestEventsReplicasRaisedOnARunningSystem(t *testing.T) {
	t.Parallel()
	c := natscluster.Start(t, 3)
	down := "nats://" + ports.Refused(t)
	_, botAPI := telegramfake.Start(t)
	s := startSuiteEnv(t, []testenv.Option{testenv.NATS(c.URL())}, nil, "NATS_URL="+down+","+c.URL(), "EVENTS_REPLICAS=1",
		"TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	env := s.env
	rcv := receiver.New(t, receiver.Status(http.StatusNoContent), receiver.Within(3*time.Minute))
	ws, key := s.developer(t) // parleyctl, on the list
	secret := s.saveWebhook(t, key, rcv.URL)
	ch := s.addChannel(t, ws, "external", "--kind", "telegram", "--token", "700100400:AAH-replicas-e2e-token")

	js := env.JetStream(t)
	const dispatcherConsumer, chatConsumer = "webhook-dispatcher", "flow-runner-chat"
	events, chat, replay := env.Stream.Name, natsx.ChatStream(env.Stream).Name, env.Stream.Named("replay").Name
	placements := []natsx.Placement{
		{Stream: events}, {Stream: events, Consumer: dispatcherConsumer},
		{Stream: chat}, {Stream: chat, Consumer: chatConsumer},
		{Stream: replay}, {Stream: replay, Consumer: dispatcherConsumer},
	}
	placedOn := func(replicas int) {
		t.Helper()
		for _, of := range placements {
			wait.For(t, 2*time.Minute, fmt.Sprintf("%s %s on %d servers, all current", of.Stream, of.Consumer, replicas), func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				p, err := natsx.ReadPlacement(ctx, js, of)
				if err != nil {
					return err
				}
				if p.Replicas != replicas || p.Leader == "" || len(p.Current) != replicas || len(p.Behind) > 0 {
					return fmt.Errorf("placed %+v", p)
				}
				return nil
			})
		}
	}
	placedOn(1)

	load := startIngressLoad(t, "http://"+s.procs["messaging"].addr+"/ingress/telegram/"+ch.ID, ch.Secret, 4)
	load.flowing(t, 50)
	for _, svc := range []struct{ name, addrVar string }{
		{"messaging", "MESSAGING_ADDR"}, {"webhook-dispatcher", "DISPATCHER_ADDR"}, {"flow-runner", "FLOW_RUNNER_ADDR"},
	} {
		next := s.startExtra(t, svc.name, svc.addrVar, "EVENTS_REPLICAS=3")
		if svc.name == "messaging" {
			load.to("http://" + next.addr + "/ingress/telegram/" + ch.ID)
		}
		old := s.procs[svc.name]
		if err := old.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatalf("interrupt %s: %v", svc.name, err)
		}
		select {
		case <-old.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s %s still running 30 s after an interrupt", old.name, old.addr)
		}
		s.procs[svc.name] = next
		t.Logf("%s now runs with EVENTS_REPLICAS=3; %d messages accepted so far", svc.name, load.accepted.Load())
		load.flowing(t, 50)
	}
	sent := load.stop()
	t.Logf("%d messages accepted, %d posts retried", len(sent), load.retried.Load())

	placedOn(3)
	for _, name := range []string{"messaging", "webhook-dispatcher", "flow-runner"} {
		var ready struct {
			Ready     bool              `json:"ready"`
			JetStream []natsx.Placement `json:"jetstream"`
		}
		getReady(t, s.procs[name].addr, &ready)
		if !ready.Ready || len(ready.JetStream) == 0 {
			t.Errorf("%s /readyz: %+v", name, ready)
		}
		for _, p := range ready.JetStream {
			if p.Replicas != 3 {
				t.Errorf("%s /readyz shows %s %s on %d servers, want 3", name, p.Stream, p.Consumer, p.Replicas)
			}
		}
	}

	// Every message once by delivery id, signed; repeats of an id are
	// allowed, and counted.
	var deliveryOf map[string]string
	var repeats int
	got := rcv.Await(t, fmt.Sprintf("the %d accepted messages delivered", len(sent)), func(got []receiver.Request) bool {
		var err error
		if deliveryOf, repeats, err = deliveriesByText(receiver.OfEvent(got, "message.received")); err != nil {
			t.Fatal(err)
		}
		return len(deliveryOf) >= len(sent)
	})
	for _, r := range got {
		if err := r.Verify(secret, r.At); err != nil {
			t.Fatalf("delivery %s: %v", r.Delivery(), err)
		}
	}
	for _, i := range sent {
		if _, ok := deliveryOf[updateText(i)]; !ok {
			t.Errorf("update %d accepted and never delivered", i)
		}
	}
	if len(deliveryOf) != len(sent) {
		t.Errorf("%d distinct messages delivered, want the %d accepted", len(deliveryOf), len(sent))
	}
	t.Logf("%d messages delivered through the change to three replicas; %d deliveries repeated (same delivery id)", len(deliveryOf), repeats)
}

// ingressLoad is a steady flow of customer messages to one Telegram
// channel's ingress, from a few customers at once: update n says
// updateText(n). Each is posted until it is answered 200, as Telegram
// retries, to whichever ingress address is current.
type ingressLoad struct {
	secret   string
	url      atomic.Pointer[string]
	next     atomic.Int64 // updates handed out
	accepted atomic.Int64
	retried  atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup

	mu   sync.Mutex
	took []int // the updates accepted
}

// giveUpAfter bounds the posting of one update once the flow is stopped,
// so a test that failed with ingress down still ends.
const giveUpAfter = time.Minute

func startIngressLoad(t *testing.T, url, secret string, senders int) *ingressLoad {
	l := &ingressLoad{secret: secret, done: make(chan struct{})}
	l.to(url)
	for w := range senders {
		l.wg.Go(func() { l.send(w) })
	}
	t.Cleanup(func() { l.stop() })
	return l
}

// to sends the next posts to url.
func (l *ingressLoad) to(url string) { l.url.Store(&url) }

func (l *ingressLoad) send(w int) {
	for !l.stopped() {
		i := int(l.next.Add(1))
		body := telegramMessage(i, int64(7000+w), "Ren", updateText(i))
		start := time.Now()
		for postTelegram(*l.url.Load(), l.secret, body) != http.StatusOK {
			if l.stopped() && time.Since(start) > giveUpAfter {
				return
			}
			l.retried.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
		l.mu.Lock()
		l.took = append(l.took, i)
		l.mu.Unlock()
		l.accepted.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
}

// flowing waits until n more messages have been accepted.
func (l *ingressLoad) flowing(t *testing.T, n int64) {
	t.Helper()
	want := l.accepted.Load() + n
	wait.Until(t, time.Minute, fmt.Sprintf("%d messages accepted", want), func() bool { return l.accepted.Load() >= want })
}

func (l *ingressLoad) stopped() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// stop ends the flow once each sender's message in hand is accepted, and
// returns the updates accepted.
func (l *ingressLoad) stop() []int {
	if !l.stopped() {
		close(l.done)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.took)
}

// getReady decodes the /readyz of the service at addr into out.
func getReady(t *testing.T, addr string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s /readyz: %v", addr, err)
	}
}
