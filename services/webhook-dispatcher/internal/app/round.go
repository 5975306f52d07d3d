package app

import (
	"context"
	"slices"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// DefaultPendingAfter is Policy.PendingAfter when it is not set.
const DefaultPendingAfter = time.Second

// round is one round of a delivery's attempts and what the log holds of
// it. A delivery taken on for the first time is not written before it is
// sent: a round settled within Policy.PendingAfter writes its row once,
// with the outcome (docs/architecture.md "Delivery semantics"). A longer
// round is written pending by its early write, or after its first failed
// attempt, and then updated. Another round of the same delivery (a replay,
// a second copy of the event) may write the row meanwhile: an update is
// made only on the row as this round last read or wrote it, and one that
// finds it written by the other round carries on from what it wrote.
type round struct {
	d *delivery.Delivery
	// stored says the log holds d's row, written or read by this round:
	// its next write is an update. Until then it is an insert.
	stored bool
	// read is how many attempts the row counted when this round last read
	// or wrote it; unsaved are the round's attempts the row does not hold.
	read    int
	unsaved []delivery.Attempt
	// early, while not nil, writes d pending once the round has been
	// under way for Policy.PendingAfter (its first attempt waiting for a
	// place or in flight, or its attempts refused by the circuit).
	early *earlyWrite
	// refused says d's last attempt was refused by the circuit and is
	// not stored yet (attempt stores those with the next write).
	refused bool
}

// earlyWrite is a round's pending row, written by a timer.
type earlyWrite struct {
	timer    *time.Timer
	done     chan struct{}
	existing *delivery.Delivery
	err      error
	// wrote is how many attempts the pending row counts.
	wrote int
}

// storedRound is a round over a delivery the log holds already, as read.
func storedRound(d *delivery.Delivery) *round { return &round{d: d, stored: true, read: d.Attempts} }

// record adds the round's attempt at to its delivery.
func (r *round) record(at delivery.Attempt) {
	r.d.Record(at)
	r.unsaved = append(r.unsaved, at)
}

// saved notes that the log holds r's delivery as it stands.
func (r *round) saved() {
	r.read, r.unsaved = r.d.Attempts, nil
}

// carryOn makes r's delivery continue stored, another round's record of
// it, which its next write updates.
func (r *round) carryOn(stored *delivery.Delivery) error {
	if stored.WorkspaceID != r.d.WorkspaceID {
		return replay.ForeignError(r.d.ID)
	}
	r.d.Continue(stored, r.unsaved)
	r.read = stored.Attempts
	return nil
}

// newRound is a round over a delivery not yet written: its row is written
// pending after Policy.PendingAfter unless the round has stored it (or
// ended its first attempt) by then.
func (a *App) newRound(d *delivery.Delivery) *round {
	r := &round{d: d}
	// The timer writes a copy: d is the round's to change.
	pending := *d
	pending.History = slices.Clone(d.History)
	w := &earlyWrite{done: make(chan struct{}), wrote: pending.Attempts}
	w.timer = time.AfterFunc(a.cfg.pendingAfter(), func() {
		defer close(w.done)
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		w.existing, w.err = a.deliveries.Insert(ctx, &pending, nil)
	})
	r.early = w
	return r
}

// stopEarlyWrite cancels r's early write, or waits for it to end, and says
// whether it ran.
func (a *App) stopEarlyWrite(r *round) (ran bool) {
	w := r.early
	if w == nil {
		return false
	}
	r.early = nil
	if w.timer.Stop() {
		return false
	}
	<-w.done
	return true
}

// endEarlyWrite stops r's early write and takes in what it found: the row
// it wrote, or the record of another round of the same delivery, which r
// then carries on from. A failed early write is only a missing view: the
// next write inserts the row.
func (a *App) endEarlyWrite(r *round) error {
	w := r.early
	if !a.stopEarlyWrite(r) {
		return nil
	}
	if w.err != nil {
		a.obs.ProgressNotStored(r.d, w.err)
		return nil
	}
	r.stored = true
	if w.existing != nil {
		return r.carryOn(w.existing)
	}
	r.read = w.wrote
	return nil
}

// save writes r's delivery as it stands, pending or settled: an update of
// its stored row (Finish with count once settled, else Progress), or the
// row's insert (counted the same way). An insert that finds the record of
// another round of the same delivery, or an update that finds the row
// written by one since r read it, carries on from that record and
// updates it.
func (a *App) save(ctx context.Context, r *round, count func(*webhook.Webhook) bool) error {
	if err := a.endEarlyWrite(r); err != nil {
		return err
	}
	if !r.stored {
		existing, err := a.deliveries.Insert(ctx, r.d, count)
		if err != nil {
			return err
		}
		r.stored = true
		if existing == nil {
			r.saved()
			return nil
		}
		if err := r.carryOn(existing); err != nil {
			return err
		}
	}
	for {
		var (
			lost *delivery.Delivery
			err  error
		)
		if r.d.Status.Final() {
			lost, err = a.deliveries.Finish(ctx, r.d, r.read, count)
		} else {
			lost, err = a.deliveries.Progress(ctx, r.d, r.read)
		}
		if err != nil {
			return err
		}
		if lost == nil {
			r.saved()
			return nil
		}
		if err := r.carryOn(lost); err != nil {
			return err
		}
	}
}
