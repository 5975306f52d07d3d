package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var (
	gatewayReads = flag.Int("pipeline.reads", 10000, "requests of each gateway-reads line of BenchmarkPipeline")
	readsRate    = flag.Int("pipeline.reads-rate", 1000, "requests per second of the gateway-reads lines")
)

// gatewayReads is issue 11's read line: GET path through the gateway,
// open loop at -pipeline.reads-rate a second for -pipeline.reads
// requests, with the keys of the pipeline's workspaces in turn (each
// holds the conversations of its customers, and a rate limit raised for
// the bench). Every answer must be 200 with a JSON body. It reports the
// p50 and p99 of the time from each request's scheduled start to its body
// read (a late start counts against the gateway), the rate achieved, the
// mean size of a body, each process's CPU time per request (reportCPU),
// and per request the KB the gateway and messaging allocated
// (gateway-alloc-kb, messaging-alloc-kb) and the gateway's write system
// calls (gateway-writes): counts that, unlike the CPU time, the machine's
// hour does not move.
// Beside it, bare-forwarded reads GET /v1/channels: the same path through
// the gateway to messaging with one small indexed read behind it, where
// /v1/conversations reads a page of conversations with their contacts.
func (pb *pipelineBench) gatewayReads(path string) func(b *testing.B) {
	return func(b *testing.B) {
		n := *gatewayReads
		lat := make([]time.Duration, n)
		var bytesRead atomic.Int64
		cpu, counts := pb.cpu(), pb.readCounts()
		b.ResetTimer()
		start := time.Now()
		err := openLoop(start, n, *readsRate, func(i int) error {
			w := pb.spaces[i%len(pb.spaces)]
			req, err := http.NewRequest(http.MethodGet, pb.s.gatewayURL+path, nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+w.key)
			resp, err := pb.http.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			bytesRead.Add(int64(len(body)))
			if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("{")) {
				return fmt.Errorf("GET %s = %d %s", path, resp.StatusCode, body)
			}
			lat[i] = time.Since(start.Add(time.Duration(i) * time.Second / time.Duration(*readsRate)))
			return nil
		})
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "achieved-req/s")
		b.ReportMetric(percentileMS(lat, 0.50), "p50-ms")
		b.ReportMetric(percentileMS(lat, 0.99), "p99-ms")
		b.ReportMetric(float64(bytesRead.Load())/float64(n), "body-bytes")
		pb.reportCPU(b, cpu, n)
		after := pb.readCounts()
		b.ReportMetric((after.gatewayAlloc-counts.gatewayAlloc)/1024/float64(n), "gateway-alloc-kb")
		b.ReportMetric((after.messagingAlloc-counts.messagingAlloc)/1024/float64(n), "messaging-alloc-kb")
		b.ReportMetric((after.gatewayWrites-counts.gatewayWrites)/float64(n), "gateway-writes")
	}
}

// allocBytes is a Go process's bytes allocated so far, from its /metrics.
var allocBytes = regexp.MustCompile(`(?m)^go_memstats_alloc_bytes_total (\S+)$`)

// readCounts are what the gateway and the messaging processes have done
// so far that a read's CPU time follows: the bytes they allocated (the
// garbage collector's work), and the gateway's write system calls.
type readCounts struct{ gatewayAlloc, messagingAlloc, gatewayWrites float64 }

func (pb *pipelineBench) readCounts() readCounts {
	var c readCounts
	if p := pb.s.procs["gateway"]; p != nil {
		c.gatewayAlloc = metric(p.addr, allocBytes)
		c.gatewayWrites = procWrites(p.cmd.Process.Pid)
	}
	for _, p := range pb.messagings {
		c.messagingAlloc += metric(p.addr, allocBytes)
	}
	return c
}

// procWrites is the write system calls process pid has made so far
// (syscw in /proc/<pid>/io); 0 when that cannot be read.
func procWrites(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}

// historyConversations is how many earlier conversations seedHistory gives
// each workspace.
const historyConversations = 200

// seedHistory gives each workspace historyConversations conversations of
// earlier customers, their last messages spread over the past day as a
// shop's are, written straight into messaging's tables (they are history:
// no event or webhook is due for them). The first gateway-reads lines read
// these; the pipeline's runs then add their customers, whose messages
// arrive many to a second.
func (pb *pipelineBench) seedHistory(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	for i, w := range pb.spaces {
		_, err := pb.pool.Exec(ctx, `
			WITH k AS (
				INSERT INTO messaging.contacts (id, workspace_id, channel_id, sender_id, name)
				SELECT gen_random_uuid(), $1, $2, 'history-' || $3::text || '-' || g, 'Earlier customer ' || g
				FROM generate_series(1, $4) AS g
				RETURNING id, sender_id
			)
			INSERT INTO messaging.conversations (id, workspace_id, channel_id, contact_id, platform, reply_to, last_message_at, last_customer_message_at)
			SELECT gen_random_uuid(), $1, $2, k.id, 'telegram', k.sender_id, t, t
			FROM (SELECT k.*, $5::timestamptz - make_interval(secs => 86400.0 * random()) AS t FROM k) AS k`,
			w.id, w.channel, fmt.Sprint(i), historyConversations, now.Add(-time.Minute))
		if err != nil {
			b.Fatalf("seed the history of workspace %d: %v", i, err)
		}
	}
	// Tables that grew to this size in use would have their statistics
	// (autovacuum analyzes a table as it grows); rows written in one go
	// have none until autovacuum next wakes, up to a minute later, and
	// until then the planner joins every conversation of the workspace to
	// its contact before it sorts them, instead of walking the recent
	// index for one page: the reads would measure that minute.
	if _, err := pb.pool.Exec(ctx, `ANALYZE messaging.contacts, messaging.conversations`); err != nil {
		b.Fatalf("analyze the history: %v", err)
	}
}
