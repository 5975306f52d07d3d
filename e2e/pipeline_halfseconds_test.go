package e2e

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// -pipeline.windows breaks each run down by the half second in which its
// counted messages were accepted (since the run's start), to tell a
// steady slowdown from a few stalls and to put each stall beside what
// the machine did meanwhile: for the messages of the half second, how
// many, their latency's p99 and maximum and their ingress p99; for the
// same half second, the machine's CPU busy share (/proc/stat), the share
// of a core that messaging, the dispatcher (the first process of each)
// and PostgreSQL used, and the disks' cache flushes (one per fsync
// reaching the device, PostgreSQL's commits among them) with their mean
// time (/proc/diskstats). Printed as "window <line> ..." lines, then the
// run's three slowest half seconds beside the median one.
var pipelineWindows = flag.Bool("pipeline.windows", false, "print each run's half seconds: the counted messages' latency beside the machine's CPU busy share, the services' CPU and the disks' flushes with their mean time")

// windowWidth is the width of a -pipeline.windows window.
const windowWidth = 500 * time.Millisecond

// machineSample is what the machine had done by at: CPU jiffies busy and
// in all, and its whole disks' flush requests and milliseconds spent on
// them (the kernel counts both since 5.5; zero before).
type machineSample struct {
	at               time.Time
	busy, total      uint64
	flushes, flushMS uint64
	writes, writeMS  uint64
	ok               bool
	// CPU seconds so far of the first messaging and dispatcher processes
	// and of PostgreSQL's.
	messaging, dispatcher, postgres float64
}

// sampleMachine reads /proc/stat, /proc/diskstats and the CPU of
// messaging, the dispatcher and PostgreSQL; on a machine without them
// the sample says so and the windows print no machine figures.
func (pb *pipelineBench) sampleMachine() machineSample {
	s := machineSample{at: time.Now(), postgres: serverCPU("postgres")}
	if len(pb.messagings) > 0 {
		_, s.messaging = procCPU(strconv.Itoa(pb.messagings[0].cmd.Process.Pid))
	}
	if len(pb.dispatchers) > 0 {
		_, s.dispatcher = procCPU(strconv.Itoa(pb.dispatchers[0].cmd.Process.Pid))
	}
	stat, err1 := os.ReadFile("/proc/stat")
	disks, err2 := os.ReadFile("/proc/diskstats")
	if err1 != nil || err2 != nil {
		return s
	}
	for line := range strings.Lines(string(stat)) {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] != "cpu" {
			continue
		}
		for i, v := range f[1:] {
			n, _ := strconv.ParseUint(v, 10, 64)
			s.total += n
			if i != 3 && i != 4 { // idle, iowait
				s.busy += n
			}
		}
	}
	for line := range strings.Lines(string(disks)) {
		f := strings.Fields(line)
		if len(f) < 11 || !wholeDisk(f[2]) {
			continue
		}
		field := func(i int) uint64 {
			if i >= len(f) {
				return 0
			}
			n, _ := strconv.ParseUint(f[i], 10, 64)
			return n
		}
		s.writes, s.writeMS = s.writes+field(7), s.writeMS+field(10)
		s.flushes, s.flushMS = s.flushes+field(18), s.flushMS+field(19)
	}
	s.ok = true
	return s
}

// wholeDisk says whether a /proc/diskstats name is a whole virtual, SCSI
// or NVMe disk, not one of its partitions, a loop or a RAM device.
func wholeDisk(name string) bool {
	switch {
	case strings.HasPrefix(name, "nvme"):
		return !strings.Contains(strings.TrimPrefix(name, "nvme"), "p")
	case strings.HasPrefix(name, "vd"), strings.HasPrefix(name, "sd"), strings.HasPrefix(name, "xvd"):
		last := name[len(name)-1]
		return last < '0' || last > '9'
	}
	return false
}

// runWindow is one half second of a run's schedule.
type runWindow struct {
	from                 time.Duration // since the run's start
	messages             int
	p99, max, ingressP99 float64 // ms
	cpuBusy              float64 // %, -1 unknown
	// the share of one core each used, %: messaging, the dispatcher
	// (each a process of GOMAXPROCS 1) and PostgreSQL
	messaging, dispatcher, postgres float64
	flushes                         uint64
	flushMS, writeMSPerIO           float64 // mean ms a flush, a write; -1 unknown
}

// windows breaks run down by half second of accepted time, with the
// machine's samples taken meanwhile (in time order).
func (pb *pipelineBench) windows(run *pipelineRun, samples []machineSample) []runWindow {
	return halfSeconds(run, pb.rcv.receivedTimes(run), samples)
}

// halfSeconds is windows over the times the receiver saw each message.
func halfSeconds(run *pipelineRun, received []time.Time, samples []machineSample) []runWindow {
	lat, ingress := map[int][]time.Duration{}, map[int][]time.Duration{}
	last := 0
	for i := range run.n {
		if !run.counted[i] || run.accepted[i].IsZero() {
			continue
		}
		k := int(run.accepted[i].Sub(run.start) / windowWidth)
		if k < 0 {
			continue
		}
		lat[k] = append(lat[k], max(0, received[i].Sub(run.accepted[i])))
		ingress[k] = append(ingress[k], run.accepted[i].Sub(run.sent[i]))
		last = max(last, k)
	}
	out := make([]runWindow, last+1)
	for k := range out {
		w := runWindow{from: time.Duration(k) * windowWidth, cpuBusy: -1, flushMS: -1, writeMSPerIO: -1}
		if l := lat[k]; len(l) > 0 {
			slices.Sort(l)
			slices.Sort(ingress[k])
			w.messages, w.p99, w.max = len(l), percentileMS(l, 0.99), percentileMS(l, 1)
			w.ingressP99 = percentileMS(ingress[k], 0.99)
		}
		from, to := run.start.Add(w.from), run.start.Add(w.from+windowWidth)
		if a, b, ok := samplesAround(samples, from, to); ok {
			if dt := b.total - a.total; dt > 0 {
				w.cpuBusy = 100 * float64(b.busy-a.busy) / float64(dt)
			}
			if span := b.at.Sub(a.at).Seconds(); span > 0 {
				share := func(x, y float64) float64 { return 100 * (y - x) / span }
				w.messaging, w.dispatcher, w.postgres = share(a.messaging, b.messaging), share(a.dispatcher, b.dispatcher), share(a.postgres, b.postgres)
			}
			w.flushes = b.flushes - a.flushes
			if w.flushes > 0 {
				w.flushMS = float64(b.flushMS-a.flushMS) / float64(w.flushes)
			}
			if n := b.writes - a.writes; n > 0 {
				w.writeMSPerIO = float64(b.writeMS-a.writeMS) / float64(n)
			}
		}
		out[k] = w
	}
	return out
}

// samplesAround returns the last sample at or before from and the first
// at or after to: the machine's work over a span covering [from, to].
func samplesAround(samples []machineSample, from, to time.Time) (a, b machineSample, ok bool) {
	i := -1
	for k, s := range samples {
		if !s.ok {
			return a, b, false
		}
		if !s.at.After(from) {
			i = k
		}
		if !s.at.Before(to) && i >= 0 {
			return samples[i], s, true
		}
	}
	return a, b, false
}

// printWindows prints the run's windows (pipelineWindows) and its three
// slowest beside the median one.
func printWindows(name string, ws []runWindow) {
	figure := func(v float64, format string) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	line := func(w runWindow) string {
		return fmt.Sprintf("%5.1fs  msgs %4d  p99 %7.1f ms  max %7.1f ms  ingress-p99 %7.1f ms  cpu-busy %5s %%  messaging %3.0f %%  dispatcher %3.0f %%  postgres %3.0f %%  flushes %4d  ms/flush %6s  ms/write %6s",
			w.from.Seconds(), w.messages, w.p99, w.max, w.ingressP99, figure(w.cpuBusy, "%.0f"), w.messaging, w.dispatcher, w.postgres,
			w.flushes, figure(w.flushMS, "%.2f"), figure(w.writeMSPerIO, "%.2f"))
	}
	for _, w := range ws {
		fmt.Printf("window %s %s\n", name, line(w))
	}
	byMax := slices.Clone(ws)
	slices.SortFunc(byMax, func(x, y runWindow) int { return cmp.Compare(y.max, x.max) })
	for i := range min(3, len(byMax)) {
		fmt.Printf("window %s slowest %s\n", name, line(byMax[i]))
	}
	if len(byMax) > 0 {
		fmt.Printf("window %s median  %s\n", name, line(byMax[len(byMax)/2]))
	}
}

// TestHalfSecondsBreakARunDown: messages go to the half second they were
// accepted in, uncounted ones are left out, and each half second gets
// the machine's work over the samples around it; a half second without
// samples around it says so (-1).
func TestHalfSecondsBreakARunDown(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	run := &pipelineRun{start: start, n: 4,
		counted:  []bool{true, true, false, true},
		sent:     []time.Time{at(90), at(390), at(100), at(690)},
		accepted: []time.Time{at(100), at(400), at(110), at(700)},
	}
	received := []time.Time{at(110), at(450), at(5000), at(703)}
	samples := []machineSample{
		{at: at(0), busy: 0, total: 0, flushes: 0, flushMS: 0, writes: 0, writeMS: 0, messaging: 0, ok: true},
		{at: at(500), busy: 60, total: 100, flushes: 10, flushMS: 20, writes: 4, writeMS: 2, messaging: 0.25, ok: true},
	}
	ws := halfSeconds(run, received, samples)
	if len(ws) != 2 {
		t.Fatalf("%d half seconds, want 2: %+v", len(ws), ws)
	}
	first, second := ws[0], ws[1]
	if first.messages != 2 || first.max != 50 || first.p99 != 50 || first.ingressP99 != 10 {
		t.Errorf("first half second %+v, want the two counted messages: p99 and max 50 ms, ingress p99 10 ms", first)
	}
	if first.cpuBusy != 60 || first.flushes != 10 || first.flushMS != 2 || first.writeMSPerIO != 0.5 || first.messaging != 50 {
		t.Errorf("first half second's machine %+v, want 60 %% busy, 10 flushes of 2 ms, 0.5 ms a write, messaging at 50 %% of a core", first)
	}
	if second.messages != 1 || second.max != 3 || second.cpuBusy != -1 || second.flushMS != -1 {
		t.Errorf("second half second %+v, want one message of 3 ms and no machine figures (no sample after it)", second)
	}
}

// TestWholeDisk tells disks from their partitions and other devices.
func TestWholeDisk(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"vda": true, "sda": true, "xvdb": true, "nvme0n1": true,
		"vda1": false, "sda2": false, "nvme0n1p1": false, "loop0": false, "ram0": false, "dm-0": false} {
		if got := wholeDisk(name); got != want {
			t.Errorf("wholeDisk(%q) = %v, want %v", name, got, want)
		}
	}
}
