package isolation

import (
	"strings"
	"testing"
	"time"
)

var policy = Policy{After: 5, CoolDown: 10 * time.Second}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// clock is a test's time, moved by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *clock                   { return &clock{now: t0} }

// fail sends n attempts through b one after another, none answered.
func fail(t *testing.T, b *Breaker, n int, now time.Time) (opened bool) {
	t.Helper()
	for range n {
		p, err := b.Allow(policy, now)
		if err != nil {
			t.Fatalf("Allow refused while %s: %v", b.State(), err)
		}
		opened = b.Record(policy, p, false, "no complete response within 10s", now)
	}
	return opened
}

func TestBreakerOpensAfterNAttemptsInARowWithoutAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// outcomes in order: 'x' no answer, 'a' answered (any status)
		give string
		want State
	}{
		{"four without answer stay closed", "xxxx", Closed},
		{"the fifth opens", "xxxxx", Open},
		{"an answer starts the count again", "xxxxaxxxx", Closed},
		{"answers only", "aaaaaaa", Closed},
		{"five after an answer open", "axxxxx", Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b Breaker
			for i, o := range tt.give {
				p, err := b.Allow(policy, t0)
				if err != nil {
					t.Fatalf("outcome %d: refused: %v", i+1, err)
				}
				b.Record(policy, p, o == 'a', "timeout", t0)
			}
			if b.State() != tt.want {
				t.Fatalf("after %q: %s, want %s", tt.give, b.State(), tt.want)
			}
		})
	}
}

// While open, every attempt is refused at once with a reason that says
// what happened and until when; the cool-down is counted from the opening.
func TestOpenCircuitRefusesUntilTheCoolDownEnds(t *testing.T) {
	t.Parallel()
	c := newClock()
	var b Breaker
	if !fail(t, &b, 5, c.Now()) {
		t.Fatal("the fifth attempt without answer did not report the opening")
	}
	until := c.Now().Add(policy.CoolDown)
	for _, d := range []time.Duration{0, time.Second, policy.CoolDown - time.Millisecond} {
		_, err := b.Allow(policy, c.Now().Add(d))
		if err == nil {
			t.Fatalf("%s after opening: allowed", d)
		}
		if err.NoAnswer != 5 || !err.Until.Equal(until) || err.Probing || err.Last != "no complete response within 10s" {
			t.Fatalf("%s after opening: %+v", d, err)
		}
		if check := b.Check(policy, c.Now().Add(d)); check == nil {
			t.Fatalf("%s after opening: Check finds it closed", d)
		}
	}
	want := "not sent: the receiver gave no answer to the last 5 attempts (no complete response within 10s); circuit open until 2026-11-22T10:00:10.000Z"
	if _, err := b.Allow(policy, c.Now()); err.Error() != want {
		t.Fatalf("refusal %q\nwant     %q", err.Error(), want)
	}
}

// After the cool-down one probe goes; every other attempt is refused
// until its outcome is known. An answer closes the circuit; none reopens
// it for another cool-down from then.
func TestHalfOpenLetsOneProbeThrough(t *testing.T) {
	t.Parallel()
	for _, answered := range []bool{true, false} {
		c := newClock()
		var b Breaker
		fail(t, &b, 5, c.Now())
		c.Advance(policy.CoolDown)
		if b.Check(policy, c.Now()) != nil {
			t.Fatal("Check refuses after the cool-down")
		}
		if b.State() != Open {
			t.Fatalf("Check changed the state to %s", b.State())
		}
		probe, err := b.Allow(policy, c.Now())
		if err != nil || !probe.Probe() || b.State() != HalfOpen {
			t.Fatalf("after the cool-down: %+v %v %s, want a probe, half-open", probe, err, b.State())
		}
		for range 3 {
			_, err := b.Allow(policy, c.Now().Add(time.Second))
			if err == nil || !err.Probing || !strings.Contains(err.Error(), "circuit half-open: a trial attempt is under way") {
				t.Fatalf("second attempt while probing: %v", err)
			}
		}
		c.Advance(3 * time.Second) // the probe's answer, or its timeout
		opened := b.Record(policy, probe, answered, "connection refused", c.Now())
		if answered {
			if opened || b.State() != Closed {
				t.Fatalf("answered probe: opened %v, %s; want closed", opened, b.State())
			}
			// Closed means counting from zero: four more stay closed.
			fail(t, &b, 4, c.Now())
			if b.State() != Closed {
				t.Fatalf("four attempts after the close: %s", b.State())
			}
			continue
		}
		if !opened || b.State() != Open {
			t.Fatalf("unanswered probe: opened %v, %s; want open again", opened, b.State())
		}
		_, err = b.Allow(policy, c.Now().Add(policy.CoolDown-time.Millisecond))
		if err == nil || err.NoAnswer != 6 || err.Last != "connection refused" || !err.Until.Equal(c.Now().Add(policy.CoolDown)) {
			t.Fatalf("after the failed probe: %+v", err)
		}
		if _, err := b.Allow(policy, c.Now().Add(policy.CoolDown)); err != nil {
			t.Fatalf("no second probe after the second cool-down: %v", err)
		}
	}
}

// Attempts let through before the circuit opened may end after it: their
// outcomes, answered or not, do not move it. Only the probe decides.
func TestLateOutcomesDoNotMoveTheCircuit(t *testing.T) {
	t.Parallel()
	c := newClock()
	var b Breaker
	// Eight in flight at once (a webhook's whole share), none answering.
	var inFlight []Permit
	for range 8 {
		p, err := b.Allow(policy, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, p)
	}
	for i, p := range inFlight[:5] {
		if opened := b.Record(policy, p, false, "timeout", c.Now()); opened != (i == 4) {
			t.Fatalf("attempt %d: opened %v", i+1, opened)
		}
	}
	// One straggler answers, two more time out: still open, same until.
	b.Record(policy, inFlight[5], true, "", c.Now())
	b.Record(policy, inFlight[6], false, "timeout", c.Now())
	if b.State() != Open {
		t.Fatalf("a late answer moved the circuit to %s", b.State())
	}
	c.Advance(policy.CoolDown)
	probe, err := b.Allow(policy, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The last straggler, while the probe is out: ignored too.
	b.Record(policy, inFlight[7], true, "", c.Now())
	if b.State() != HalfOpen {
		t.Fatalf("a late answer while probing moved the circuit to %s", b.State())
	}
	if b.Record(policy, probe, false, "timeout", c.Now()); b.State() != Open {
		t.Fatalf("the failed probe left %s", b.State())
	}
}

func TestBreakerOffSendsEverything(t *testing.T) {
	t.Parallel()
	off := Policy{}
	var b Breaker
	for range 100 {
		p, err := b.Allow(off, t0)
		if err != nil {
			t.Fatal(err)
		}
		if b.Record(off, p, false, "timeout", t0) {
			t.Fatal("opened with the breaker off")
		}
		if b.Check(off, t0) != nil {
			t.Fatal("Check refuses with the breaker off")
		}
	}
}

// Circuits keeps one breaker per setup: a webhook saved again (a new key)
// starts closed while the old setup's circuit stays open for the old
// attempts; NotClosed counts the open ones; a circuit nobody asks about is
// forgotten.
func TestCircuitsPerSetup(t *testing.T) {
	t.Parallel()
	c := newClock()
	cs := NewCircuits(policy, c.Now)
	record := func(key string, n int) {
		for range n {
			p, err := cs.Allow(key)
			if err != nil {
				t.Fatalf("%s refused: %v", key, err)
			}
			cs.Record(key, p, false, "timeout")
		}
	}
	record("hook-1/secret-a", 5)
	if cs.State("hook-1/secret-a") != Open || cs.NotClosed() != 1 {
		t.Fatalf("after 5: %s, %d not closed", cs.State("hook-1/secret-a"), cs.NotClosed())
	}
	if cs.Check("hook-1/secret-a") == nil {
		t.Fatal("Check allows an open circuit")
	}
	if _, err := cs.Allow("hook-1/secret-a"); err == nil {
		t.Fatal("open circuit allowed an attempt")
	}
	// Saved again: a new secret, a new circuit, closed.
	if _, err := cs.Allow("hook-1/secret-b"); err != nil {
		t.Fatalf("the new setup is refused: %v", err)
	}
	if cs.Check("hook-1/secret-b") != nil || cs.State("hook-1/secret-b") != Closed {
		t.Fatal("the new setup is not closed")
	}
	record("hook-2/secret-c", 4)
	if cs.NotClosed() != 1 {
		t.Fatalf("%d not closed, want 1", cs.NotClosed())
	}

	// The probe answers: closed, and counted so.
	c.Advance(policy.CoolDown)
	probe, err := cs.Allow("hook-1/secret-a")
	if err != nil || !probe.Probe() || cs.NotClosed() != 1 {
		t.Fatalf("probe %v %v, %d not closed", probe, err, cs.NotClosed())
	}
	cs.Record("hook-1/secret-a", probe, true, "")
	if cs.State("hook-1/secret-a") != Closed || cs.NotClosed() != 0 {
		t.Fatalf("after the answered probe: %s, %d not closed", cs.State("hook-1/secret-a"), cs.NotClosed())
	}

	// hook-3 opens, then nobody asks about it for forgetAfter: forgotten,
	// and with it the open count.
	record("hook-3/secret-d", 5)
	if cs.NotClosed() != 1 {
		t.Fatalf("%d not closed, want 1", cs.NotClosed())
	}
	c.Advance(forgetAfter)
	if _, err := cs.Allow("hook-4/secret-e"); err != nil {
		t.Fatal(err)
	}
	if cs.State("hook-3/secret-d") != Closed || cs.NotClosed() != 0 {
		t.Fatalf("idle circuit kept: %s, %d not closed", cs.State("hook-3/secret-d"), cs.NotClosed())
	}
	// hook-2's count of 4 went with it: five more are needed to open.
	record("hook-2/secret-c", 4)
	if cs.State("hook-2/secret-c") != Closed {
		t.Fatal("a forgotten count was kept")
	}
}

func TestCircuitsOffKeepNothing(t *testing.T) {
	t.Parallel()
	cs := NewCircuits(Policy{}, newClock().Now)
	for range 10 {
		p, err := cs.Allow("k")
		if err != nil {
			t.Fatal(err)
		}
		cs.Record("k", p, false, "timeout")
	}
	if cs.State("k") != Closed || cs.NotClosed() != 0 || len(cs.m) != 0 {
		t.Fatal("the breaker is off, yet it kept state")
	}
}
