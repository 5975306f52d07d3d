package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/errs"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// BenchmarkDelivery measures end-to-end delivery, from an event published
// to the EVENTS stream until the receiver has the request, against real
// PostgreSQL and JetStream, beside a baseline taken in the same run against
// the same receiver:
//
//   - baseline-max: a bare net/http client (one shared keep-alive pool,
//     benchBaselineWorkers goroutines, the same body and headers, no
//     signing, no database, no stream) posting as fast as the receiver
//     takes it — the floor of "one HTTP POST per delivery" on this machine;
//   - baseline-paced-500: the same client posting at 500 per second;
//   - instances-1-max / instances-3-max: benchBatch events published as fast
//     as JetStream takes them, delivered by one / three dispatcher
//     instances sharing the durable consumer; a round ends when the
//     receiver has every event and the consumer has acked all of them, and
//     a delivery is acked only once its outcome is in the delivery log, so
//     the throughput is that of logged deliveries;
//   - instances-1-paced-500: events published at 500 per second to one
//     instance, for the latency target (p99 under 50 ms);
//   - noisy-instances-1 / noisy-instances-3: isolation between receivers
//     (issue 11). benchNoisyWebhooks workspaces share the events paced at
//     500 per second; rounds with every receiver healthy ("quiet") come
//     first, then as many rounds in which benchNoisyHanging of them (10 %)
//     also get benchNoisyHangRate events per second each at a receiver
//     that accepts and never answers, so every attempt to them runs into
//     the attempt timeout (10 s; a round lasts longer, so their circuits
//     open within it). Reported: the healthy deliveries' p50-ms / p99-ms
//     in the noisy rounds beside quiet-p50-ms / quiet-p99-ms, and
//     p99-ratio (noisy over quiet; the target is under 2).
//
// The instances run in this process, each through serve — the code main
// runs — with its own database pool, NATS connection, rpc server and
// consumer, configured from the environment like main with every setting
// at its default except the test's servers and private targets (the
// receiver is on loopback). In-process rather than as child processes so
// that -cpuprofile and -memprofile see the dispatcher's own code; what the
// instances share beyond what separate processes share is the Go runtime
// (one scheduler, one GC), on a machine whose two cores they share anyway.
// They log at info level, as in production, into io.Discard.
//
// One op is one delivery: ns/op, B/op and allocs/op are per delivery (the
// allocations of the whole process: publisher, dispatcher and receiver).
// Also reported: deliveries/s, and p50-ms / p99-ms of the latency from
// publish (or, for the baseline, from the start of the POST) to the
// receiver having read the request. At max throughput the latency is
// mostly time spent queued behind the rest of the batch; the paced runs
// are the latency figures.
//
// One workspace, one webhook, one receiver: every delivery's outcome
// touches the same webhook's failure counter, the hardest case for the
// outcome writes.
const (
	benchBatch           = 4000
	benchPacedRate       = 500
	benchPacedBatch      = 3000 // 6 s at 500/s
	benchBaselineWorkers = 64   // DISPATCHER_CONCURRENCY's default
	// benchRoundTimeout bounds one round, so the benchmark never hangs.
	benchRoundTimeout = 2 * time.Minute
)

func BenchmarkDelivery(b *testing.B) {
	rcv := newBenchReceiver(b)
	base := newBenchBaseline(rcv)
	b.Run("baseline-max", func(b *testing.B) { benchRounds(b, rcv, benchBatch, base.runMax) })
	b.Run("baseline-paced-500", func(b *testing.B) { benchRounds(b, rcv, benchPacedBatch, base.runPaced) })

	// The clusters are started here, on the parent benchmark, because
	// what a sub-benchmark registers for cleanup goes after each of its
	// runs.
	one := startBenchCluster(b, rcv, 1)
	b.Run("instances-1-max", func(b *testing.B) { benchRounds(b, rcv, benchBatch, one.publishMax) })
	b.Run("instances-1-paced-500", func(b *testing.B) { benchRounds(b, rcv, benchPacedBatch, one.publishPaced) })
	b.Run("noisy-instances-1", func(b *testing.B) { benchNoisy(b, rcv, one) })
	one.stop() // its consumer would sit idle beside the three

	three := startBenchCluster(b, rcv, 3)
	b.Run("instances-3-max", func(b *testing.B) { benchRounds(b, rcv, benchBatch, three.publishMax) })
	b.Run("noisy-instances-3", func(b *testing.B) { benchNoisy(b, rcv, three) })
	three.stop()
}

// benchRound is one batch of deliveries as the receiver sees it. Index i's
// delivery id is benchID(round, i); sent[i] and got[i] are unix
// nanoseconds of its publish (or POST) and of the receiver's first receipt.
type benchRound struct {
	round    uint32
	n        int
	sent     []atomic.Int64
	got      []atomic.Int64
	distinct atomic.Int64
	dups     atomic.Int64
	all      chan struct{} // closed when distinct reaches n
}

var benchRoundSeq atomic.Uint32

func newBenchRound(n int) *benchRound {
	return &benchRound{
		round: benchRoundSeq.Add(1),
		n:     n,
		sent:  make([]atomic.Int64, n),
		got:   make([]atomic.Int64, n),
		all:   make(chan struct{}),
	}
}

// benchID is a UUID that carries the round and the index, so the receiver
// finds a delivery's slot without a shared map.
func benchID(round uint32, i int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", round, i)
}

func (r *benchRound) markSent(i int) { r.sent[i].Store(time.Now().UnixNano()) }

// received records the first receipt of delivery id.
func (r *benchRound) received(id string, at int64) {
	if len(id) != 36 {
		return
	}
	round, err1 := strconv.ParseUint(id[:8], 16, 32)
	i, err2 := strconv.ParseUint(id[24:], 16, 64)
	if err1 != nil || err2 != nil || uint32(round) != r.round || i >= uint64(r.n) {
		return
	}
	if !r.got[i].CompareAndSwap(0, at) {
		r.dups.Add(1) // at least once: a redelivery carries the same id
		return
	}
	if r.distinct.Add(1) == int64(r.n) {
		close(r.all)
	}
}

// latencies are got - sent of every delivery, in milliseconds.
func (r *benchRound) latencies() []float64 {
	out := make([]float64, 0, r.n)
	for i := range r.n {
		s, g := r.sent[i].Load(), r.got[i].Load()
		if s != 0 && g != 0 {
			out = append(out, float64(g-s)/1e6)
		}
	}
	return out
}

// benchReceiver is a developer's webhook endpoint: the test kit's
// receiver keeping no record (its cost stays out of the figures), noting
// the first arrival of each delivery id of the current round.
type benchReceiver struct {
	*receiver.Receiver
	current atomic.Pointer[benchRound]
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	r := &benchReceiver{}
	r.Receiver = receiver.New(b, receiver.Status(http.StatusOK), receiver.Discard(), receiver.OnRequest(func(req receiver.Request) {
		if cur := r.current.Load(); cur != nil {
			cur.received(req.Delivery(), req.At.UnixNano())
		}
	}))
	return r
}

// benchRounds runs b.N rounds of n deliveries each, started by start
// (which returns once every event of the round is published or posted) and
// completed by its wait, and reports the figures per delivery.
func benchRounds(b *testing.B, rcv *benchReceiver, n int, start func(*testing.B, *benchRound) (wait func())) {
	var lat []float64
	var total time.Duration
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	cpu0 := benchCPU()
	b.ResetTimer()
	for range b.N {
		r := newBenchRound(n)
		rcv.current.Store(r)
		t0 := time.Now()
		wait := start(b, r)
		select {
		case <-r.all:
		case <-time.After(benchRoundTimeout):
			b.Fatalf("round %d: the receiver got %d of %d deliveries within %s", r.round, r.distinct.Load(), n, benchRoundTimeout)
		}
		if wait != nil {
			wait()
		}
		total += time.Since(t0)
		lat = append(lat, r.latencies()...)
		if d := r.dups.Load(); d > 0 {
			b.Logf("round %d: %d duplicate arrivals (at-least-once)", r.round, d)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	rcv.current.Store(nil)
	deliveries := float64(b.N * n)
	b.ReportMetric(deliveries/total.Seconds(), "deliveries/s")
	b.ReportMetric(float64(total.Nanoseconds())/deliveries, "ns/op")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/deliveries, "B/op")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/deliveries, "allocs/op")
	b.ReportMetric(float64((benchCPU()-cpu0).Microseconds())/deliveries, "cpu-us/op")
	b.ReportMetric(benchPercentile(lat, 0.50), "p50-ms")
	b.ReportMetric(benchPercentile(lat, 0.99), "p99-ms")
}

// benchCPU is the CPU time this process has used (user and system).
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPercentile is the nearest-rank p-th percentile of v.
func benchPercentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// pace calls fn(i) for i in [0, n) at rate per second, from the start.
func pace(n, rate int, fn func(i int)) {
	interval := time.Second / time.Duration(rate)
	t0 := time.Now()
	for i := range n {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		fn(i)
	}
}

// benchBaseline posts to the receiver with a bare client.
type benchBaseline struct {
	rcv    *benchReceiver
	client *http.Client
	body   []byte
}

func newBenchBaseline(rcv *benchReceiver) *benchBaseline {
	// The very body the dispatcher sends for such an event.
	body, err := envelope.Render(benchEvent(uuid.NewString(), uuid.NewString()))
	if err != nil {
		panic(err)
	}
	return &benchBaseline{
		rcv: rcv,
		client: &http.Client{
			Transport: &http.Transport{MaxIdleConns: benchBaselineWorkers, MaxIdleConnsPerHost: benchBaselineWorkers},
			Timeout:   10 * time.Second,
		},
		body: body,
	}
}

func (bb *benchBaseline) post(b *testing.B, r *benchRound, i int) {
	req, err := http.NewRequest(http.MethodPost, bb.rcv.URL, bytes.NewReader(bb.body))
	if err != nil {
		b.Error(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Event", "message.received")
	req.Header.Set("X-Service-Delivery", benchID(r.round, i))
	r.markSent(i)
	resp, err := bb.client.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func (bb *benchBaseline) runMax(b *testing.B, r *benchRound) func() {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchBaselineWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < r.n; i = int(next.Add(1)) - 1 {
				bb.post(b, r, i)
			}
		})
	}
	wg.Wait()
	return nil
}

func (bb *benchBaseline) runPaced(b *testing.B, r *benchRound) func() {
	slots := make(chan struct{}, benchBaselineWorkers)
	var wg sync.WaitGroup
	pace(r.n, benchPacedRate, func(i int) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			bb.post(b, r, i)
		})
	})
	wg.Wait()
	return nil
}

// benchCluster is dispatcher instances sharing one test environment and
// consumer, and one workspace whose webhook points at the receiver.
type benchCluster struct {
	env     *testenv.Env
	ws      string
	js      jetstream.JetStream
	db      *gorm.DB
	rpc     *rpc.Client
	consume string
	stops   []func()
	once    sync.Once
	// published counts the events put on the stream so far; the consumer
	// has settled a round when its ack floor reaches lastSeq.
	lastSeq uint64
}

func startBenchCluster(b *testing.B, rcv *benchReceiver, instances int) *benchCluster {
	b.Helper()
	env := testenv.New(b, testenv.Migrated(adapters.Schema, migrations.FS))
	c := &benchCluster{env: env, ws: uuid.NewString()}
	b.Cleanup(c.stop)
	for i := range instances {
		cfg := benchConfig(b, env)
		c.consume = cfg.Consumer
		bg := testenv.Serve(b, fmt.Sprintf("instance %d", i), func(ctx context.Context) error { return serve(ctx, cfg, benchLogger(i), seams{}) })
		c.stops = append(c.stops, bg.Stop)
		benchWaitReady(b, env, cfg, bg)
	}
	nc := env.NATS(b)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	c.js = js
	c.db = env.DB(b, "dispatch", migrations.FS)
	c.rpc = rpc.NewClient(nc, env.RPCPrefix)
	c.saveWebhook(b, c.ws, rcv.URL)
	return c
}

// saveWebhook saves url as ws's webhook the way the gateway forwards PUT
// /v1/webhook.
func (c *benchCluster) saveWebhook(b *testing.B, ws, url string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var saved struct {
		Secret string `json:"secret"`
	}
	if err := c.rpc.CallJSON(ctx, rpc.ServiceDispatcher, rpc.EndpointAPI, ws, http.MethodPut, "/v1/webhook",
		map[string]string{"url": url}, &saved); err != nil || saved.Secret == "" {
		b.Fatalf("save webhook: %v", err)
	}
}

// benchConfig is the configuration main would load in env: every setting
// at its default but the connections, a free address, and private targets
// (the receiver listens on loopback over plain http).
func benchConfig(b *testing.B, env *testenv.Env) svcconfig.Config {
	b.Helper()
	env.Setenv(b)
	b.Setenv("DISPATCHER_ADDR", ports.FreeAddr(b))
	b.Setenv("WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
	cfg, err := config.Load[svcconfig.Config]()
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// benchLogger logs like production (JSON, info level: a line per attempt)
// into io.Discard.
func benchLogger(instance int) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	return zap.New(core).With(zap.String("service", rpc.ServiceDispatcher), zap.Int("instance", instance))
}

// benchWaitReady waits until the instance is ready, its consumer exists
// and its rpc server answers.
func benchWaitReady(b *testing.B, env *testenv.Env, cfg svcconfig.Config, bg *testenv.Background) {
	b.Helper()
	// Its own readiness first: another instance answers the rpc, and
	// made the consumer, while this one may still be migrating.
	bg.WaitReady("http://"+cfg.Addr, 30*time.Second)
	js := env.JetStream(b)
	client := rpc.NewClient(env.NATS(b), env.RPCPrefix)
	deadline := time.Now().Add(30 * time.Second)
	for {
		bg.Early()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Consumer(ctx, env.Stream.Name, cfg.Consumer)
		if err == nil {
			// Any answer from the dispatcher (here: no webhook) means
			// its rpc server is up.
			err = client.CallJSON(ctx, rpc.ServiceDispatcher, rpc.EndpointAPI, uuid.NewString(), http.MethodGet, "/v1/webhook", nil, nil)
			var e *errs.Error
			if errors.As(err, &e) && e.Code == "webhook_not_found" {
				err = nil
			}
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("dispatcher not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *benchCluster) stop() {
	c.once.Do(func() {
		for _, s := range c.stops {
			s()
		}
	})
}

// publishMax publishes the round as fast as JetStream acks it (async, up
// to 4096 unacknowledged) and returns the wait for the consumer to ack it
// all.
func (c *benchCluster) publishMax(b *testing.B, r *benchRound) func() {
	futures := make([]jetstream.PubAckFuture, r.n)
	for i := range r.n {
		futures[i] = c.publishAsync(b, r, i, c.ws)
	}
	c.settlePublished(b, futures)
	return func() { c.waitAcked(b) }
}

// publishPaced publishes the round at benchPacedRate per second.
func (c *benchCluster) publishPaced(b *testing.B, r *benchRound) func() {
	futures := make([]jetstream.PubAckFuture, r.n)
	pace(r.n, benchPacedRate, func(i int) { futures[i] = c.publishAsync(b, r, i, c.ws) })
	c.settlePublished(b, futures)
	return func() { c.waitAcked(b) }
}

// publishAsync publishes delivery i of the round, an event of ws.
func (c *benchCluster) publishAsync(b *testing.B, r *benchRound, i int, ws string) jetstream.PubAckFuture {
	id := benchID(r.round, i)
	ev := benchEvent(id, ws)
	data, err := proto.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	msg := nats.NewMsg(c.env.Stream.Subject(ws, ev.GetType()))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, id)
	r.markSent(i)
	// A full window of unacknowledged publishes waits for a free place
	// rather than failing after the default 200 ms.
	f, err := c.js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
	if err != nil {
		b.Fatalf("publish: %v", err)
	}
	return f
}

func (c *benchCluster) settlePublished(b *testing.B, futures []jetstream.PubAckFuture) {
	timeout := time.After(benchRoundTimeout)
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			c.lastSeq = max(c.lastSeq, ack.Sequence)
		case err := <-f.Err():
			b.Fatalf("publish: %v", err)
		case <-timeout:
			b.Fatalf("publish: no ack within %s", benchRoundTimeout)
		}
	}
}

// waitAcked waits until the consumer has acked everything published, which
// it does only once each outcome is stored.
func (c *benchCluster) waitAcked(b *testing.B) {
	cons, err := c.js.Consumer(context.Background(), c.env.Stream.Name, c.consume)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(benchRoundTimeout)
	for {
		info, err := cons.Info(context.Background())
		if err == nil && info.AckFloor.Stream >= c.lastSeq && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("consumer did not ack through %d within %s: %+v %v", c.lastSeq, benchRoundTimeout, info, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// benchEvent is a message.received event as messaging publishes it.
func benchEvent(id, ws string) *eventsv1.Event {
	now := time.Now()
	return &eventsv1.Event{
		Id:          id,
		Type:        "message.received",
		WorkspaceId: ws,
		CreatedAt:   timestamppb.New(now),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    ws,
			ConversationId: "3f1e9a52-5c4e-4bde-9a8e-2f0c6f1d7b11",
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact:        &eventsv1.Contact{Id: "8d7b1c2e-0f4a-4e59-b1a3-6c5d4e3f2a10", SenderId: "551234567", Name: "Bat-Erdene"},
			Message: &eventsv1.Message{Id: uuid.NewString(), Text: "Hi! Do you ship to Darkhan?", Type: "text", ExternalId: "1042",
				CreatedAt: timestamppb.New(now)},
		}},
	}
}

// The noisy sub-benchmarks' load.
const (
	benchNoisyWebhooks = 20
	benchNoisyHanging  = 2 // 10 % of the webhooks
	benchNoisyHangRate = 10
	// benchNoisyBatch healthy deliveries at benchPacedRate take 12 s: past
	// the 10 s attempt timeout, so the hanging webhooks' first attempts
	// time out and their circuits open within a noisy round.
	benchNoisyBatch = 6000
)

// benchNoisy runs b.N quiet rounds, then b.N noisy ones, on c; see
// BenchmarkDelivery.
func benchNoisy(b *testing.B, rcv *benchReceiver, c *benchCluster) {
	healthy := make([]string, benchNoisyWebhooks-benchNoisyHanging)
	for i := range healthy {
		healthy[i] = uuid.NewString()
		c.saveWebhook(b, healthy[i], rcv.URL)
	}
	// Its cleanup, at the end of this run, drops the requests it holds,
	// so the instances can stop without waiting out their timeouts.
	stuck := newStuckReceiver(b)
	hanging := make([]string, benchNoisyHanging)
	for i := range hanging {
		hanging[i] = uuid.NewString()
		c.saveWebhook(b, hanging[i], stuck.URL)
	}
	b.ResetTimer()
	var quiet, noisy []float64
	for range b.N {
		quiet = append(quiet, c.noisyRound(b, rcv, healthy, nil)...)
	}
	for range b.N {
		noisy = append(noisy, c.noisyRound(b, rcv, healthy, hanging)...)
	}
	b.StopTimer()
	rcv.current.Store(nil)
	qp99, np99 := benchPercentile(quiet, 0.99), benchPercentile(noisy, 0.99)
	b.ReportMetric(0, "ns/op") // rounds are paced: time per delivery says nothing
	b.ReportMetric(benchPercentile(quiet, 0.50), "quiet-p50-ms")
	b.ReportMetric(qp99, "quiet-p99-ms")
	b.ReportMetric(benchPercentile(noisy, 0.50), "p50-ms")
	b.ReportMetric(np99, "p99-ms")
	b.ReportMetric(np99/qp99, "p99-ratio")
	b.ReportMetric(float64(stuck.total.Load()), "hanging-requests")
}

// noisyRound publishes benchNoisyBatch events to the healthy webhooks in
// turn at benchPacedRate, and meanwhile benchNoisyHangRate events per
// second to each hanging one, until the receiver has every healthy
// delivery; it returns their latencies. The hanging webhooks' events are
// left to the dispatcher: they are not waited for.
func (c *benchCluster) noisyRound(b *testing.B, rcv *benchReceiver, healthy, hanging []string) []float64 {
	r := newBenchRound(benchNoisyBatch)
	rcv.current.Store(r)
	done := make(chan struct{})
	var wg sync.WaitGroup
	if len(hanging) > 0 {
		wg.Go(func() { c.publishHanging(b, hanging, done) })
	}
	futures := make([]jetstream.PubAckFuture, r.n)
	pace(r.n, benchPacedRate, func(i int) { futures[i] = c.publishAsync(b, r, i, healthy[i%len(healthy)]) })
	c.settlePublished(b, futures)
	select {
	case <-r.all:
	case <-time.After(benchRoundTimeout):
		b.Fatalf("round %d: the receiver got %d of %d healthy deliveries within %s", r.round, r.distinct.Load(), r.n, benchRoundTimeout)
	}
	close(done)
	wg.Wait()
	return r.latencies()
}

// publishHanging publishes to the hanging webhooks in turn, each at
// benchNoisyHangRate per second, until done.
func (c *benchCluster) publishHanging(b *testing.B, hanging []string, done <-chan struct{}) {
	tick := time.NewTicker(time.Second / time.Duration(benchNoisyHangRate*len(hanging)))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		ws := hanging[i%len(hanging)]
		ev := benchEvent(uuid.NewString(), ws)
		data, err := proto.Marshal(ev)
		if err != nil {
			b.Error(err)
			return
		}
		if _, err := c.js.Publish(context.Background(), c.env.Stream.Subject(ws, ev.GetType()), data, jetstream.WithMsgID(ev.GetId())); err != nil {
			b.Errorf("publish: %v", err)
			return
		}
	}
}
