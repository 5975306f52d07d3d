package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFlowInvoke is issue 8's bench: POST /v1/flows/:id/invoke of a
// 10-node flow without I/O (benchFlow) through the built gateway, beside
// the same run's cost of a bare forwarded request, on one suite (the
// binaries TestMain built, one database, Redis and NATS, all on this
// machine):
//
//   - bare-forwarded: GET /v1/flows of the same workspace (one flow). Of
//     the forwarded routes it does the least: the gateway's whole path
//     (the key and its workspace read, the rate limit, the rpc request
//     over NATS to the flow-runner queue group and back) with, behind it,
//     one indexed read of a one-row result and no write. It goes to the
//     same service as the invoke, so the difference between the two is
//     what an invoke adds: reading the flow (its parsed version is
//     cached), running ten nodes, and storing the run and its node runs;
//   - runners=1: the invoke, answered by the suite's one flow-runner;
//   - runners=3: the invoke with two more flow-runner processes in the
//     same queue group; the benchmark fails if, over 300 or more invokes,
//     one of the three served under a tenth of them.
//
// Each is measured at two concurrencies, as sub-benchmarks of their own
// (-flowbench.clients, "1,16" by default): clients=1, one request at a
// time, is the latency of a request that does not queue, which is what
// the target (p50 under 5 ms) is about; clients=16, sixteen goroutines
// sending back to back, is the throughput, and its latencies include the
// time each request queues behind the others (on a saturated closed loop
// p50 is about clients / throughput, whatever one request costs). They
// send b.N requests over one keep-alive connection pool to 127.0.0.1 and
// stop when b.N have been sent or at the first failure. Every invoke's
// answer is checked (200, status completed, the flow's output and
// messages), and the bare request's (200, the flow listed), so a broken
// run fails the benchmark. One op is one request; reported beside ns/op:
// req/s, and p50-ms / p99-ms of every request's latency in the run (from
// before the request is written to its body read). And, to say where the
// time goes, two means read from the services' /metrics over the run:
// service-ms, the gateway's time waiting for the flow-runner (the rpc
// request over NATS, the handler, its database work, the answer back), and
// engine-ms, the flow-runners' time running the nodes of an invoke; and
// the CPU time per request of the gateway and of the flow-runners
// (gateway-cpu-ms, runners-cpu-ms, from process_cpu_seconds_total).
//
// Run with: go test -run '^$' -bench BenchmarkFlowInvoke -benchtime 2000x .
// (in e2e/; make bench runs it with the default -benchtime, b.N adapting).
var benchFlowClients = flag.String("flowbench.clients", "1,16", "the concurrencies BenchmarkFlowInvoke measures, comma-separated")

// benchFlow has ten nodes, all of them run by benchInput: variables,
// conditions (if/then/else and cases), an increment, messages of three
// types and an end with an output; no http, script, question or call.
const benchFlow = `{
  "name": "Bench order",
  "description": "Ten nodes without I/O",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "order"},
    {"id": "order", "type": "variable", "set": {"total": "vars.input.qty * vars.input.price", "customer": "{{vars.input.name}}"}, "next": "big"},
    {"id": "big", "type": "condition", "if": "vars.total > 100", "then": "discount", "else": "confirm"},
    {"id": "discount", "type": "variable", "set": {"total": "vars.total * 0.9", "discounted": "true"}, "next": "confirm"},
    {"id": "confirm", "type": "send_message", "message": {"type": "text", "text": "Thanks {{vars.customer}}, your total is {{vars.total}}"}, "next": "tier"},
    {"id": "tier", "type": "condition", "cases": [{"if": "vars.total > 500", "next": "points"}, {"if": "vars.total > 50", "next": "points"}], "else": "points"},
    {"id": "points", "type": "variable", "name": "visits", "op": "increment", "next": "options"},
    {"id": "options", "type": "send_message", "message": {"type": "quick_replies", "text": "Anything else?", "quick_replies": ["Track", "Cancel"]}, "next": "receipt"},
    {"id": "receipt", "type": "send_message", "message": {"type": "buttons", "text": "Receipt for {{vars.input.order_id}}", "buttons": [{"type": "postback", "title": "Details", "payload": "DETAILS"}]}, "next": "done"},
    {"id": "done", "type": "end", "output": {"total": "{{vars.total}}", "customer": "{{vars.customer}}", "visits": "{{vars.visits}}"}}
  ]
}`

// benchInput takes the discount branch: 3 × 42.5 = 127.5, less 10 %.
const benchInput = `{"input": {"name": "Ada", "qty": 3, "price": 42.5, "order_id": "A-1001"}}`

const benchTotal = 114.75

func BenchmarkFlowInvoke(b *testing.B) {
	// Everything is started here, on the parent benchmark, because what a
	// sub-benchmark registers for cleanup goes after each of its runs.
	s := startSuite(b)
	ws, key := s.flowDeveloper(b)
	var pub struct {
		ID string `json:"id"`
	}
	s.ctl(b, &pub, "flow", "publish", "--workspace", ws, "--file", flowFile(b, benchFlow))
	if pub.ID == "" {
		b.Fatal("flow publish printed no id")
	}
	concurrencies, err := parseConcurrencies(*benchFlowClients)
	if err != nil {
		b.Fatal(err)
	}
	var clients []*benchClient
	for _, n := range concurrencies {
		clients = append(clients, newBenchClient(s.gatewayURL, key, pub.ID, n))
	}
	runners := []string{strings.TrimPrefix(s.flowRunnerURL, "http://")}
	measure := func(name string, op func(c *benchClient) error) {
		b.Run(name, func(b *testing.B) {
			for _, c := range clients {
				op := func() error { return op(c) }
				c.warm(b, op)
				b.Run(fmt.Sprintf("clients=%d", c.clients), func(b *testing.B) { c.measure(b, op, runners) })
			}
		})
	}

	measure("bare-forwarded", (*benchClient).bare)
	measure("runners=1", (*benchClient).invoke)
	for range 2 {
		runners = append(runners, s.startExtra(b, "flow-runner", "FLOW_RUNNER_ADDR").addr)
	}
	measure("runners=3", (*benchClient).invoke)
}

// parseConcurrencies reads -flowbench.clients.
func parseConcurrencies(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-flowbench.clients %q: want positive numbers, comma-separated", list)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchClient sends the benchmark's requests over one keep-alive pool.
type benchClient struct {
	http                   *http.Client
	clients                int
	key                    string
	gatewayAddr            string // for its /metrics
	listURL, invokeURL, id string
}

func newBenchClient(gatewayURL, key, flowID string, clients int) *benchClient {
	return &benchClient{
		http: &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients},
			// A request that takes this long has failed the benchmark.
			Timeout: 30 * time.Second,
		},
		clients:     clients,
		key:         key,
		gatewayAddr: strings.TrimPrefix(gatewayURL, "http://"),
		id:          flowID,
		listURL:     gatewayURL + "/v1/flows",
		invokeURL:   gatewayURL + "/v1/flows/" + flowID + "/invoke",
	}
}

// do sends one request and returns the answer's status and body.
func (c *benchClient) do(method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// bare is GET /v1/flows, answered 200 with the benchmark's flow.
func (c *benchClient) bare() error {
	status, raw, err := c.do(http.MethodGet, c.listURL, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"id":"`+c.id+`"`)) {
		return fmt.Errorf("GET /v1/flows = %d %s", status, raw)
	}
	return nil
}

// invoke runs benchFlow once and checks the answer.
func (c *benchClient) invoke() error {
	status, raw, err := c.do(http.MethodPost, c.invokeURL, []byte(benchInput))
	if err != nil {
		return err
	}
	var out struct {
		Status string `json:"status"`
		Output struct {
			Total  float64 `json:"total"`
			Visits float64 `json:"visits"`
		} `json:"output"`
		Messages []json.RawMessage `json:"messages"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Status != "completed" ||
		math.Abs(out.Output.Total-benchTotal) > 1e-9 || out.Output.Visits != 1 || len(out.Messages) != 3 {
		return fmt.Errorf("invoke = %d %s; want 200, completed, total %v, visits 1 and 3 messages", status, raw, benchTotal)
	}
	return nil
}

// warm sends a few requests per client before a sub-benchmark, outside its
// timing, so that connections are open and new runners have read the flow.
func (c *benchClient) warm(b *testing.B, op func() error) {
	b.Helper()
	if err := c.run(3*c.clients, op, nil); err != nil {
		b.Fatal(err)
	}
}

// run sends n requests with op from c.clients goroutines, recording each
// one's latency in lat (if not nil, len(lat) >= n), and returns the first
// error; after an error no new request starts.
func (c *benchClient) run(n int, op func() error, lat []time.Duration) error {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(c.clients, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := time.Now()
				if err := op(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if lat != nil {
					lat[i] = time.Since(start)
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// measure is one sub-benchmark: b.N requests with op, while runners (the
// flow-runners' addresses) are up; with more than one, each must have run
// a share of the invokes.
func (c *benchClient) measure(b *testing.B, op func() error, runners []string) {
	before := c.readTimes(runners)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	err := c.run(b.N, op, lat)
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	after := c.readTimes(runners)
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(percentileMS(lat, 0.50), "p50-ms")
	b.ReportMetric(percentileMS(lat, 0.99), "p99-ms")
	// Where the time goes, as means: in the flow-runner (from the gateway's
	// rpc request to its answer) and, of that, in the engine.
	if n := after.upstream.count - before.upstream.count; n > 0 {
		b.ReportMetric(1000*(after.upstream.sum-before.upstream.sum)/n, "service-ms")
	}
	if n := after.engine.count - before.engine.count; n > 0 {
		b.ReportMetric(1000*(after.engine.sum-before.engine.sum)/n, "engine-ms")
	}
	b.ReportMetric(1000*(after.gatewayCPU-before.gatewayCPU)/float64(b.N), "gateway-cpu-ms")
	b.ReportMetric(1000*(after.runnersCPU-before.runnersCPU)/float64(b.N), "runners-cpu-ms")

	if len(runners) < 2 {
		return
	}
	served := make([]int, len(runners))
	for i := range runners {
		served[i] = int(after.completed[i] - before.completed[i])
	}
	b.Logf("b.N=%d: invokes completed by each flow-runner: %v", b.N, served)
	if b.N >= 300 && slices.Min(served) < b.N/10 {
		b.Fatalf("invokes completed by each flow-runner: %v of %d; want every one to take a share", served, b.N)
	}
}

// The metrics measure reads: the gateway's time in the flow-runner, and
// each flow-runner's completed runs and its engine's time on them.
var (
	upstreamSum   = regexp.MustCompile(`(?m)^parley_gateway_upstream_duration_seconds_sum\{service="flow-runner"\} (\S+)$`)
	upstreamCount = regexp.MustCompile(`(?m)^parley_gateway_upstream_duration_seconds_count\{service="flow-runner"\} (\S+)$`)
	engineSum     = regexp.MustCompile(`(?m)^flow_run_duration_seconds_sum\{status="completed"\} (\S+)$`)
	completedRuns = regexp.MustCompile(`(?m)^flow_runs_total\{status="completed"\} (\S+)$`)
	processCPU    = regexp.MustCompile(`(?m)^process_cpu_seconds_total (\S+)$`)
)

type sumCount struct{ sum, count float64 }

type serviceTimes struct {
	upstream, engine       sumCount
	gatewayCPU, runnersCPU float64   // seconds
	completed              []float64 // by runner
}

func (c *benchClient) readTimes(runners []string) serviceTimes {
	t := serviceTimes{
		upstream:   sumCount{metric(c.gatewayAddr, upstreamSum), metric(c.gatewayAddr, upstreamCount)},
		gatewayCPU: metric(c.gatewayAddr, processCPU),
		completed:  make([]float64, len(runners)),
	}
	for i, addr := range runners {
		t.completed[i] = metric(addr, completedRuns)
		t.engine.sum += metric(addr, engineSum)
		t.engine.count += t.completed[i]
		t.runnersCPU += metric(addr, processCPU)
	}
	return t
}

// percentileMS is the nearest-rank p-th percentile of sorted, in
// milliseconds.
func percentileMS(sorted []time.Duration, p float64) float64 {
	i := max(0, min(int(math.Ceil(p*float64(len(sorted))))-1, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}
