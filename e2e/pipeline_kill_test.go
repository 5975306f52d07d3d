package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The kill lines of BenchmarkPipeline: the paced run again, one process
// of each service, during which one process is killed with SIGKILL (no
// shutdown code runs) at a random moment between a fifth and three fifths
// of the schedule, and started again at once on the same address:
//
//   - pipeline-kill/messaging kills messaging under load, so that what it
//     has committed and not yet handed to the stream (the outbox's
//     backlog, outbox-at-kill) is left to the restarted process. The
//     POSTs it had not answered fail; each is sent again, as Telegram
//     does, until it is accepted (retried-posts), and an update stored
//     before the kill must not be stored twice;
//   - pipeline-kill/dispatcher has the receiver hold its answers until
//     the dispatcher has every attempt it can run in flight (or a second
//     has passed), kills it with those deliveries posted and their
//     outcomes not yet written (held-at-kill), and then answers them,
//     to nobody. The restarted dispatcher gets them again from the
//     stream after its consumer's ack wait, and sends them again.
//
// The no-loss check is the benchmark's own, by delivery id at the
// receiver: every accepted message must arrive, under one delivery id;
// the same id arriving again is counted (duplicates), as the
// at-least-once delivery docs/webhooks.md "Answering a delivery"
// promises, and is allowed in these lines only; and the delivery log must
// hold every delivery as delivered (for the dispatcher's line within
// -pipeline.settle, as the ack wait comes first). Each line then waits until the dispatchers'
// consumer has nothing pending, so that no redelivery reaches a later
// line. They report restart-ms (from the SIGKILL to the new process's
// /readyz) beside what every run reports.
var pipelineKillMessages = flag.Int("pipeline.kill-messages", 10000, "messages of each kill line (pipeline-kill/messaging, pipeline-kill/dispatcher)")

// ownedBy is a sub-benchmark whose cleanups, and their logs, go to owner:
// a process a kill line starts in place of one the whole benchmark uses
// must run on after the line.
type ownedBy struct {
	testing.TB
	owner testing.TB
}

func (o ownedBy) Cleanup(f func())                { o.owner.Cleanup(f) }
func (o ownedBy) Logf(format string, args ...any) { o.owner.Logf(format, args...) }

// killMessaging is pipeline-kill/messaging; parent is the benchmark the
// restarted messaging serves to its end.
func (pb *pipelineBench) killMessaging(parent *testing.B) func(*testing.B) {
	return func(b *testing.B) {
		run := pb.newRun(*pipelineKillMessages, nil)
		run.atLeastOnce, run.retry = true, true
		var backlog int64
		var down time.Duration
		pb.killRun(b, run, func() {
			var err error
			if backlog, err = pb.outboxBacklog(context.Background()); err != nil {
				b.Fatalf("outbox backlog: %v", err)
			}
			start := time.Now()
			victim := pb.messagings[0]
			pb.gone.messaging += pb.killed(b, victim)
			pb.messagings[0] = pb.restarted(b, parent, victim)
			down = time.Since(start)
		})
		b.ReportMetric(float64(backlog), "outbox-at-kill")
		b.ReportMetric(float64(down.Milliseconds()), "restart-ms")
		b.ReportMetric(float64(run.retried.Load()), "retried-posts")
	}
}

// killDispatcher is pipeline-kill/dispatcher; parent is the benchmark the
// restarted dispatcher serves to its end.
func (pb *pipelineBench) killDispatcher(parent *testing.B) func(*testing.B) {
	return func(b *testing.B) {
		run := pb.newRun(*pipelineKillMessages, nil)
		run.atLeastOnce = true
		// The held deliveries come back after the consumer's ack wait (a
		// round of attempts plus 30 s, over a minute at the defaults).
		run.logWait = *pipelineSettle
		var held int
		var down time.Duration
		pb.killRun(b, run, func() {
			pb.rcv.gate.Hold()
			defer pb.rcv.gate.Release()
			held = pb.inFlight()
			start := time.Now()
			victim := pb.dispatchers[0]
			pb.gone.dispatcher += pb.killed(b, victim)
			pb.rcv.gate.Release()
			pb.dispatchers[0] = pb.restarted(b, parent, victim)
			down = time.Since(start)
		})
		if held == 0 {
			b.Fatal("no delivery was in flight when the dispatcher was killed")
		}
		b.ReportMetric(float64(held), "held-at-kill")
		b.ReportMetric(float64(down.Milliseconds()), "restart-ms")
	}
}

// killRun sends run at the paced rate, calls kill at a random moment
// between a fifth and three fifths of its schedule, settles it as every
// run (measure), reports the duplicates, waits until the dispatchers'
// consumer has nothing pending, and returns the run's result.
func (pb *pipelineBench) killRun(b *testing.B, run *pipelineRun, kill func()) pipelineResult {
	rate := pb.pacedRate()
	res, _ := pb.measure(b, run, func(run *pipelineRun) error {
		sent := make(chan error, 1)
		go func() { sent <- pb.sendPaced(run, rate) }()
		schedule := time.Duration(run.n) * time.Second / time.Duration(rate)
		select {
		case err := <-sent:
			if err != nil {
				return err
			}
			return errors.New("every message was sent before the kill")
		case <-time.After(time.Duration((0.2 + 0.4*rand.Float64()) * float64(schedule))):
		}
		kill()
		return <-sent
	})
	b.ReportMetric(0, "ns/op") // the schedule sets the pace, not the cost
	b.ReportMetric(float64(rate), "rate-msg/s")
	b.ReportMetric(float64(pb.rcv.duplicates(run)), "duplicates")
	if err := pb.drained(*pipelineSettle); err != nil {
		b.Fatal(err)
	}
	return res
}

// killed SIGKILLs p and returns the CPU seconds it had used, which its
// successor's counter will not hold.
func (pb *pipelineBench) killed(b *testing.B, p *proc) float64 {
	b.Helper()
	used := max(0, metric(p.addr, processCPU))
	p.kill(b)
	return used
}

// restarted starts victim's service again (suite.restart), for the rest
// of parent, and puts it in victim's place among the suite's processes.
func (pb *pipelineBench) restarted(b, parent *testing.B, victim *proc) *proc {
	b.Helper()
	again := pb.s.restart(ownedBy{b, parent}, victim)
	pb.procsMu.Lock()
	defer pb.procsMu.Unlock()
	if pb.s.procs[victim.name] == victim {
		pb.s.procs[victim.name] = again
	}
	return again
}

// inFlight waits, once the receiver holds its answers, until the
// dispatcher has as many deliveries in flight as it will have (no new
// one for 200 ms) or a second has passed, and returns how many.
func (pb *pipelineBench) inFlight() int {
	deadline := time.Now().Add(time.Second)
	n, since := 0, time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if now := pb.rcv.gate.Waiting(); now != n {
			n, since = now, time.Now()
		} else if n > 0 && time.Since(since) >= 200*time.Millisecond {
			break
		}
	}
	return pb.rcv.gate.Waiting()
}

// drained waits, at most within, until the dispatchers' consumer has no
// message pending or awaiting its ack.
func (pb *pipelineBench) drained(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		cons, err := pb.js.Consumer(ctx, pb.queue.stream, pb.queue.consumer)
		if err == nil {
			info, ierr := cons.Info(ctx)
			if ierr == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
			err = ierr
			if err == nil {
				err = fmt.Errorf("%d pending, %d awaiting their ack", info.NumPending, info.NumAckPending)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer %s not drained within %s: %v", pb.queue.consumer, within, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
