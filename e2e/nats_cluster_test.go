package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestNATSClusterFaults runs the built services on a JetStream cluster of
// three nats-server processes of the test's own (natscluster), all three
// in NATS_URL, under a steady paced load of customer messages (Telegram
// ingress to the signed webhook: the pipeline bench's messages and
// receiver) and of flow invokes through the gateway (gateway to
// flow-runner over rpc), and takes one server away at a time:
//
//   - replicas=3 (EVENTS_REPLICAS=3): the server leading the events
//     stream is killed with SIGKILL and later restarted; then a server
//     that does not lead it; then the leader is frozen (SIGSTOP, as a
//     server cut off from the network looks) and later let go (outage).
//     Once another server leads the stream and every service has left the
//     one away, and while it is still away, new messages must reach the
//     webhook, invokes complete, and every message accepted so far be
//     delivered: the other two servers hold the stream. After each fault
//     every message accepted is delivered (by delivery id at the receiver,
//     the delivery log saying delivered); a delivery id that comes again
//     is counted as the at-least-once of docs/webhooks.md "Answering a
//     delivery", and a message under two ids fails; the ingress refused
//     nothing for long, the invokes failed for a bounded time, and every
//     service answers /readyz 200 from the process it started with;
//   - replicas=1: the same check of new messages, the server that holds
//     the stream killed, must fail: nothing accepted while it is down is
//     delivered before it is back. Once it is, every message is (late, not
//     lost).
//
// Each fault prints how long ingress and delivery stopped, how long the
// invokes failed, and the duplicates; docs/testing.md "The NATS cluster
// test" says how to read them.
func TestNATSClusterFaults(t *testing.T) {
	t.Parallel()
	t.Run("replicas=3", func(t *testing.T) {
		c := startClusterParley(t, 3)
		c.fault(t, "stream leader killed", func(t *testing.T, l *clusterLoad) {
			leader := c.cluster.StreamLeader(t, c.stream)
			c.outage(t, l, leader, "killed", leader.Kill, leader.Restart)
		})
		c.fault(t, "follower killed", func(t *testing.T, l *clusterLoad) {
			follower := c.cluster.Servers()[0]
			if follower == c.cluster.StreamLeader(t, c.stream) {
				follower = c.cluster.Servers()[1]
			}
			c.outage(t, l, follower, "killed", follower.Kill, follower.Restart)
		})
		c.fault(t, "stream leader cut off", func(t *testing.T, l *clusterLoad) {
			leader := c.cluster.StreamLeader(t, c.stream)
			c.outage(t, l, leader, "cut off", leader.Pause, leader.Resume)
		})
	})

	t.Run("replicas=1", func(t *testing.T) {
		c := startClusterParley(t, 1)
		c.fault(t, "the stream's only server killed", func(t *testing.T, l *clusterLoad) {
			holder := c.cluster.StreamLeader(t, c.stream)
			down := time.Now()
			holder.Kill(t)
			c.wentOn(t, holder, false, down)
			err := l.checkFlowsAfter(time.Now())
			if err == nil {
				t.Fatalf("with one replica, messages accepted while %s (the stream's only server) was down were delivered: the check cannot tell replicas from none", holder.Name)
			}
			t.Logf("replicas=1, as expected while %s is down: %v", holder.Name, err)
			holder.Restart(t)
			// Late, not lost: the outbox kept them.
			l.flowsAfter(t, time.Now(), "once "+holder.Name+" is back")
		})
	})
}

// outage takes gone away with leave (Kill, Pause) and waits until the
// cluster and the services have gone on without it: another server leads
// the stream if it led it, and every service is connected to another.
// From then on, while it is away, the customer messages must reach the
// webhook and the invokes complete, and every message accepted so far
// must be delivered; then it comes back (back: Restart, Resume), and once
// its replicas are current messages flow again.
func (c *clusterParley) outage(t *testing.T, l *clusterLoad, gone *natscluster.Server, how string, leave, back func(testing.TB)) {
	t.Helper()
	led := c.cluster.StreamLeader(t, c.stream) == gone
	at := time.Now()
	leave(t)
	c.wentOn(t, gone, led, at)
	since := time.Now()
	while := fmt.Sprintf("while %s is %s", gone.Name, how)
	l.flowsAfter(t, since, while)
	l.invokedAfter(t, since, while)
	l.allDelivered(t, while)
	back(t)
	c.replicasCurrent(t)
	l.flowsAfter(t, time.Now(), "once "+gone.Name+" is back")
}

// Load and bounds of TestNATSClusterFaults. The rates are modest: the
// machine has two cores and other tests run beside.
const (
	clusterMessageRate = 20 // customer messages a second
	clusterInvokeRate  = 5  // flow invokes a second
	// clusterPasses is how many messages, and invokes, in a row must get
	// through after a fault for it to count as past: about two seconds'.
	clusterPasses = 2 * clusterMessageRate
	// clusterRecoverWithin bounds every wait for the system to get past a
	// fault, and so the time a stream's leader may take to be replaced
	// and the consumers to follow it; generous, for a loaded machine.
	clusterRecoverWithin = 60 * time.Second
	// clusterDeliveredWithin bounds the wait for every message accepted
	// to be delivered. The events the stream handed a dispatcher on the
	// server as it went, and which never reached it, come again after the
	// consumer's ack wait: a round of attempts plus 30 s, over a minute
	// at the defaults (as for a killed dispatcher).
	clusterDeliveredWithin = 3 * time.Minute
	// clusterIngressBound bounds how long the ingress may refuse a message
	// (Telegram retries it): it needs PostgreSQL, not NATS, so about
	// never.
	clusterIngressBound = 10 * time.Second
	// clusterRPCBound bounds how long the invokes fail, from the first
	// failure's sending to that of the first completed invoke after the
	// last: the services, and the servers, leave a frozen server after
	// 6-8 s (natsx.Connect's pings, natscluster's ping_interval). A call
	// that went through it before then is answered only when the gateway
	// stops waiting (rpc.LongCallTimeout): the slowest answer shows it.
	clusterRPCBound = 30 * time.Second
	// clusterLoadFor is the longest a fault's load may run.
	clusterLoadFor = 20 * time.Minute
)

// clusterParley is the suite on a NATS cluster of its own, with two
// workspaces' Telegram channels sending to webhooks at the pipeline
// bench's receiver, and a flow to invoke through the gateway.
type clusterParley struct {
	cluster *natscluster.Cluster
	s       *suite
	pb      *pipelineBench
	stream  string
	key     string // the flow's workspace's
	flowID  string
	pids    map[string]int
}

func startClusterParley(t *testing.T, replicas int) *clusterParley {
	t.Helper()
	cluster := natscluster.Start(t, 3)
	_, botAPI := telegramfake.Start(t)
	s := startSuiteEnv(t, []testenv.Option{testenv.NATS(cluster.URL())}, nil,
		fmt.Sprintf("EVENTS_REPLICAS=%d", replicas),
		"TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		// Out of the way: the invokes are to tell whether rpc gets
		// through, not to meet the workspace's limits.
		"FLOW_CONCURRENCY=1000", "INVOKE_DAILY_CAP=100000000")
	c := &clusterParley{cluster: cluster, s: s, stream: s.env.Stream.Name, pids: map[string]int{}}
	c.pb = newWebhookBench(t, s, 2, 20)
	// A message of any run may come again while NATS is broken: with one
	// replica, a killed server forgets the acks it had not yet written.
	c.pb.atLeastOnce = true
	c.pb.warm(t)
	var ws string
	ws, c.key = s.flowDeveloper(t)
	c.flowID = s.publishFlow(t, ws, quickFlow)
	for name, p := range s.procs {
		c.pids[name] = p.cmd.Process.Pid
	}
	info, err := cluster.StreamInfo(context.Background(), c.stream)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != replicas {
		t.Fatalf("stream %s has %d replicas, want EVENTS_REPLICAS=%d", c.stream, info.Config.Replicas, replicas)
	}
	return c
}

// fault puts the load on, waits until it flows, breaks the cluster with
// do (which also waits for what must happen meanwhile), ends the load
// once every message accepted is delivered, prints the fault's figures,
// and checks them and the services.
func (c *clusterParley) fault(t *testing.T, name string, do func(*testing.T, *clusterLoad)) {
	t.Helper()
	l := c.startLoad()
	defer l.stopped()
	l.flowsAfter(t, l.run.start, "before the fault")
	l.invokedAfter(t, l.run.start, "before the fault")
	duplicates := c.pb.rcv.allDuplicates()
	do(t, l)
	l.end(t)
	f := l.figures()
	f.duplicates = c.pb.rcv.allDuplicates() - duplicates
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("fault %q: ingress stopped %s (%d POSTs refused or failed), delivery stopped %s (p50 %.1f ms), %d duplicates of %d messages; "+
		"invokes: longest run of failures %s (%d in a row), failing over %s (%d of %d failed), slowest answer %s",
		name, ms(f.ingressStop), f.ingressFailed, ms(f.deliveryStop), f.deliveryP50, f.duplicates, f.messages,
		ms(f.rpcFailRun), f.rpcFailRow, ms(f.rpcDisrupted), f.rpcFailed, f.invokes, ms(f.rpcSlowest))
	if f.ingressStop > clusterIngressBound {
		t.Errorf("%s: the ingress took %s to accept a message, over %s", name, f.ingressStop, clusterIngressBound)
	}
	if f.rpcDisrupted > clusterRPCBound {
		t.Errorf("%s: invokes failed for %s, over %s", name, f.rpcDisrupted, clusterRPCBound)
	}
	c.servicesReady(t)
}

// replicasCurrent waits until every replica of the events stream is
// online and current.
func (c *clusterParley) replicasCurrent(t *testing.T) {
	t.Helper()
	wait.For(t, clusterRecoverWithin, "every replica of "+c.stream+" current", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := c.cluster.StreamInfo(ctx, c.stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil || len(info.Cluster.Replicas) != info.Config.Replicas-1 {
			return fmt.Errorf("cluster %+v", info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s current %t, offline %t", r.Name, r.Current, r.Offline)
			}
		}
		return nil
	})
}

// wentOn waits until the services, and the stream when gone led it, have
// gone on without gone: every service connected to another server, and
// another server leading the stream. It prints how long after since each
// was so.
func (c *clusterParley) wentOn(t *testing.T, gone *natscluster.Server, led bool, since time.Time) {
	t.Helper()
	checks := map[string]func() error{
		"every service connected to a server other than " + gone.Name: func() error { return c.servicesOff(gone) },
	}
	if led {
		checks["another server than "+gone.Name+" leading "+c.stream] = func() error { return c.leaderNot(gone) }
	}
	// Waited for together, so that each time is its own.
	type outcome struct {
		what string
		took time.Duration
		err  error
	}
	outcomes := make(chan outcome, len(checks))
	for what, check := range checks {
		go func() {
			err := wait.Poll(clusterRecoverWithin, check)
			outcomes <- outcome{what, time.Since(since), err}
		}()
	}
	for range checks {
		o := <-outcomes
		if o.err != nil {
			t.Fatalf("%s: not within %s: %v", o.what, clusterRecoverWithin, o.err)
		}
		t.Logf("%s %s after", o.what, o.took.Round(10*time.Millisecond))
	}
}

// leaderNot says why gone, or nobody, still leads the events stream.
func (c *clusterParley) leaderNot(gone *natscluster.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.cluster.StreamInfo(ctx, c.stream)
	if err != nil {
		return err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == gone.Name {
		return fmt.Errorf("cluster %+v", info.Cluster)
	}
	return nil
}

// servicesOff says which service is not connected to a server other than
// gone.
func (c *clusterParley) servicesOff(gone *natscluster.Server) error {
	var on []string
	for _, srv := range c.cluster.Servers() {
		if srv == gone {
			continue
		}
		names, err := srv.Clients()
		if err != nil {
			return err
		}
		on = append(on, names...)
	}
	for name := range c.s.procs {
		if !slices.Contains(on, name) {
			return fmt.Errorf("%s is not connected to another server", name)
		}
	}
	return nil
}

// servicesReady checks that every service answers /readyz 200 from the
// process it started with.
func (c *clusterParley) servicesReady(t *testing.T) {
	t.Helper()
	for name, p := range c.s.procs {
		if !p.running() || p.cmd.Process.Pid != c.pids[name] {
			t.Fatalf("%s: pid %d running %t, want the first process, %d", name, p.cmd.Process.Pid, p.running(), c.pids[name])
		}
		wait.Until(t, clusterRecoverWithin, name+" /readyz 200", func() bool { return probe("http://"+p.addr+"/readyz") == http.StatusOK })
	}
}

// clusterLoad is one fault's load: customer messages, one pipeline run
// sent at clusterMessageRate and each POST repeated until accepted, as
// Telegram does; and flow invokes at clusterInvokeRate, each in its own
// goroutine, whatever the earlier ones answered.
type clusterLoad struct {
	c    *clusterParley
	run  *pipelineRun
	stop chan struct{}
	sent chan error // the messages' sender's end

	invokeStart time.Time
	invoked     chan int // how many invokes were started, once all answered
	mu          sync.Mutex
	calls       []invokeCall // by number
}

// invokeCall is one invoke: when it was sent and answered, and why it
// failed.
type invokeCall struct {
	sent, answered time.Time
	failure        string // "" for a completed run
}

func (c *clusterParley) startLoad() *clusterLoad {
	run := c.pb.newRun(clusterMessageRate*int(clusterLoadFor/time.Second), nil)
	run.retry, run.atLeastOnce = true, true
	l := &clusterLoad{
		c: c, run: run, stop: make(chan struct{}), sent: make(chan error, 1), invoked: make(chan int, 1),
		calls: make([]invokeCall, clusterInvokeRate*int(clusterLoadFor/time.Second)),
	}
	run.start = time.Now()
	l.invokeStart = run.start
	go func() { l.sent <- c.pb.sendPacedUntil(run, clusterMessageRate, l.stop) }()
	go func() {
		n, _ := openLoopUntil(l.invokeStart, len(l.calls), clusterInvokeRate, l.stop, l.invoke)
		l.invoked <- n
	}()
	return l
}

// invoke sends invoke i; it never fails the load, it records.
func (l *clusterLoad) invoke(i int) error {
	call := invokeCall{sent: time.Now()}
	a, err := postFlow(context.Background(), l.c.s.gatewayURL, l.c.key, invokePath(l.c.flowID), `{"input": {}}`)
	call.answered = time.Now()
	var res flowResult
	switch {
	case err != nil:
		call.failure = err.Error()
	case a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil || res.Status != "completed":
		call.failure = a.String()
	}
	l.mu.Lock()
	l.calls[i] = call
	l.mu.Unlock()
	return nil
}

// stopped stops the load if it still runs (a failed test).
func (l *clusterLoad) stopped() {
	if !closed(l.stop) {
		close(l.stop)
		<-l.sent
		<-l.invoked
	}
}

// end stops the load and waits until every message sent is delivered.
func (l *clusterLoad) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	if err := <-l.sent; err != nil {
		t.Fatalf("customer messages: %v", err)
	}
	n := <-l.invoked
	l.mu.Lock()
	l.calls = l.calls[:n]
	l.mu.Unlock()
	if err := l.c.pb.settle(l.run); err != nil {
		t.Fatal(err)
	}
}

// flowsAfter fails t unless the clusterPasses messages scheduled first
// after at reach the webhook within clusterRecoverWithin.
func (l *clusterLoad) flowsAfter(t *testing.T, at time.Time, what string) {
	t.Helper()
	if err := l.checkFlowsAfter(at); err != nil {
		t.Fatalf("customer messages %s: %v", what, err)
	}
}

// checkFlowsAfter is flowsAfter's check: its error says what did not
// arrive in time.
func (l *clusterLoad) checkFlowsAfter(at time.Time) error {
	from := l.scheduled(at)
	err := wait.Poll(clusterRecoverWithin, func() error {
		if missing, example := l.c.pb.rcv.missingIn(l.run, from, from+clusterPasses); missing > 0 {
			return fmt.Errorf("%d of the %d messages scheduled first after %s not delivered, message %d for one",
				missing, clusterPasses, at.Format("15:04:05.000"), example)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("not within %s: %w", clusterRecoverWithin, err)
	}
	return nil
}

// allDelivered fails t unless every message sent so far reaches the
// webhook within clusterDeliveredWithin.
func (l *clusterLoad) allDelivered(t *testing.T, what string) {
	t.Helper()
	to := l.scheduled(time.Now())
	wait.For(t, clusterDeliveredWithin, "every customer message sent so far delivered "+what, func() error {
		if missing, example := l.c.pb.rcv.missingIn(l.run, 0, to); missing > 0 {
			return fmt.Errorf("%d of %d not delivered, message %d for one", missing, to, example)
		}
		return nil
	})
}

// scheduled is the number of the first message the load sends at or after
// at: message i goes at start + i/rate.
func (l *clusterLoad) scheduled(at time.Time) int {
	return max(0, int(math.Ceil(at.Sub(l.run.start).Seconds()*clusterMessageRate)))
}

// invokedAfter fails t unless clusterPasses invokes in a row, sent after
// at, complete within clusterRecoverWithin.
func (l *clusterLoad) invokedAfter(t *testing.T, at time.Time, what string) {
	t.Helper()
	first := int(math.Ceil(at.Sub(l.invokeStart).Seconds() * clusterInvokeRate))
	wait.For(t, clusterRecoverWithin, fmt.Sprintf("%d invokes in a row completed %s", clusterPasses, what), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		row, last := 0, ""
		for _, call := range l.calls[max(first, 0):] {
			switch {
			case call.answered.IsZero():
				row = 0 // not answered yet
			case call.failure != "":
				row, last = 0, call.failure
			default:
				row++
			}
			if row >= clusterPasses {
				return nil
			}
		}
		return fmt.Errorf("the longest row so far is shorter; the last failure: %s", cmp.Or(last, "none"))
	})
}

// clusterFigures are what a fault cost.
type clusterFigures struct {
	messages, invokes int
	// ingressStop is the longest a message took to be accepted, its
	// refused POSTs repeated included; ingressFailed counts the refused
	// or failed POSTs.
	ingressStop   time.Duration
	ingressFailed int64
	// deliveryStop is the longest a message waited between its 2xx and
	// its arrival at the webhook; deliveryP50 the median, in ms.
	deliveryStop time.Duration
	deliveryP50  float64
	// duplicates counts the deliveries that came again meanwhile, of this
	// load's messages or earlier ones.
	duplicates int
	// rpcFailRun is the longest run of invokes that failed one after the
	// other (rpcFailRow of them), from the first's sending to the sending
	// of the completed one that ended it; rpcDisrupted runs from the first
	// failed invoke's sending to the sending of the first completed one
	// after the last that failed, however many completed between them;
	// rpcSlowest is the longest any invoke took to be answered.
	rpcFailRun, rpcDisrupted, rpcSlowest time.Duration
	rpcFailed, rpcFailRow                int
}

// figures computes the load's figures once it has ended.
func (l *clusterLoad) figures() clusterFigures {
	run := l.run
	res := l.c.pb.result(run)
	received := l.c.pb.rcv.receivedTimes(run)
	f := clusterFigures{messages: res.messages, deliveryP50: res.p50, ingressFailed: run.retried.Load()}
	for i := range run.n {
		if !run.counted[i] {
			continue
		}
		f.ingressStop = max(f.ingressStop, run.accepted[i].Sub(run.sent[i]))
		f.deliveryStop = max(f.deliveryStop, received[i].Sub(run.accepted[i]))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f.invokes = len(l.calls)
	// ended is when a run of failures from call i on ended: the next
	// call's sending, or the last answer when none came after.
	ended := func(i int) time.Time {
		if i+1 < len(l.calls) {
			return l.calls[i+1].sent
		}
		return l.calls[i].answered
	}
	firstFailed, runFrom := -1, -1
	for i, call := range l.calls {
		f.rpcSlowest = max(f.rpcSlowest, call.answered.Sub(call.sent))
		if call.failure == "" {
			runFrom = -1
			continue
		}
		f.rpcFailed++
		if firstFailed < 0 {
			firstFailed = i
		}
		if runFrom < 0 {
			runFrom = i
		}
		if run := ended(i).Sub(l.calls[runFrom].sent); run > f.rpcFailRun {
			f.rpcFailRun, f.rpcFailRow = run, i-runFrom+1
		}
		f.rpcDisrupted = ended(i).Sub(l.calls[firstFailed].sent)
	}
	return f
}
