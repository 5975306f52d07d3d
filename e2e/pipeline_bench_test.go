package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// BenchmarkPipeline is issue 11's bench (make bench-e2e): the product's
// whole path, a customer's Telegram message to the developer's signed
// webhook, through the built binaries on the real servers, beside bare
// baselines measured in the same run on the same machine.
//
// One suite (gateway, messaging, webhook-dispatcher, flow-runner) serves
// -pipeline.workspaces workspaces, each with a Telegram channel in external
// mode and a webhook with its own secret at a receiver in this process
// (one loopback server, a path per workspace). The receiver checks every
// request as docs/webhooks.md "Verifying a delivery" tells developers to
// (checkHook: the HMAC over
// "<timestamp>.<raw body>" with that workspace's secret, the timestamp's
// window, the envelope's id equal to X-Service-Delivery) and answers 204.
// The load generator posts real Telegram Updates to messaging's ingress
// (POST /ingress/telegram/{channel}, the channel's secret token), from
// -pipeline.customers customers (distinct from.id and chat.id; customer k
// writes to workspace k mod workspaces), each message numbered: its
// update_id and message_id, which comes back in the webhook as
// data.message.external_id. A message's latency runs from its ingress
// POST's 2xx (accepted) to the receiver having read its signed POST.
//
// Nothing lost, nothing twice: every message of a run must reach the
// receiver exactly once, under one delivery id (X-Service-Delivery) that
// no other request carried, and the dispatcher's delivery log must then
// hold every one of those ids as delivered (it stores the outcome before
// it acks); anything else fails the benchmark. A bad signature fails it
// too. Only the kill lines (pipeline_kill_test.go) let a delivery id come
// again, and count it: the at-least-once delivery the product promises.
//
// The sub-benchmarks, in this order:
//
//   - bare-http: a bare net/http client posting one real delivery's
//     signed body and headers to the same receiver, which checks it as
//     any delivery: req/s from -pipeline.senders goroutines for
//     -pipeline.baseline-time, and p50-ms / p99-ms of pipelineSample posts
//     one at a time. The floor of "one HTTP POST per message";
//   - bare-pg-js: one INSERT of an outbox-sized row plus one JetStream
//     publish waiting for its ack (to a stream with the EVENTS stream's
//     settings): ops/s and p50/p99 the same way. The floor of "one
//     committed write and one stored event per message";
//   - pipeline-max/instances=1: -pipeline.messages messages from
//     -pipeline.senders closed-loop senders: messages/s (first POST to the
//     last delivery received), ingress/s (to the last 2xx), p50-ms /
//     p99-ms (mostly queueing, at saturation), and messages/s as a ratio
//     of each bare figure;
//   - pipeline-paced-half-max: -pipeline.paced messages sent open loop on
//     a schedule of half of pipeline-max/instances=1's messages/s
//     (pacedRate; -pipeline.rate forces a rate, and the line is then
//     pipeline-paced-<rate>), each POST in its own goroutine at its time,
//     whether or not earlier ones were answered: rate-msg/s (the
//     schedule's), achieved-msg/s, p50-ms / p99-ms and their ratios to
//     the bare floor (the bare-http plus the bare-pg-js figure),
//     ingress-p50-ms / ingress-p99-ms (POST to 2xx), and the resident
//     memory (VmRSS) of each service process when idle (after the
//     warm-up, before any load) and its peak under this load
//     (rss-mb-<service>-idle, -load);
//   - pipeline-max/instances=N: pipeline-max with N-1 more messaging and
//     dispatcher processes (startExtra; -pipeline.instances), the senders
//     spreading their POSTs over the messaging instances as a load
//     balancer would; the extra processes are interrupted afterwards;
//   - pipeline-kill/messaging and pipeline-kill/dispatcher: the paced run
//     of -pipeline.kill-messages messages, during which messaging (with
//     updates committed and not yet handed to the stream), then the
//     dispatcher (with deliveries posted and their outcomes not yet
//     written), is killed with SIGKILL and started again (killRun);
//   - cluster3/pipeline-max and cluster3/pipeline-kill/stream-leader:
//     pipeline-max and a kill line again, on a NATS cluster of three
//     servers of their own with three replicas of every stream, and the
//     ratios to the one-server figures (pipeline_cluster_test.go;
//     -pipeline.cluster);
//   - pipeline-quiet-before-noisy: the paced run again, every webhook
//     healthy, counting only the workspaces whose webhooks will hang in
//     the next line (noisyHealthy): the quiet reference of pipeline-noisy,
//     taken right before it on the same suite, history and hour, so that
//     the ratio below measures the hanging webhooks and not the minutes
//     and the kills between the first paced run and the last;
//   - pipeline-noisy: the paced run again, one instance each, with
//     -pipeline.hanging of the workspaces' webhooks saved to an endpoint
//     (a server of its own, as another host would be) that accepts the
//     request and never answers until the benchmark ends. Latency and
//     loss count only the healthy workspaces' messages; beside their
//     p50/p99 it reports pipeline-quiet-before-noisy's (quiet-p50-ms,
//     quiet-p99-ms) and the ratios to them, and the ratios to the first
//     paced run's (p50-ratio-to-first-quiet, p99-ratio-to-first-quiet).
//     The hanging webhooks get paused after WEBHOOK_PAUSE_AFTER failed
//     deliveries, as they should; it is last because what hangs stays in
//     flight until the end.
//
// Each run also says where the time goes. CPU time per message:
// gateway-cpu-ms, messaging-cpu-ms and dispatcher-cpu-ms (the processes
// of each service, process_cpu_seconds_total from their /metrics), bench-cpu-ms (this
// process: the load generator and the receiver), postgres-cpu-ms and
// nats-cpu-ms (every process of those servers on this machine, from
// /proc, whoever else uses them meanwhile), and total-cpu-ms, their sum.
// What PostgreSQL did per message (reportPG): wal-bytes/msg, xact/msg,
// statements/msg when pg_stat_statements is loaded, rows-ins/msg,
// rows-upd/msg, rows-del/msg and hot-upd-%, and a printed line of the
// same per table written ("pg <line> <table> ..."). And where messages
// wait, as the peak of samples taken every 250 ms: outbox-peak,
// committed by messaging and not yet handed to the stream
// (outboxBacklog), and stream-peak, published and not yet settled by a
// dispatcher (the durable consumer's pending and unacknowledged
// messages).
// -pipeline.trace prints those every second with the messages accepted
// and delivered so far; -pipeline.windows breaks each run down by half
// second (pipeline_halfseconds_test.go).
//
// Every run sends its own fixed number of messages whatever b.N is, so
// run it with -benchtime 1x; ns/op is per message for the throughput runs
// and left out for the paced ones. The services keep every setting at its
// default except WEBHOOK_ALLOW_PRIVATE_TARGETS=true (the receiver is on
// loopback) and TELEGRAM_API_BASE (a local fake Bot API; receiving calls
// it not at all). No limit is raised: Telegram ingress has no rate or
// abuse limit (docs/limits-and-errors.md "Webchat widget and ingress":
// the abuse limits are the gateway's and the webchat widget's), and the
// gateway, which is not on this path, serves
// only the setup.
//
//	cd e2e && go test -run '^$' -bench '^BenchmarkPipeline$' -benchtime 1x -timeout 30m .
//	cd e2e && go test -run '^$' -bench '^BenchmarkPipeline$' -benchtime 1x . -pipeline.messages 2000 -pipeline.paced 2000 -pipeline.kill-messages 2000
var (
	pipelineMessages     = flag.Int("pipeline.messages", 20000, "messages of each pipeline-max run")
	pipelinePaced        = flag.Int("pipeline.paced", 20000, "messages of each paced run (pipeline-paced-half-max or -<rate>, pipeline-noisy)")
	pipelineRate         = flag.Int("pipeline.rate", 0, "messages per second of the paced runs (pipeline-paced, the kill lines, pipeline-noisy); 0: half of pipeline-max/instances=1's messages/s in the same run")
	pipelineWorkspaces   = flag.Int("pipeline.workspaces", 20, "workspaces, each with a Telegram channel and a webhook with its own secret")
	pipelineCustomers    = flag.Int("pipeline.customers", 2000, "distinct Telegram customers (from.id = chat.id), spread over the workspaces")
	pipelineSenders      = flag.Int("pipeline.senders", 64, "concurrent senders of pipeline-max and of the bare baselines")
	pipelineInstances    = flag.Int("pipeline.instances", 3, "messaging and webhook-dispatcher processes of the second pipeline-max run")
	pipelineHanging      = flag.Float64("pipeline.hanging", 0.10, "share of the workspaces whose webhook hangs in pipeline-noisy")
	pipelineBaselineTime = flag.Duration("pipeline.baseline-time", 5*time.Second, "how long each bare baseline's throughput is measured")
	pipelineSettle       = flag.Duration("pipeline.settle", 5*time.Minute, "how long a run waits, after its last message is accepted, for every delivery")
	pipelineTrace        = flag.Bool("pipeline.trace", false, "print, every second of each run, the messages accepted, queued in the outbox and in the stream, and delivered")
	pipelineCluster      = flag.Int("pipeline.cluster", 3, "nats-servers of the cluster the cluster lines run on, with as many replicas of every stream; 0 leaves those lines out")
	servicesGOMAXPROCS   = flag.Int("services.gomaxprocs", 1, "GOMAXPROCS of every service the benchmarks start, as the Kubernetes manifests' limit of one core sets it; 0 leaves Go's default (every core of the machine)")
)

// benchServices is a benchmark's service environment: extra, and the
// services' GOMAXPROCS (-services.gomaxprocs). In the manifests each
// service is limited to one core, which Go reads as GOMAXPROCS 1; on one
// machine running every service, Go's default lets each of them run on
// every core, and their idle threads spin and wake each other for
// nothing (docs/benchmarks.md "One core per service").
func benchServices(extra ...string) []string {
	if *servicesGOMAXPROCS > 0 {
		extra = append(extra, fmt.Sprintf("GOMAXPROCS=%d", *servicesGOMAXPROCS))
	}
	return extra
}

// servicesSetting describes -services.gomaxprocs for a benchmark's header.
func servicesSetting() string {
	if *servicesGOMAXPROCS > 0 {
		return fmt.Sprintf("GOMAXPROCS=%d", *servicesGOMAXPROCS)
	}
	return "GOMAXPROCS at Go's default"
}

// pipelineSample is how many operations the bare baselines time one at a
// time for their p50 and p99.
const pipelineSample = 500

// pipelineHooks is the path of a workspace's webhook at the receiver,
// followed by the workspace's index.
const pipelineHooks = "/hooks/ws"

func BenchmarkPipeline(b *testing.B) {
	// Everything is started here, on the parent benchmark, because what a
	// sub-benchmark registers for cleanup goes after each of its runs.
	pb := newPipelineBench(b)

	b.Run("bare-http", pb.bareHTTP)
	b.Run("bare-pg-js", pb.barePGJS)
	// The reads first on a workspace's usual history (seedHistory), then
	// again after the pipeline's bursts below.
	pb.seedHistory(b)
	b.Run(fmt.Sprintf("gateway-reads-%d/bare-forwarded", *readsRate), pb.gatewayReads("/v1/channels"))
	b.Run(fmt.Sprintf("gateway-reads-%d/conversations", *readsRate), pb.gatewayReads("/v1/conversations?limit=50"))
	b.Run("pipeline-max/instances=1", func(b *testing.B) { pb.maxRate, pb.maxCPU = pb.maxOf(b, *pipelineMessages) })
	b.Run(pb.pacedName(), pb.paced)
	extras := pb.scaleOut(b, *pipelineInstances)
	b.Run(fmt.Sprintf("pipeline-max/instances=%d", *pipelineInstances), pb.max)
	pb.scaleIn(b, extras)
	// Before the noisy run, whose hanging requests stay open until the end.
	b.Run(fmt.Sprintf("gateway-reads-%d/conversations-after-bursts", *readsRate), pb.gatewayReads("/v1/conversations?limit=50"))
	b.Run("pipeline-kill/messaging", pb.killMessaging(b))
	b.Run("pipeline-kill/dispatcher", pb.killDispatcher(b))
	if *pipelineCluster > 0 {
		b.Run(fmt.Sprintf("cluster%d", *pipelineCluster), pb.onCluster)
	}
	b.Run("pipeline-quiet-before-noisy", pb.quietBeforeNoisy)
	b.Run("pipeline-noisy", pb.noisy)

	fmt.Printf("loadavg-end: %s\n", loadAverage())
	// A delivery that came twice after its run was checked fails here.
	if err := pb.rcv.err(); err != nil {
		b.Fatal(err)
	}
}

// pipelineBench is the running suite, its workspaces and the receiver.
type pipelineBench struct {
	s       *suite
	rcv     *pipelineReceiver
	hang    *hangingEndpoint
	spaces  []pipelineWorkspace
	ingress []string // messaging base URLs the senders spread over
	http    *http.Client
	pool    *pgxpool.Pool
	queries queryCounter // the statements sent through pool
	js      jetstream.JetStream
	// statements says whether pg_stat_statements answers (hasStatements).
	statements bool
	// pgLast are the last PostgreSQL counters read, at pgLastAt, when
	// seq was pgLastSeq.
	pgLast    pgStats
	pgLastAt  time.Time
	pgLastSeq int64
	seq       atomic.Int64 // the last message number used
	// customers is -pipeline.customers, at least one per workspace.
	customers int64

	// Figures of earlier sub-benchmarks that later ones are a ratio of;
	// zero when not run (filtered out).
	floorHTTP, floorPGJS pipelineBare
	maxRate              float64        // pipeline-max/instances=1's messages/s
	maxCPU               float64        // and its total-cpu-ms
	quiet                pipelineResult // the first paced run's
	quietNear            pipelineResult // pipeline-quiet-before-noisy's
	rssIdle              map[string]float64
	// dispatchers, messagings and runners (flow-runners) are the
	// processes of each service now running whose CPU time the runs
	// report; runners only when the path goes through them.
	dispatchers, messagings, runners []*proc
	// procsMu guards the suite's processes (s.procs), which a kill line
	// replaces while the runs' sampling reads them (rss).
	procsMu sync.Mutex
	// gone is the CPU time of processes killed so far (the kill lines),
	// which their restarted successors' counters do not hold.
	gone cpuTimes
	// atLeastOnce lets a delivery of any run come again (pipelineRun's),
	// for a test that breaks NATS under all of them.
	atLeastOnce bool
	// natsCPU is the CPU seconds the NATS servers the suite uses have
	// used so far: every nats-server on this machine (serverCPU), or a
	// cluster's own (the cluster lines).
	natsCPU func() float64

	// queue is the stream and durable consumer whose backlog the runs
	// sample (stream-peak): the dispatchers' by default.
	queue pipelineQueue
	// confirm checks, once every counted message of a run has arrived,
	// what the path must have done besides: for webhooks, the delivery
	// log holding each delivery as delivered (pb.logDelivered).
	confirm func(*pipelineRun) error
}

// pipelineQueue is a JetStream stream and its durable consumer.
type pipelineQueue struct{ stream, consumer string }

// pipelineWorkspace is one workspace of the bench.
type pipelineWorkspace struct {
	id, key string
	channel string // its Telegram channel's id
	token   string // the channel's secret token (X-Telegram-Bot-Api-Secret-Token)
	hanging bool   // its webhook hangs (pipeline-noisy)
}

func newPipelineBench(b *testing.B) *pipelineBench {
	b.Helper()
	nws := *pipelineWorkspaces
	if nws < 1 || *pipelineCustomers < nws || *pipelineSenders < 1 || *pipelineRate < 0 || *pipelineInstances < 1 || *readsRate < 1 || *pipelineCluster < 0 {
		b.Fatalf("-pipeline.workspaces %d, -pipeline.customers %d, -pipeline.senders %d, -pipeline.rate %d, -pipeline.instances %d, -pipeline.reads-rate %d, -pipeline.cluster %d: want workspaces >= 1, customers >= workspaces, rate and cluster >= 0, the others >= 1",
			nws, *pipelineCustomers, *pipelineSenders, *pipelineRate, *pipelineInstances, *readsRate, *pipelineCluster)
	}
	fmt.Printf("loadavg-start: %s\n", loadAverage())
	paced := "half of pipeline-max's rate"
	if *pipelineRate > 0 {
		paced = fmt.Sprintf("%d/s", *pipelineRate)
	}
	fmt.Printf("pipeline-setup: %d workspaces, %d customers, %d senders, pipeline-max %d messages, paced %d messages at %s, kill lines %d messages each, %d instances, %.0f %% of webhooks hanging in pipeline-noisy, reads at %d/s, cluster lines on %d nats-servers\n",
		nws, *pipelineCustomers, *pipelineSenders, *pipelineMessages, *pipelinePaced, paced, *pipelineKillMessages, *pipelineInstances, 100**pipelineHanging, *readsRate, *pipelineCluster)
	fmt.Printf("pipeline-env: WEBHOOK_ALLOW_PRIVATE_TARGETS=true, TELEGRAM_API_BASE=<a local fake Bot API>, %s; every other setting at its default (Telegram ingress has no rate or abuse limit to raise)\n", servicesSetting())

	_, botAPI := telegramfake.Start(b)
	s := startSuite(b, benchServices("TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")...)
	pb := newWebhookBench(b, s, nws, *pipelineCustomers)

	// A few messages per workspace, outside any timing: connections open,
	// every channel and webhook used once, and a real delivery for
	// bare-http. (Most customers' first message, which creates their
	// contact and conversation, falls in the first measured run.)
	pb.warm(b)
	pb.rssIdle = pb.rss()
	return pb
}

// newWebhookBench is the ingress-to-webhook path on suite s, which must
// allow private webhook targets: workspaces workspaces made by
// addWorkspace, their messages from customers customers, not yet warmed.
func newWebhookBench(b testing.TB, s *suite, workspaces, customers int) *pipelineBench {
	b.Helper()
	pb := newBenchOn(b, s, workspaces, customers)
	pb.dispatchers = []*proc{s.procs["webhook-dispatcher"]}
	pb.queue = pipelineQueue{stream: s.env.Stream.Name, consumer: dispatcherConsumer}
	pb.confirm = pb.logDelivered
	for i := range workspaces {
		pb.spaces = append(pb.spaces, pb.addWorkspace(b, i))
	}
	return pb
}

// newBenchOn is a bench of messages posted to the Telegram ingress of
// suite s, for workspaces workspaces (none made yet) and their customers
// customers; what receives the messages is the caller's to set up.
func newBenchOn(b testing.TB, s *suite, workspaces, customers int) *pipelineBench {
	b.Helper()
	pb := &pipelineBench{
		s:         s,
		ingress:   []string{s.messagingURL},
		customers: int64(customers),
		http: &http.Client{
			// Open-loop sends may pile up when the ingress slows; this
			// bounds the connections, not the goroutines waiting for one.
			Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512},
			Timeout:   time.Minute,
		},
		messagings: []*proc{s.procs["messaging"]},
		confirm:    func(*pipelineRun) error { return nil },
		natsCPU:    func() float64 { return serverCPU("nats-server") },
	}
	pb.rcv = newPipelineReceiver(b, workspaces)
	pb.hang = newHangingEndpoint(b)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(s.env.DatabaseURL)
	if err != nil {
		b.Fatalf("postgres: %v", err)
	}
	cfg.ConnConfig.Tracer = &pb.queries
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatalf("postgres: %v", err)
	}
	b.Cleanup(pool.Close)
	pb.pool = pool
	pb.statements = pb.hasStatements()
	pb.js = s.env.JetStream(b)
	return pb
}

// addWorkspace creates workspace i as an operator and its developer would:
// a workspace with the developer API and a key, a Telegram channel in
// external mode (parleyctl), and a webhook at the receiver (PUT
// /v1/webhook), whose secret the receiver checks its requests with.
func (pb *pipelineBench) addWorkspace(b testing.TB, i int) pipelineWorkspace {
	b.Helper()
	s := pb.s
	w := pipelineWorkspace{}
	w.id, w.key = s.workspaceWithKey(b, fmt.Sprintf("Pipeline %d", i), "developer_api")
	var ch struct {
		Channel ctlChannel `json:"channel"`
	}
	s.ctl(b, &ch, "channel", "create", "--workspace", w.id, "--kind", "telegram", "--token", fmt.Sprintf("7001%05d:AAH-pipeline-bench", i))
	s.ctl(b, nil, "channel", "set-mode", "--channel", ch.Channel.ID, "--mode", "external")
	w.channel, w.token = ch.Channel.ID, ch.Channel.Secret
	secret := pb.putWebhook(b, w.key, fmt.Sprintf("%s%s%d", pb.rcv.url, pipelineHooks, i))
	if w.channel == "" || w.token == "" || secret == "" {
		b.Fatalf("workspace %d: channel %+v, webhook secret %q", i, ch.Channel, secret)
	}
	pb.rcv.workspaces[i], pb.rcv.secrets[i] = w.id, secret
	return w
}

// putWebhook saves url as the webhook of key's workspace and returns its
// signing secret.
func (pb *pipelineBench) putWebhook(b testing.TB, key, url string) string {
	b.Helper()
	status, _, out := pb.s.api(b, key, http.MethodPut, "/v1/webhook", map[string]string{"url": url})
	if secret, _ := out["secret"].(string); status == http.StatusOK && secret != "" {
		return secret
	}
	b.Fatalf("PUT /v1/webhook %s = %d %v", url, status, out)
	return ""
}

// warm sends three messages per workspace and waits for them.
func (pb *pipelineBench) warm(b testing.TB) {
	b.Helper()
	run := pb.newRun(3*len(pb.spaces), nil)
	if err := pb.sendClosed(run, *pipelineSenders); err != nil {
		b.Fatal(err)
	}
	if err := pb.settle(run); err != nil {
		b.Fatal(err)
	}
}

// workspaceOf is the workspace that message n goes to: its customer's.
func (pb *pipelineBench) workspaceOf(n int64) int {
	return int(n % pb.customers % int64(len(pb.spaces)))
}

// customerOf is the Telegram user (and private chat) id of message n's
// customer.
func (pb *pipelineBench) customerOf(n int64) int64 {
	return 5_100_000_000 + n%pb.customers
}

// update is message n as Telegram posts it: a private-chat text from
// customer n mod customers (from.id = chat.id), update_id = message_id =
// n.
func (pb *pipelineBench) update(n int64) []byte {
	from := pb.customerOf(n)
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"date":%d,`+
		`"from":{"id":%d,"is_bot":false,"first_name":"Customer %d","language_code":"en"},`+
		`"chat":{"id":%d,"first_name":"Customer %d","type":"private"},"text":"Order #%d: is it shipped? Сайн байна уу"}}`,
		n, n, time.Now().Unix(), from, from, from, from, n)
}

// post sends message n to its workspace's channel (the messaging instance
// n mod instances) and returns when it was accepted: the time its 2xx
// arrived.
func (pb *pipelineBench) post(n int64) (time.Time, error) {
	w := pb.spaces[pb.workspaceOf(n)]
	url := pb.ingress[int(n%int64(len(pb.ingress)))] + "/ingress/telegram/" + w.channel
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(pb.update(n)))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", w.token)
	resp, err := pb.http.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("message %d: %w", n, err)
	}
	at := time.Now()
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return time.Time{}, fmt.Errorf("message %d: ingress answered %d %s", n, resp.StatusCode, raw)
	}
	return at, nil
}

// pipelineRun is one run's messages, numbered first to first+n-1.
type pipelineRun struct {
	first   int64
	n       int
	start   time.Time
	counted []bool // only the healthy workspaces' messages count
	want    int    // how many count

	// sent and accepted are when each message's POST started and got its
	// 2xx, written by its sender.
	sent, accepted []time.Time
	acceptedN      atomic.Int64
	// received, ids, done and dups belong to the receiver (under its
	// mutex): when each message arrived, under which delivery id, how
	// many counted ones have, and how many deliveries came again; all is
	// closed when done reaches want.
	received []time.Time
	ids      []string
	done     int
	dups     int
	all      chan struct{}

	// The kill lines': a delivery may come twice under its id
	// (atLeastOnce), and a POST that fails is sent again, as Telegram
	// does, until it is accepted (retry; retried counts the failures).
	atLeastOnce, retry bool
	retried            atomic.Int64
	// logWait bounds how long settle waits for the delivery log to hold
	// every delivery as delivered (30 s when zero).
	logWait time.Duration
}

// newRun numbers n messages for a run; healthy, when not nil, says which
// workspaces' messages count.
func (pb *pipelineBench) newRun(n int, healthy func(ws int) bool) *pipelineRun {
	first := pb.seq.Add(int64(n)) - int64(n) + 1
	r := &pipelineRun{
		first: first, n: n, counted: make([]bool, n),
		sent: make([]time.Time, n), accepted: make([]time.Time, n),
		received: make([]time.Time, n), ids: make([]string, n),
		all: make(chan struct{}), atLeastOnce: pb.atLeastOnce,
	}
	for i := range n {
		r.counted[i] = healthy == nil || healthy(pb.workspaceOf(first+int64(i)))
		if r.counted[i] {
			r.want++
		}
	}
	if r.want == 0 {
		close(r.all)
	}
	pb.rcv.add(r)
	return r
}

// sendClosed sends the run's messages from senders goroutines, each
// posting its next message once the last is answered (the flows bench's
// closed loop), and returns the first error (no new message is sent after
// it).
func (pb *pipelineBench) sendClosed(run *pipelineRun, senders int) error {
	var next atomic.Int64
	run.start = time.Now()
	return (&benchClient{clients: senders}).run(run.n, func() error {
		return pb.send(run, int(next.Add(1))-1)
	}, nil)
}

// send posts the run's message i and notes when it was sent and accepted.
// In a run that retries, a failed POST is sent again every 50 ms for up
// to -pipeline.settle: messaging may be restarting.
func (pb *pipelineBench) send(run *pipelineRun, i int) error {
	run.sent[i] = time.Now()
	at, err := pb.post(run.first + int64(i))
	for err != nil && run.retry && time.Since(run.sent[i]) < *pipelineSettle {
		run.retried.Add(1)
		time.Sleep(50 * time.Millisecond)
		at, err = pb.post(run.first + int64(i))
	}
	if err != nil {
		return err
	}
	run.accepted[i] = at
	run.acceptedN.Add(1)
	return nil
}

// sendPaced sends the run's messages open loop, rate a second: message i
// is posted at start + i/rate in a goroutine of its own, whether or not
// the earlier ones have been answered.
func (pb *pipelineBench) sendPaced(run *pipelineRun, rate int) error {
	run.start = time.Now()
	return openLoop(run.start, run.n, rate, func(i int) error { return pb.send(run, i) })
}

// sendPacedUntil is sendPaced from run.start, which the caller sets,
// that sends nothing more once stop is closed, for a load that lasts as
// long as a test needs it: the run is then cut to the messages sent (the
// others are not counted).
func (pb *pipelineBench) sendPacedUntil(run *pipelineRun, rate int, stop <-chan struct{}) error {
	sent, err := openLoopUntil(run.start, run.n, rate, stop, func(i int) error { return pb.send(run, i) })
	pb.rcv.cut(run, sent)
	return err
}

// openLoop calls op(i) for i in [0, n) at start + i/rate, each in a
// goroutine of its own, whether or not the earlier calls have returned (so
// a slow answer delays no later request: what is measured is the load a
// rate of users makes). It starts no new call after the first error, waits
// for those under way, and returns that error.
func openLoop(start time.Time, n, rate int, op func(i int) error) error {
	_, err := openLoopUntil(start, n, rate, nil, op)
	return err
}

// openLoopUntil is openLoop that starts no new call either once stop (nil:
// never) is closed; it returns how many calls it started.
func openLoopUntil(start time.Time, n, rate int, stop <-chan struct{}, op func(i int) error) (int, error) {
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	started := 0
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-stop:
				timer.Stop()
			}
		}
		if failed.Load() != nil || closed(stop) {
			break
		}
		started++
		wg.Go(func() {
			if err := op(i); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return started, *err
	}
	return started, nil
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// settle waits until every counted message of the run has reached the
// receiver (at most -pipeline.settle), then for what pb.confirm checks,
// and checks that nothing arrived twice or failed its check.
func (pb *pipelineBench) settle(run *pipelineRun) error {
	select {
	case <-run.all:
	case <-time.After(*pipelineSettle):
		missing, example := pb.rcv.missing(run)
		return errors.Join(fmt.Errorf("%d of %d messages not delivered within %s of the last one sent (message %d, for one)", missing, run.want, *pipelineSettle, example), pb.rcv.err())
	}
	if err := pb.rcv.err(); err != nil {
		return err
	}
	if err := pb.confirm(run); err != nil {
		return err
	}
	return pb.rcv.err()
}

// logDelivered waits until the delivery log holds every delivery id of
// the run's counted messages as delivered.
func (pb *pipelineBench) logDelivered(run *pipelineRun) error {
	ids := pb.rcv.deliveryIDs(run)
	// The outcome is stored after the receiver has answered: the last
	// ones may take a moment.
	wait := cmp.Or(run.logWait, 30*time.Second)
	deadline := time.Now().Add(wait)
	for {
		delivered, other, err := pb.logged(ids)
		if err != nil {
			return err
		}
		if delivered == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("delivery log: %d of %d received deliveries recorded delivered within %s; the others: %v", delivered, len(ids), wait, other)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logged counts ids in the dispatcher's delivery log as delivered, and the
// rest by status ("absent" for ids without a row).
func (pb *pipelineBench) logged(ids []string) (delivered int, other map[string]int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pb.pool.Query(ctx, `SELECT status, count(*) FROM dispatch.deliveries WHERE id = ANY($1::uuid[]) GROUP BY status`, ids)
	if err != nil {
		return 0, nil, fmt.Errorf("read the delivery log: %w", err)
	}
	defer rows.Close()
	other = map[string]int{}
	found := 0
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return 0, nil, err
		}
		found += n
		if status == "delivered" {
			delivered = n
		} else {
			other[status] = n
		}
	}
	if found < len(ids) {
		other["absent"] = len(ids) - found
	}
	return delivered, other, rows.Err()
}

// pipelineResult is what one run measured.
type pipelineResult struct {
	messages               int
	deliveredIn, sendIn    time.Duration // from the first POST to the last delivery, to the last 2xx
	p50, p99               float64       // ms, accepted to received
	ingressP50, ingressP99 float64       // ms, POST to 2xx
	early                  int           // received before their 2xx was read (counted as 0 ms)
	longest                time.Duration // the longest from accepted to received
	cpuMS                  float64       // total-cpu-ms: CPU time a message, every side's
}

// result computes the run's figures over its counted messages.
func (pb *pipelineBench) result(run *pipelineRun) pipelineResult {
	received := pb.rcv.receivedTimes(run)
	var lat, ingress []time.Duration
	res := pipelineResult{}
	for i := range run.n {
		if !run.counted[i] {
			continue
		}
		res.messages++
		d := received[i].Sub(run.accepted[i])
		if d < 0 {
			res.early++
			d = 0
		}
		lat = append(lat, d)
		res.longest = max(res.longest, d)
		ingress = append(ingress, run.accepted[i].Sub(run.sent[i]))
		res.deliveredIn = max(res.deliveredIn, received[i].Sub(run.start))
		res.sendIn = max(res.sendIn, run.accepted[i].Sub(run.start))
	}
	slices.Sort(lat)
	slices.Sort(ingress)
	res.p50, res.p99 = percentileMS(lat, 0.50), percentileMS(lat, 0.99)
	res.ingressP50, res.ingressP99 = percentileMS(ingress, 0.50), percentileMS(ingress, 0.99)
	return res
}

// cpuTimes are the CPU seconds used so far by the gateway, the messaging
// processes, the dispatcher processes, the flow-runners, this process,
// and the PostgreSQL and NATS servers.
type cpuTimes struct{ gateway, messaging, dispatcher, runner, bench, postgres, nats float64 }

// total is the CPU seconds of them all.
func (c cpuTimes) total() float64 {
	return c.gateway + c.messaging + c.dispatcher + c.runner + c.bench + c.postgres + c.nats
}

// cpu is the CPU seconds used so far, the killed processes' (pb.gone)
// included.
func (pb *pipelineBench) cpu() cpuTimes {
	c := pb.gone
	c.postgres, c.nats = serverCPU("postgres"), c.nats+pb.natsCPU()
	if p := pb.s.procs["gateway"]; p != nil {
		c.gateway = metric(p.addr, processCPU)
	}
	for _, p := range pb.messagings {
		c.messaging += metric(p.addr, processCPU)
	}
	for _, p := range pb.dispatchers {
		c.dispatcher += metric(p.addr, processCPU)
	}
	for _, p := range pb.runners {
		c.runner += metric(p.addr, processCPU)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return c
}

// reportCPU reports the CPU time per message (or request: messages is
// their count) of each side between before and now, and of them all
// (total-cpu-ms), which it returns.
func (pb *pipelineBench) reportCPU(b *testing.B, before cpuTimes, messages int) float64 {
	after := pb.cpu()
	per := func(d float64) float64 { return 1000 * d / float64(messages) }
	b.ReportMetric(per(after.gateway-before.gateway), "gateway-cpu-ms")
	b.ReportMetric(per(after.messaging-before.messaging), "messaging-cpu-ms")
	if len(pb.dispatchers) > 0 {
		b.ReportMetric(per(after.dispatcher-before.dispatcher), "dispatcher-cpu-ms")
	}
	if len(pb.runners) > 0 {
		b.ReportMetric(per(after.runner-before.runner), "flow-runner-cpu-ms")
	}
	b.ReportMetric(per(after.bench-before.bench), "bench-cpu-ms")
	b.ReportMetric(per(after.postgres-before.postgres), "postgres-cpu-ms")
	b.ReportMetric(per(after.nats-before.nats), "nats-cpu-ms")
	b.ReportMetric(per(after.total()-before.total()), "total-cpu-ms")
	return per(after.total() - before.total())
}

// serverCPU is the CPU seconds used so far by the processes named comm on
// this machine and their exited children, from /proc/<pid>/stat (in the
// 1/100 s ticks Linux counts them in): every PostgreSQL backend, say, so
// anyone else's use of the same server meanwhile counts too. 0 when the
// server runs elsewhere.
func serverCPU(comm string) float64 {
	dirs, _ := os.ReadDir("/proc")
	total := 0.0
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		if name, seconds := procCPU(d.Name()); name == comm {
			total += seconds
		}
	}
	return total
}

// procCPU is the command name of process pid and the CPU seconds it and
// its exited children have used so far, from /proc/<pid>/stat; "" when it
// is gone.
func procCPU(pid string) (comm string, seconds float64) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after it.
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return "", 0
	}
	// utime, stime, and cutime, cstime: the postmaster's reaped
	// children, so that a backend's CPU still counts once it exits.
	ticks := 0.0
	if f := strings.Fields(string(raw[end+1:])); len(f) > 14 {
		for _, v := range f[11:15] {
			t, _ := strconv.ParseFloat(v, 64)
			ticks += t
		}
	}
	return string(raw[open+1 : end]), ticks / 100
}

// measure runs send over run and settles it, sampling meanwhile, and
// reports what every run reports: the messages counted, their latency,
// the queues' peaks, the CPU time per message and what PostgreSQL
// counted per message (reportPG).
func (pb *pipelineBench) measure(b *testing.B, run *pipelineRun, send func(*pipelineRun) error) (pipelineResult, *pipelineWatch) {
	pg, err := pb.pgStats()
	if err != nil {
		b.Fatal(err)
	}
	cpu := pb.cpu()
	b.ResetTimer()
	watch := pb.watch(run)
	if err := send(run); err != nil {
		b.Fatal(err)
	}
	if err := pb.settle(run); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpuMS := pb.reportCPU(b, cpu, run.n)
	watch.end(b)
	res := pb.result(run)
	res.cpuMS = cpuMS
	b.ReportMetric(float64(res.messages), "messages")
	b.ReportMetric(res.p50, "p50-ms")
	b.ReportMetric(res.p99, "p99-ms")
	pb.reportPG(b, pg, run.n)
	if *pipelineWindows {
		printWindows(b.Name(), pb.windows(run, watch.machine))
	}
	if res.early > 0 {
		// The dispatcher can be that quick.
		b.Logf("%d of %d deliveries arrived before their ingress 2xx was read; counted as 0 ms", res.early, res.messages)
	}
	return res, watch
}

// max is pipeline-max: -pipeline.messages messages from closed-loop
// senders, as fast as the pipeline takes them.
func (pb *pipelineBench) max(b *testing.B) {
	_, _ = pb.maxOf(b, *pipelineMessages)
}

// maxOf is a throughput run of n messages from -pipeline.senders
// closed-loop senders; it returns the messages received per second and
// the CPU time a message (total-cpu-ms).
func (pb *pipelineBench) maxOf(b *testing.B, n int) (rate, cpuMS float64) {
	res, _ := pb.measure(b, pb.newRun(n, nil), func(run *pipelineRun) error {
		return pb.sendClosed(run, *pipelineSenders)
	})
	rate = float64(res.messages) / res.deliveredIn.Seconds()
	b.ReportMetric(float64(res.deliveredIn.Nanoseconds())/float64(res.messages), "ns/op")
	b.ReportMetric(rate, "messages/s")
	b.ReportMetric(float64(res.messages)/res.sendIn.Seconds(), "ingress/s")
	if pb.floorHTTP.rate > 0 {
		b.ReportMetric(rate/pb.floorHTTP.rate, "ratio-to-bare-http")
	}
	if pb.floorPGJS.rate > 0 {
		b.ReportMetric(rate/pb.floorPGJS.rate, "ratio-to-bare-pg-js")
	}
	return rate, res.cpuMS
}

// pacedRate is the paced runs' messages per second: -pipeline.rate, or
// by default half of pipeline-max/instances=1's messages/s in this run
// (1,000 when that line did not run).
func (pb *pipelineBench) pacedRate() int {
	switch {
	case *pipelineRate > 0:
		return *pipelineRate
	case pb.maxRate > 0:
		return max(1, int(math.Round(pb.maxRate/2)))
	default:
		return 1000
	}
}

// pacedName is the quiet paced line's name: pipeline-paced-half-max at
// the default rate, pipeline-paced-<rate> at -pipeline.rate.
func (pb *pipelineBench) pacedName() string {
	if *pipelineRate > 0 {
		return fmt.Sprintf("pipeline-paced-%d", *pipelineRate)
	}
	return "pipeline-paced-half-max"
}

// pacedRun sends a paced run of n messages at rate a second whose healthy
// workspaces' messages count, reports what every paced run reports, and
// returns its result and the services' peak resident memory meanwhile.
func (pb *pipelineBench) pacedRun(b *testing.B, n, rate int, healthy func(ws int) bool) (pipelineResult, map[string]float64) {
	run := pb.newRun(n, healthy)
	res, watch := pb.measure(b, run, func(run *pipelineRun) error { return pb.sendPaced(run, rate) })
	b.ReportMetric(0, "ns/op") // the schedule sets the pace, not the cost
	b.ReportMetric(float64(rate), "rate-msg/s")
	b.ReportMetric(float64(run.n)/res.sendIn.Seconds(), "achieved-msg/s")
	b.ReportMetric(res.ingressP50, "ingress-p50-ms")
	b.ReportMetric(res.ingressP99, "ingress-p99-ms")
	return res, watch.rss
}

// paced is pipeline-paced-<rate>: the quiet paced run, with the services'
// memory idle and under it.
func (pb *pipelineBench) paced(b *testing.B) {
	res, peak := pb.pacedRun(b, *pipelinePaced, pb.pacedRate(), nil)
	pb.quiet = res
	if floor50, floor99 := pb.floorHTTP.p50+pb.floorPGJS.p50, pb.floorHTTP.p99+pb.floorPGJS.p99; pb.floorHTTP.rate > 0 && pb.floorPGJS.rate > 0 {
		b.ReportMetric(res.p50/floor50, "p50-ratio-to-bare")
		b.ReportMetric(res.p99/floor99, "p99-ratio-to-bare")
	}
	for _, name := range []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner"} {
		b.ReportMetric(pb.rssIdle[name], "rss-mb-"+name+"-idle")
		b.ReportMetric(peak[name], "rss-mb-"+name+"-load")
	}
}

// noisyHanging is how many workspaces' webhooks hang in pipeline-noisy:
// the last ones.
func (pb *pipelineBench) noisyHanging() int {
	return int(math.Round(*pipelineHanging * float64(len(pb.spaces))))
}

// noisyHealthy says whether workspace ws's webhook stays healthy in
// pipeline-noisy: only those workspaces' messages count there and in its
// quiet reference.
func (pb *pipelineBench) noisyHealthy(ws int) bool {
	return ws < len(pb.spaces)-pb.noisyHanging()
}

// quietBeforeNoisy is pipeline-quiet-before-noisy: pipeline-noisy's
// quiet reference.
func (pb *pipelineBench) quietBeforeNoisy(b *testing.B) {
	pb.quietNear, _ = pb.pacedRun(b, *pipelinePaced, pb.pacedRate(), pb.noisyHealthy)
}

// noisy is pipeline-noisy: the paced run with some workspaces' webhooks
// hanging; only the others' messages count.
func (pb *pipelineBench) noisy(b *testing.B) {
	hanging := pb.noisyHanging()
	for i, w := range pb.spaces {
		if !pb.noisyHealthy(i) && !w.hanging {
			pb.putWebhook(b, w.key, pb.hang.url)
			pb.spaces[i].hanging = true
		}
	}
	res, _ := pb.pacedRun(b, *pipelinePaced, pb.pacedRate(), pb.noisyHealthy)
	b.ReportMetric(float64(hanging), "hanging-webhooks")
	b.ReportMetric(float64(pb.hang.held.Load()), "hung-requests")
	if q := pb.quietNear; q.messages > 0 {
		b.ReportMetric(q.p50, "quiet-p50-ms")
		b.ReportMetric(q.p99, "quiet-p99-ms")
		b.ReportMetric(res.p50/q.p50, "p50-ratio-to-quiet")
		b.ReportMetric(res.p99/q.p99, "p99-ratio-to-quiet")
	}
	if q := pb.quiet; q.messages > 0 {
		b.ReportMetric(res.p50/q.p50, "p50-ratio-to-first-quiet")
		b.ReportMetric(res.p99/q.p99, "p99-ratio-to-first-quiet")
	}
	paused := 0
	for _, w := range pb.spaces {
		if !w.hanging {
			continue
		}
		_, _, out := pb.s.api(b, w.key, http.MethodGet, "/v1/webhook", nil)
		if hook, _ := out["webhook"].(map[string]any); hook["status"] == "paused" {
			paused++
		}
	}
	b.ReportMetric(float64(paused), "paused-webhooks")
}

// dispatcherConsumer is the durable consumer the dispatchers share
// (DISPATCHER_CONSUMER, which the suite leaves at its default).
const dispatcherConsumer = "webhook-dispatcher"

// pipelineWatch samples, while a run goes on, what its end cannot show:
// the services' peak resident memory, and where messages queue: in
// messaging's outbox (committed, not yet published to the stream: its
// rows) or in the stream (published,
// not yet settled by a dispatcher: the consumer's pending and
// unacknowledged messages).
type pipelineWatch struct {
	stop, done     chan struct{}
	rss            map[string]float64 // MB, by service
	outbox, stream int64
	trace          []string
	machine        []machineSample // -pipeline.windows
}

func (pb *pipelineBench) watch(run *pipelineRun) *pipelineWatch {
	w := &pipelineWatch{stop: make(chan struct{}), done: make(chan struct{}), rss: map[string]float64{}}
	ctx := context.Background()
	cons, err := pb.js.Consumer(ctx, pb.queue.stream, pb.queue.consumer)
	start := time.Now()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for k := 0; ; k++ {
			if *pipelineWindows {
				w.machine = append(w.machine, pb.sampleMachine())
			}
			for name, mb := range pb.rss() {
				w.rss[name] = max(w.rss[name], mb)
			}
			outbox, stream := int64(0), int64(0)
			// The relays' own gauge is set after each pass only, and a
			// pass under load does not end.
			outbox, _ = pb.outboxBacklog(ctx)
			if err == nil {
				if info, err := cons.Info(ctx); err == nil {
					stream = int64(info.NumPending) + int64(info.NumAckPending)
				}
			}
			w.outbox, w.stream = max(w.outbox, outbox), max(w.stream, stream)
			if *pipelineTrace && k%4 == 0 {
				w.trace = append(w.trace, fmt.Sprintf("%5.1fs: accepted %6d, in the outbox %6d, in the stream %6d, delivered %6d",
					time.Since(start).Seconds(), run.acceptedN.Load(), outbox, stream, pb.rcv.delivered(run)))
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// outboxBacklog is messaging's outbox backlog: its rows, committed and
// not yet handed to the stream (a row is deleted once its event is
// published: docs/architecture.md).
func (pb *pipelineBench) outboxBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := pb.pool.QueryRow(ctx, `SELECT count(*) FROM messaging.outbox`).Scan(&n)
	return n, err
}

// end stops the sampling and reports the queues' peaks.
func (w *pipelineWatch) end(b *testing.B) {
	close(w.stop)
	<-w.done
	b.ReportMetric(float64(w.outbox), "outbox-peak")
	b.ReportMetric(float64(w.stream), "stream-peak")
	// Printed, not logged: a benchmark's log is cut at ten lines.
	for _, line := range w.trace {
		fmt.Printf("trace %s %s\n", b.Name(), line)
	}
}

// scaleOut starts instances-1 more messaging and dispatcher processes,
// sends the warm-up through them, and returns them.
func (pb *pipelineBench) scaleOut(b *testing.B, instances int) []*proc {
	b.Helper()
	var extras []*proc
	for range instances - 1 {
		m := pb.s.startExtra(b, "messaging", "MESSAGING_ADDR")
		d := pb.s.startExtra(b, "webhook-dispatcher", "DISPATCHER_ADDR")
		pb.ingress = append(pb.ingress, "http://"+m.addr)
		pb.messagings = append(pb.messagings, m)
		pb.dispatchers = append(pb.dispatchers, d)
		extras = append(extras, m, d)
	}
	pb.warm(b)
	return extras
}

// scaleIn interrupts the extra processes, as an operator scaling in does,
// and waits until each has exited; one instance of each is left.
func (pb *pipelineBench) scaleIn(b *testing.B, extras []*proc) {
	b.Helper()
	for _, p := range extras {
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			b.Fatalf("interrupt %s: %v", p.name, err)
		}
	}
	for _, p := range extras {
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			b.Fatalf("%s %s still running 30 s after an interrupt", p.name, p.addr)
		}
	}
	pb.ingress = pb.ingress[:1]
	pb.messagings, pb.dispatchers = pb.messagings[:1], pb.dispatchers[:1]
}

// rss is the resident memory (VmRSS, MB) of the suite's own processes, by
// service.
func (pb *pipelineBench) rss() map[string]float64 {
	pb.procsMu.Lock()
	defer pb.procsMu.Unlock()
	out := map[string]float64{}
	for name, p := range pb.s.procs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(raw)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				out[name] = kb / 1024
			}
		}
	}
	return out
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// pipelineBare is a bare baseline's throughput and one-at-a-time latency.
type pipelineBare struct {
	rate, p50, p99 float64
}

// measureBare times pipelineSample ops one at a time, then runs op from
// -pipeline.senders goroutines for -pipeline.baseline-time and reports
// both under unit (the rate's).
func measureBare(b *testing.B, unit string, op func() error) pipelineBare {
	lat := make([]time.Duration, pipelineSample)
	if err := (&benchClient{clients: 1}).run(pipelineSample, op, lat); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	var ops atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	until := start.Add(*pipelineBaselineTime)
	for range *pipelineSenders {
		wg.Go(func() {
			for failed.Load() == nil && time.Now().Before(until) {
				if err := op(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	res := pipelineBare{rate: float64(ops.Load()) / elapsed.Seconds(), p50: percentileMS(lat, 0.50), p99: percentileMS(lat, 0.99)}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(ops.Load()), "ns/op")
	b.ReportMetric(res.rate, unit)
	b.ReportMetric(res.p50, "p50-ms")
	b.ReportMetric(res.p99, "p99-ms")
	return res
}

// bareHTTP is bare-http: a real delivery's signed request, posted again
// by a bare client to the same receiver, which checks it the same way and
// counts it apart from the deliveries.
func (pb *pipelineBench) bareHTTP(b *testing.B) {
	sample := pb.rcv.sample()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *pipelineSenders}, Timeout: 30 * time.Second}
	url := fmt.Sprintf("%s%s%d?bare", pb.rcv.url, pipelineHooks, sample.ws)
	before := pb.rcv.bare.Load()
	var posted atomic.Int64
	pb.floorHTTP = measureBare(b, "req/s", func() error {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(sample.body))
		if err != nil {
			return err
		}
		req.Header = sample.header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("receiver answered %d", resp.StatusCode)
		}
		posted.Add(1)
		return nil
	})
	if got := pb.rcv.bare.Load() - before; got != posted.Load() {
		b.Fatalf("the receiver checked %d bare posts of %d", got, posted.Load())
	}
}

// barePGJS is bare-pg-js: an INSERT of an event-sized row and a JetStream
// publish of the event, waiting for the stream's ack, to a stream of its
// own (the dispatchers consume the events stream) with the same settings.
func (pb *pipelineBench) barePGJS(b *testing.B) {
	ctx := context.Background()
	if _, err := pb.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS public.pipeline_baseline (
		id uuid PRIMARY KEY, subject text NOT NULL, payload bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	// Named after the events stream, so the test environment removes it.
	stream := natsx.EventsStream{Name: pb.s.env.Stream.Name + "_BASELINE", SubjectPrefix: pb.s.env.ID + ".baseline"}
	if _, err := stream.Ensure(ctx, pb.js); err != nil {
		b.Fatal(err)
	}
	payload, err := proto.Marshal(messageReceived(pb.spaces[0].id, 1))
	if err != nil {
		b.Fatal(err)
	}
	subject := stream.Subject(pb.spaces[0].id, "message.received")
	pb.floorPGJS = measureBare(b, "ops/s", func() error {
		id := uuid.NewString()
		if _, err := pb.pool.Exec(ctx, `INSERT INTO public.pipeline_baseline (id, subject, payload) VALUES ($1, $2, $3)`, id, subject, payload); err != nil {
			return err
		}
		msg := nats.NewMsg(subject)
		msg.Data = payload
		msg.Header.Set(jetstream.MsgIDHeader, id)
		_, err := pb.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(stream.Name))
		return err
	})
}
