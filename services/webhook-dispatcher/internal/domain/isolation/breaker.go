// Package isolation keeps one receiver's trouble from reaching the others
// (issue 11): a Gate gives each webhook a fair share of an instance's HTTP
// attempts in flight, and a Breaker per webhook stops sending to a
// receiver that keeps giving no answer, so its attempts fail at once
// instead of each holding a place for the whole attempt timeout.
//
// Both are in memory and per instance: what one instance has learnt about
// a receiver costs another at most the few attempts it takes to learn it
// too. Neither knows about NATS, HTTP or storage; time is passed in.
package isolation

import (
	"fmt"
	"time"
)

// State is where a circuit stands.
type State int

// Circuit states. Closed sends every attempt; Open sends none until its
// cool-down ends; HalfOpen has let one probe attempt through after the
// cool-down and sends no other until that probe's outcome is known.
const (
	Closed State = iota
	Open
	HalfOpen
)

// String names the state as logs and errors show it.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Policy configures the breakers (DISPATCHER_CIRCUIT_*).
type Policy struct {
	// After is how many attempts in a row that got no answer open the
	// circuit; 0 turns the breaker off (every attempt is sent).
	After int
	// CoolDown is how long an open circuit sends nothing before it lets
	// one probe through.
	CoolDown time.Duration
}

// Enabled reports whether the breaker ever opens.
func (p Policy) Enabled() bool { return p.After > 0 }

// Permit lets one attempt be sent; its outcome goes back to Record. A
// permit carries the opening it was given in, so the late outcomes of
// attempts sent before the circuit opened do not move it: only the probe
// decides.
type Permit struct {
	epoch uint64
	probe bool
}

// Probe reports whether the permit is the half-open circuit's one trial.
func (p Permit) Probe() bool { return p.probe }

// OpenError is the refusal of an attempt by a circuit that is not closed:
// the attempt is not sent and counts as failed.
type OpenError struct {
	// NoAnswer is how many attempts in a row got no answer.
	NoAnswer int
	// Last is the last of those attempts' error.
	Last string
	// Until is when the cool-down ends.
	Until time.Time
	// Probing is set while a probe attempt is under way (half-open).
	Probing bool
}

// Error is the refusal as the delivery log shows it: what the receiver
// did, and until when attempts are not sent.
func (e *OpenError) Error() string {
	why := fmt.Sprintf("not sent: the receiver gave no answer to the last %d attempts", e.NoAnswer)
	if e.Last != "" {
		why += " (" + e.Last + ")"
	}
	if e.Probing {
		return why + "; circuit half-open: a trial attempt is under way"
	}
	return why + "; circuit open until " + e.Until.UTC().Format("2006-01-02T15:04:05.000Z")
}

// Breaker is the circuit of one webhook: it opens after Policy.After
// attempts in a row got no answer (a timeout or a transport error), sends
// nothing for Policy.CoolDown, then lets one probe through; an answer to
// the probe closes it, none reopens it.
//
// Any HTTP answer counts as an answer, a 5xx too: the breaker guards the
// instance's capacity, which only a receiver that keeps attempts waiting
// eats; a receiver that fails quickly costs nothing, and failed
// deliveries are the pause rule's business.
//
// The zero Breaker is closed. It is not safe for concurrent use
// (Circuits guards it).
type Breaker struct {
	state    State
	noAnswer int
	last     string
	until    time.Time
	epoch    uint64
}

// State is the breaker's state as of its last call; an open circuit
// whose cool-down has ended stays Open until an attempt asks.
func (b *Breaker) State() State { return b.state }

// Allow asks to send one attempt at now: a permit, or the refusal.
func (b *Breaker) Allow(p Policy, now time.Time) (Permit, *OpenError) {
	if !p.Enabled() {
		return Permit{epoch: b.epoch}, nil
	}
	switch b.state {
	case Open:
		if now.Before(b.until) {
			return Permit{}, b.refusal()
		}
		b.state = HalfOpen
		return Permit{epoch: b.epoch, probe: true}, nil
	case HalfOpen:
		return Permit{}, b.refusal()
	}
	return Permit{epoch: b.epoch}, nil
}

// Check is Allow without taking anything: the refusal Allow would give
// now, or nil. A nil may still be refused by Allow later (another
// attempt took the probe meanwhile).
func (b *Breaker) Check(p Policy, now time.Time) *OpenError {
	if !p.Enabled() {
		return nil
	}
	switch {
	case b.state == Open && now.Before(b.until), b.state == HalfOpen:
		return b.refusal()
	}
	return nil
}

func (b *Breaker) refusal() *OpenError {
	return &OpenError{NoAnswer: b.noAnswer, Last: b.last, Until: b.until, Probing: b.state == HalfOpen}
}

// Record takes the outcome of an attempt Allow permitted: answered when
// the receiver gave an HTTP answer (any status), otherwise noAnswerErr
// says what happened. It reports whether this outcome opened the circuit
// (again).
func (b *Breaker) Record(p Policy, permit Permit, answered bool, noAnswerErr string, now time.Time) (opened bool) {
	if !p.Enabled() || permit.epoch != b.epoch {
		return false
	}
	switch {
	case b.state == HalfOpen && !permit.probe, b.state == Open:
		// Sent before the circuit opened; the probe decides.
		return false
	case answered:
		b.state, b.noAnswer, b.last = Closed, 0, ""
		return false
	}
	b.noAnswer++
	b.last = noAnswerErr
	if b.state == HalfOpen || b.noAnswer >= p.After {
		b.state = Open
		b.until = now.Add(p.CoolDown)
		b.epoch++
		return true
	}
	return false
}
