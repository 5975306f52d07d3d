package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// embeddedNATS is a nats-server with JetStream that the test can stop and
// start again on the same port and store, as an outage does.
type embeddedNATS struct {
	t    *testing.T
	opts natsserver.Options
	srv  *natsserver.Server
}

func startEmbeddedNATS(t *testing.T) *embeddedNATS {
	t.Helper()
	port := ports.Free(t, 1)[0]
	n := &embeddedNATS{t: t, opts: natsserver.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *embeddedNATS) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

func (n *embeddedNATS) start() {
	n.t.Helper()
	opts := n.opts
	srv, err := natsserver.NewServer(&opts)
	if err != nil {
		n.t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats-server did not start")
	}
	n.srv = srv
}

func (n *embeddedNATS) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func TestOutboxSurvivesNATSOutage(t *testing.T) {
	t.Parallel()
	ns := startEmbeddedNATS(t)
	h := newHarness(t, withNATS(ns.url()))
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")

	// The reading side has its own connection, like the dispatcher.
	reader, err := nats.Connect(ns.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	js, err := jetstream.New(reader)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 8, First: "Olu", Date: t0.Unix(), Text: "before the outage"})
	wait.Until(t, 5*time.Second, "the first event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 1 })
	// The relay deletes what it published once the stream has acknowledged
	// it: a moment after the event is in the stream.
	wait.Until(t, 5*time.Second, "the first event's row deleted", func() bool { return h.count("outbox", "") == 0 })

	ns.stop()
	// Ingress does not need NATS: the event is committed to the outbox.
	h.deliver(ch, tgUpdate{UpdateID: 2, MessageID: 2, FromID: 8, First: "Olu", Date: t0.Unix() + 1, Text: "during the outage"})
	var eventID string
	h.db.Raw(`SELECT event_id::text FROM messaging.outbox`).Row().Scan(&eventID)
	if eventID == "" {
		t.Fatal("the event is not waiting in the outbox")
	}
	// Let the relay try and fail at least once.
	wait.Until(t, 10*time.Second, "a failed relay pass", func() bool {
		return h.metric("parley_messaging_outbox_publish_failures_total") >= 1
	})
	if n := h.count("outbox", ""); n != 1 {
		t.Fatalf("unpublished rows = %d during the outage", n)
	}

	ns.start()
	// The sweep publishes it (the publish right after its commit failed)
	// and deletes its row.
	wait.Until(t, 20*time.Second, "the outbox row published", func() bool {
		return h.count("outbox", "") == 0
	})
	// Give a buffered duplicate publish time to land, then count.
	wait.Until(t, 5*time.Second, "the second event in the stream", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) >= 2 })
	time.Sleep(300 * time.Millisecond)
	msgs := streamMessages(t, js, h.env.Stream.Name)
	seen := 0
	for _, m := range msgs {
		if m.Header.Get("Nats-Msg-Id") == eventID {
			seen++
			var ev eventsv1.Event
			if err := proto.Unmarshal(m.Data, &ev); err != nil || ev.GetMessageReceived().GetMessage().GetText() != "during the outage" {
				t.Fatalf("event = %v %v", &ev, err)
			}
		}
	}
	if seen != 1 || len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, %d of them the outage's event; want 2 and 1", len(msgs), seen)
	}
}
