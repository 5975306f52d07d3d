package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/config"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// The benchmarks measure the two paths issue 3 names against real
// PostgreSQL and JetStream, in-process, beside a baseline measured in the
// same run:
//
//   - BenchmarkMessaging/baseline: one INSERT of an outbox-sized row plus one
//     JetStream publish waiting for the stream's ack — the least any
//     transactional event pipeline on these servers pays;
//   - BenchmarkMessaging/ingress: a Telegram update POSTed to the ingress
//     over HTTP, on an external channel, until its message.received event is
//     delivered from the stream (an ordered consumer sees it);
//   - BenchmarkMessaging/send: POST /v1/messages through the rpc "api"
//     endpoint, as the gateway forwards it, to a fake Bot API, until 201.
//
// Each reports, beside ns/op:
//   - p50-ms and p99-ms: latency of latencySample operations run one at a
//     time (no queueing), measured once per sub-benchmark;
//   - ops/s: throughput of b.N operations from benchConcurrency concurrent
//     clients (ns/op is the same figure inverted).
const (
	latencySample    = 300
	benchConcurrency = 8
)

func BenchmarkMessaging(b *testing.B) {
	bs := newBenchService(b)

	var baselineSeq atomic.Int64
	baseline := func(ctx context.Context) error {
		return bs.baselineOp(ctx, baselineSeq.Add(1))
	}
	b.Run("baseline", bs.measure(baseline, baseline))

	b.Run("ingress", bs.measure(bs.ingressAndWait, bs.ingressOnly))

	var sendSeq atomic.Int64
	send := func(ctx context.Context) error {
		return bs.sendOp(ctx, int(sendSeq.Add(1))%len(bs.conversations))
	}
	b.Run("send", bs.measure(send, send))
}

// benchService is the messaging service started by serve as main starts
// it, on the benchmark's own database and stream, with one external
// Telegram channel.
type benchService struct {
	b         *testing.B
	env       *testenv.Env
	db        *gorm.DB
	js        jetstream.JetStream
	client    *rpc.Client
	ingress   string // the channel's ingress URL
	http      *http.Client
	ws        string
	channel   messagingapi.AdminChannel
	updateSeq atomic.Int64
	// conversations are the customers' conversations the sends answer.
	conversations []string

	// Events delivered from the stream: how many, and who waits for which
	// update (by its message_id).
	delivered atomic.Int64
	waiters   sync.Map // int64 -> chan struct{}
}

func newBenchService(b *testing.B) *benchService {
	b.Helper()
	env := testenv.New(b, testenv.Migrated(adapters.Schema, migrations.FS))
	bot := httptest.NewServer(&telegramfake.Server{NoRecord: true})
	b.Cleanup(bot.Close)
	// Configured as main is, from the environment: every setting at its
	// default but the test's own servers, a free address and the fake Bot
	// API.
	env.Setenv(b)
	b.Setenv("TELEGRAM_API_BASE", bot.URL)
	b.Setenv("MESSAGING_ADDR", ports.FreeAddr(b))
	cfg, err := config.Load[svcconfig.Config]()
	if err != nil {
		b.Fatal(err)
	}
	svc := startInstance(b, env, cfg)
	gdb := env.DB(b, adapters.Schema, migrations.FS)
	ctx := context.Background()

	bs := &benchService{
		b: b, env: env, db: gdb, js: env.JetStream(b),
		client: rpc.NewClient(env.NATS(b), cfg.RPCSubjectPrefix),
		http:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchConcurrency}, Timeout: 10 * time.Second},
		ws:     uuid.NewString(),
	}
	var created messagingapi.AdminChannelAnswer
	if err := bs.client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodPost, "/admin/channels",
		map[string]any{"workspace_id": bs.ws, "kind": "telegram", "token": "700100200:AAH-bench"}, &created); err != nil {
		b.Fatal(err)
	}
	bs.channel = created.Channel
	if err := bs.client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodPatch, "/admin/channels/"+bs.channel.ID,
		map[string]any{"ai_mode": "external"}, nil); err != nil {
		b.Fatal(err)
	}
	bs.ingress = svc.base + "/ingress/telegram/" + bs.channel.ID

	if err := gdb.Exec(`CREATE TABLE messaging.bench_baseline (
		id uuid PRIMARY KEY, subject text NOT NULL, payload bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`).Error; err != nil {
		b.Fatal(err)
	}
	bs.watchStream(ctx)

	// The conversations the sends answer, one per concurrent sender so they
	// do not queue on one row, made by customers writing in.
	for i := 0; i < benchConcurrency; i++ {
		if err := bs.ingressAndWait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var list messagingapi.ConversationPage
	if err := bs.client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, bs.ws, http.MethodGet, "/v1/conversations", nil, &list); err != nil {
		b.Fatal(err)
	}
	for _, c := range list.Conversations {
		bs.conversations = append(bs.conversations, c.ID)
	}
	if len(bs.conversations) != benchConcurrency {
		b.Fatalf("%d conversations, want %d", len(bs.conversations), benchConcurrency)
	}
	return bs
}

// watchStream follows the workspace's message.received events on the
// stream and wakes whoever waits for each.
func (bs *benchService) watchStream(ctx context.Context) {
	cons, err := bs.js.OrderedConsumer(ctx, bs.env.Stream.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bs.env.Stream.Subject(bs.ws, "message.received")},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		bs.b.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev eventsv1.Event
		if err := proto.Unmarshal(m.Data(), &ev); err != nil {
			return
		}
		id, _ := strconv.ParseInt(ev.GetMessageReceived().GetMessage().GetExternalId(), 10, 64)
		// Counted before the waiter wakes, so that a run starting right
		// after sees this event as before it.
		bs.delivered.Add(1)
		if w, ok := bs.waiters.LoadAndDelete(id); ok {
			close(w.(chan struct{}))
		}
	})
	if err != nil {
		bs.b.Fatal(err)
	}
	bs.b.Cleanup(cc.Stop)
}

// postUpdate posts one new customer message to the ingress, its update_id
// and message_id the next of updateSeq; wait, when given, is closed when its
// event is delivered from the stream. Customers rotate over 50 senders.
func (bs *benchService) postUpdate(ctx context.Context, wait chan struct{}) error {
	id := bs.updateSeq.Add(1)
	if wait != nil {
		bs.waiters.Store(id, wait)
	}
	from := 10000 + id%50
	body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":%d,`+
		`"from":{"id":%d,"is_bot":false,"first_name":"Bench","language_code":"en"},`+
		`"chat":{"id":%d,"first_name":"Bench","type":"private"},"text":"Where is my order %d?"}}`,
		id, id, time.Now().Unix(), from, from, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bs.ingress, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", bs.channel.Secret)
	resp, err := bs.http.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ingress answered %d", resp.StatusCode)
	}
	return nil
}

// ingressAndWait is one update, from the POST until its event is delivered
// from the stream.
func (bs *benchService) ingressAndWait(ctx context.Context) error {
	done := make(chan struct{})
	if err := bs.postUpdate(ctx, done); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no event on the stream after 10s")
	}
}

// ingressOnly posts one update; measure waits for all the events of a run
// at its end (wait).
func (bs *benchService) ingressOnly(ctx context.Context) error {
	return bs.postUpdate(ctx, nil)
}

// sendOp answers conversation i with POST /v1/messages over rpc.
func (bs *benchService) sendOp(ctx context.Context, i int) error {
	var out messagingapi.MessageSent
	err := bs.client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, bs.ws, http.MethodPost, "/v1/messages",
		map[string]any{"conversation_id": bs.conversations[i], "text": "It ships today.", "buttons": []map[string]string{
			{"type": "postback", "title": "Track", "payload": "TRACK"},
		}}, &out)
	if err == nil && out.Message.ExternalID == "" {
		err = fmt.Errorf("sent message without external_id")
	}
	return err
}

// baselineOp is the floor: one row like an outbox row inserted, and one
// event-sized message published with its id as Nats-Msg-Id, waiting for
// the stream's ack.
func (bs *benchService) baselineOp(ctx context.Context, seq int64) error {
	id := uuid.NewString()
	ev := &eventsv1.Event{Id: id, Type: "message.received", WorkspaceId: bs.ws, CreatedAt: timestamppb.Now(),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId: bs.ws, ConversationId: uuid.NewString(), Platform: "telegram",
			Channel: &eventsv1.Channel{Kind: "telegram", ExternalId: "700100200"},
			Contact: &eventsv1.Contact{Id: uuid.NewString(), SenderId: "10001", Name: "Bench"},
			Message: &eventsv1.Message{Id: uuid.NewString(), Text: fmt.Sprintf("Where is my order %d?", seq), Type: "text",
				ExternalId: strconv.FormatInt(seq, 10), CreatedAt: timestamppb.Now()},
		}}}
	payload, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	subject := bs.env.Stream.Subject(bs.ws, "baseline")
	if err := bs.db.WithContext(ctx).Exec(`INSERT INTO messaging.bench_baseline (id, subject, payload) VALUES (?, ?, ?)`,
		id, subject, payload).Error; err != nil {
		return err
	}
	msg := nats.NewMsg(subject)
	msg.Data = payload
	msg.Header.Set(jetstream.MsgIDHeader, id)
	_, err = bs.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(bs.env.Stream.Name))
	return err
}

// measure returns a sub-benchmark: latency of op, one at a time, over a
// fixed sample (taken once, outside the timer), and the throughput of b.N
// operations by benchConcurrency clients running load. For the ingress,
// load only posts, and the run ends when every event has reached the
// stream.
func (bs *benchService) measure(op, load func(context.Context) error) func(*testing.B) {
	var once sync.Once
	var p50, p99 float64
	return func(b *testing.B) {
		ctx := context.Background()
		once.Do(func() {
			b.StopTimer()
			lat := make([]time.Duration, 0, latencySample)
			for i := 0; i < latencySample; i++ {
				start := time.Now()
				if err := op(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			p50, p99 = percentile(lat, 0.50), percentile(lat, 0.99)
			b.StartTimer()
		})

		deliveredBefore := bs.delivered.Load()
		postedBefore := bs.updateSeq.Load()
		var next atomic.Int64
		var failed atomic.Value
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < benchConcurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := load(ctx); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		// Updates posted in this run must all be on the stream.
		posted := bs.updateSeq.Load() - postedBefore
		deadline := time.Now().Add(time.Minute)
		for bs.delivered.Load()-deliveredBefore < posted {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d events reached the stream", bs.delivered.Load()-deliveredBefore, posted)
			}
			time.Sleep(100 * time.Microsecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
	}
}

// percentile is the nearest-rank p-th percentile of d, in milliseconds.
func percentile(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i].Microseconds()) / 1000
}
