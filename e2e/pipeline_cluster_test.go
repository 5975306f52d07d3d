package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// The cluster lines of BenchmarkPipeline: the same pipeline on a NATS
// cluster of -pipeline.cluster nats-servers of its own (natscluster), with
// as many replicas of every stream (EVENTS_REPLICAS), so that the cost of
// replication is a ratio measured in the same run. A second suite, on the
// cluster, serves as many workspaces and customers as the first; it is
// stopped once the lines are done.
//
//   - cluster<n>/pipeline-max: pipeline-max/instances=1 on the cluster,
//     reported as every throughput run is, nats-cpu-ms counting the
//     cluster's own servers (and no other nats-server), and beside it
//     ratio-to-one-server (its messages/s over pipeline-max/instances=1's)
//     and cpu-ratio-to-one-server (its total-cpu-ms over that line's);
//   - cluster<n>/pipeline-kill/stream-leader: the kill lines' paced run,
//     at half of the cluster's pipeline-max rate, during which the server
//     leading the events stream gets SIGKILL and is started again at once
//     (restart-ms, to its being healthy and caught up): max-latency-ms is
//     the longest a message waited between its ingress 2xx and its
//     webhook, the pause the fault made, and duplicates the deliveries
//     that came again.
func (pb *pipelineBench) onCluster(b *testing.B) {
	n := *pipelineCluster
	cluster := natscluster.Start(b, n)
	_, botAPI := telegramfake.Start(b)
	s := startSuiteEnv(b, []testenv.Option{testenv.NATS(cluster.URL())}, nil, benchServices(fmt.Sprintf("EVENTS_REPLICAS=%d", n),
		"TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")...)
	pc := newWebhookBench(b, s, len(pb.spaces), int(pb.customers))
	pc.natsCPU = func() float64 {
		total := 0.0
		for _, srv := range cluster.Servers() {
			if pid := srv.Pid(); pid != 0 {
				_, seconds := procCPU(strconv.Itoa(pid))
				total += seconds
			}
		}
		return total
	}
	pc.floorHTTP, pc.floorPGJS = pb.floorHTTP, pb.floorPGJS
	pc.warm(b)

	b.Run("pipeline-max", func(b *testing.B) {
		rate, cpuMS := pc.maxOf(b, *pipelineMessages)
		pc.maxRate = rate
		if pb.maxRate > 0 {
			b.ReportMetric(rate/pb.maxRate, "ratio-to-one-server")
			b.ReportMetric(cpuMS/pb.maxCPU, "cpu-ratio-to-one-server")
		}
	})
	b.Run("pipeline-kill/stream-leader", pc.killStreamLeader(cluster))
}

// killStreamLeader is cluster<n>/pipeline-kill/stream-leader.
func (pb *pipelineBench) killStreamLeader(cluster *natscluster.Cluster) func(*testing.B) {
	return func(b *testing.B) {
		run := pb.newRun(*pipelineKillMessages, nil)
		run.atLeastOnce, run.retry = true, true
		var down time.Duration
		res := pb.killRun(b, run, func() {
			leader := cluster.StreamLeader(b, pb.s.env.Stream.Name)
			// Its successor's counter starts from nothing.
			_, used := procCPU(strconv.Itoa(leader.Pid()))
			pb.gone.nats += used
			start := time.Now()
			leader.Kill(b)
			leader.Restart(b)
			down = time.Since(start)
		})
		b.ReportMetric(float64(down.Milliseconds()), "restart-ms")
		b.ReportMetric(float64(res.longest.Milliseconds()), "max-latency-ms")
	}
}
