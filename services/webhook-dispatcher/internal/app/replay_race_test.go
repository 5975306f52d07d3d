package app_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// heldSender is a receiver that answers when the test says so: each POST
// comes out of calls and waits for its answer on reply.
type heldSender struct{ calls chan heldCall }

type heldCall struct {
	req   delivery.Request
	reply chan delivery.Result
}

func (s *heldSender) Send(ctx context.Context, r delivery.Request) delivery.Result {
	c := heldCall{req: r, reply: make(chan delivery.Result)}
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return delivery.Result{Error: ctx.Err().Error()}
	}
	select {
	case res := <-c.reply:
		return res
	case <-ctx.Done():
		return delivery.Result{Error: ctx.Err().Error()}
	}
}

// next is the next POST the receiver gets.
func (s *heldSender) next(t *testing.T) heldCall {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no POST came")
		return heldCall{}
	}
}

// A replay of an event that live delivery is still sending races it:
// both rounds send, under the same id. Whichever round writes its outcome
// last, and whatever either wrote on the way, the log ends with every
// attempt the receiver got, oldest first, each with the answer it got,
// the latest attempt's answer, and delivered when either round delivered
// it (docs/webhooks.md "Replaying events"). The live round's first
// attempt is held at the receiver while the replay claims the delivery
// and sends; the replay's last attempt is held until the live round has
// written its outcome, or the other way round.
func TestAReplayRacingLiveDeliveryKeepsEveryAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// live and replay are the receiver's answers to each round's
		// attempts.
		live, replay []delivery.Result
		// liveLast: the live round writes its outcome after the replay.
		liveLast bool
		want     delivery.Status
	}{
		{"the replay's outcome written last", []delivery.Result{answered200}, []delivery.Result{answered200}, false, delivery.StatusDelivered},
		{"live delivery's outcome written last", []delivery.Result{answered200}, []delivery.Result{answered200}, true, delivery.StatusDelivered},
		{"the replay fails after live delivery delivered", []delivery.Result{answered200}, []delivery.Result{answered500, answered500}, false, delivery.StatusDelivered},
		{"live delivery fails after the replay delivered", []delivery.Result{answered500, answered500}, []delivery.Result{answered200}, true, delivery.StatusDelivered},
		{"both fail", []delivery.Result{answered500, answered500}, []delivery.Result{answered500, answered500}, false, delivery.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sender := &heldSender{calls: make(chan heldCall)}
			c := newDeliveryCaseSending(t, app.Policy{
				RetryDelays: []time.Duration{10 * time.Millisecond}, AttemptTimeout: time.Minute,
				PauseAfter: 20, PendingAfter: time.Minute,
			}, sender)
			ev := c.event()

			liveDone, replayDone := make(chan error, 1), make(chan error, 1)
			go func() { liveDone <- c.app.DeliverEvent(t.Context(), ev, false, nil) }()
			live := sender.next(t)
			go func() { replayDone <- c.replays.ReplayEvent(t.Context(), ev, nil) }()
			for _, res := range tt.replay[:len(tt.replay)-1] {
				sender.next(t).reply <- res
			}
			replayLast := sender.next(t)

			finishLive := func() {
				live.reply <- tt.live[0]
				for _, res := range tt.live[1:] {
					sender.next(t).reply <- res
				}
				if err := <-liveDone; err != nil {
					t.Fatalf("DeliverEvent = %v", err)
				}
			}
			finishReplay := func() {
				replayLast.reply <- tt.replay[len(tt.replay)-1]
				if err := <-replayDone; err != nil {
					t.Fatalf("ReplayEvent = %v", err)
				}
			}
			if tt.liveLast {
				finishReplay()
				finishLive()
			} else {
				finishLive()
				finishReplay()
			}
			select {
			case extra := <-sender.calls:
				t.Fatalf("a POST beyond both rounds' attempts: %+v", extra.req)
			default:
			}

			// In the order they were sent: the live round's first
			// attempt, the replay's, then the live round's retries.
			sent := append(append([]delivery.Result{tt.live[0]}, tt.replay...), tt.live[1:]...)
			var want, got []int
			for _, res := range sent {
				want = append(want, res.Status)
			}
			d := c.stored(t, ev.GetId())
			for i, at := range d.History {
				got = append(got, at.ResponseStatus)
				if at.Number != i+1 {
					t.Errorf("attempt %d numbered %d", i+1, at.Number)
				}
			}
			if d.Attempts != len(sent) || !slices.Equal(got, want) {
				t.Fatalf("log holds %d attempts answered %v, the receiver got %d answered %v", d.Attempts, got, len(sent), want)
			}
			if d.Status != tt.want || d.ResponseStatus == nil || *d.ResponseStatus != want[len(want)-1] ||
				(d.Status == delivery.StatusDelivered) != (d.DeliveredAt != nil) {
				t.Fatalf("stored %s, response_status %v, delivered_at %v; want %s after the latest answer %d",
					d.Status, d.ResponseStatus, d.DeliveredAt, tt.want, want[len(want)-1])
			}
		})
	}
}
