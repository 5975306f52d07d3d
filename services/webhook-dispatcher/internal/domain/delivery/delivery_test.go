package delivery

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestAttemptSucceeded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give Attempt
		want bool
	}{
		{name: "200", give: Attempt{ResponseStatus: 200}, want: true},
		{name: "204", give: Attempt{ResponseStatus: 204}, want: true},
		{name: "299", give: Attempt{ResponseStatus: 299}, want: true},
		{name: "302", give: Attempt{ResponseStatus: 302, Error: "receiver answered 302"}},
		{name: "300 without error text", give: Attempt{ResponseStatus: 300}},
		{name: "500", give: Attempt{ResponseStatus: 500, Error: "receiver answered 500"}},
		{name: "no response", give: Attempt{Error: "connection refused"}},
		{name: "199", give: Attempt{ResponseStatus: 199}},
	}
	for _, tt := range tests {
		if got := tt.give.Succeeded(); got != tt.want {
			t.Errorf("%s: Succeeded = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRetriesThenDelivered(t *testing.T) {
	t.Parallel()
	d := New("id", "ws", EventMessageReceived, []byte(`{}`), t0)
	if d.Status != StatusPending || d.Attempts != 0 || d.ResponseStatus != nil || d.LastError != nil || d.DeliveredAt != nil {
		t.Fatalf("New = %+v", d)
	}
	d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0, Duration: time.Second, ResponseStatus: 500, Error: "receiver answered 500"})
	if d.Attempts != 1 || *d.ResponseStatus != 500 || *d.LastError != "receiver answered 500" || d.Status != StatusPending {
		t.Fatalf("after a failed attempt: %+v", d)
	}
	d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0.Add(2 * time.Second), Error: "connection refused"})
	if d.Attempts != 2 || d.ResponseStatus != nil || *d.LastError != "connection refused" {
		t.Fatalf("after a refused attempt: %+v", d)
	}
	d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0.Add(4 * time.Second), Duration: 30 * time.Millisecond, ResponseStatus: 204})
	d.Finish()
	want := t0.Add(4*time.Second + 30*time.Millisecond)
	if d.Status != StatusDelivered || d.Attempts != 3 || *d.ResponseStatus != 204 || d.LastError != nil || d.DeliveredAt == nil || !d.DeliveredAt.Equal(want) {
		t.Fatalf("delivered: %+v", d)
	}
	if len(d.History) != 3 || d.History[0].Number != 1 || d.History[2].Number != 3 {
		t.Fatalf("history: %+v", d.History)
	}
}

// TestDeliveredAtAtStoredPrecision: an attempt's duration has nanoseconds,
// PostgreSQL keeps microseconds; delivered_at is what the log will read back.
func TestDeliveredAtAtStoredPrecision(t *testing.T) {
	t.Parallel()
	d := New("id", "ws", EventTest, []byte(`{}`), t0)
	d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0, Duration: 787_749_044 * time.Nanosecond, ResponseStatus: 200})
	d.Finish()
	if want := t0.Add(787_749 * time.Microsecond); d.DeliveredAt == nil || !d.DeliveredAt.Equal(want) {
		t.Fatalf("delivered_at %v, want %v", d.DeliveredAt, want)
	}
}

func TestAllAttemptsFailed(t *testing.T) {
	t.Parallel()
	d := New("id", "ws", EventMessageReceived, []byte(`{}`), t0)
	for range 4 {
		d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0, ResponseStatus: 503, Error: "receiver answered 503"})
	}
	d.Finish()
	if d.Status != StatusFailed || d.Attempts != 4 || *d.ResponseStatus != 503 || d.DeliveredAt != nil {
		t.Fatalf("failed: %+v", d)
	}
}

func TestSkipped(t *testing.T) {
	t.Parallel()
	d := NewSkipped("id", "ws", EventMessageReceived, []byte(`{}`), t0)
	if d.Status != StatusSkipped || !d.Status.Final() || d.Attempts != 0 || d.LastError == nil || *d.LastError != SkippedPaused {
		t.Fatalf("NewSkipped = %+v", d)
	}
	if StatusPending.Final() {
		t.Fatal("pending is final")
	}
}

// A round that finds another round's record of its delivery, written while
// it was under way, carries it on: the attempts of both, oldest first and
// renumbered, the latest one's answer, and delivered when either round
// delivered it.
func TestContinue(t *testing.T) {
	t.Parallel()
	at := func(minute, status int) Attempt {
		a := Attempt{Number: 1, StartedAt: t0.Add(time.Duration(minute) * time.Minute), Duration: time.Millisecond, ResponseStatus: status}
		if status != 200 {
			a.Error = "receiver answered 503"
		}
		return a
	}
	tests := []struct {
		name string
		// stored is the other round's record; ours is our round's status
		// before it carries on (pending while under way).
		stored       []Attempt
		storedStatus Status
		ours         []Attempt
		ourStatus    Status
		wantStatus   Status
		wantMinutes  []int
		wantLast     int
	}{
		{"failed, then delivered", []Attempt{at(0, 503)}, StatusFailed, []Attempt{at(1, 200)}, StatusDelivered, StatusDelivered, []int{0, 1}, 200},
		{"delivered, then failed", []Attempt{at(1, 200)}, StatusDelivered, []Attempt{at(2, 503), at(3, 503)}, StatusFailed, StatusDelivered, []int{1, 2, 3}, 503},
		{"ours started first", []Attempt{at(2, 503)}, StatusPending, []Attempt{at(1, 200)}, StatusDelivered, StatusDelivered, []int{1, 2}, 503},
		{"both failed", []Attempt{at(0, 503)}, StatusFailed, []Attempt{at(1, 503)}, StatusFailed, StatusFailed, []int{0, 1}, 503},
		{"ours under way, the other delivered", []Attempt{at(1, 200)}, StatusDelivered, []Attempt{at(0, 503)}, StatusPending, StatusDelivered, []int{0, 1}, 200},
		{"both under way", []Attempt{at(1, 503)}, StatusPending, []Attempt{at(0, 503)}, StatusPending, StatusPending, []int{0, 1}, 503},
		{"nothing stored yet", nil, StatusPending, []Attempt{at(0, 200)}, StatusDelivered, StatusDelivered, []int{0}, 200},
		{"none of ours yet", []Attempt{at(0, 503)}, StatusFailed, nil, StatusPending, StatusPending, []int{0}, 503},
		{"skipped, the other under way", []Attempt{at(0, 503)}, StatusPending, nil, StatusSkipped, StatusSkipped, []int{0}, 503},
		{"skipped, the other failed", []Attempt{at(0, 503)}, StatusFailed, nil, StatusSkipped, StatusFailed, []int{0}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stored := New("d1", "ws", EventMessageReceived, []byte(`{"stored":1}`), t0)
			for _, a := range tt.stored {
				a.Number = stored.NextAttempt()
				stored.Record(a)
			}
			stored.Status = tt.storedStatus
			d := New("d1", "ws", EventMessageReceived, []byte(`{"ours":1}`), t0.Add(time.Hour))
			for _, a := range tt.ours {
				a.Number = d.NextAttempt()
				d.Record(a)
			}
			d.Status = tt.ourStatus
			d.Continue(stored, slices.Clone(d.History))
			var minutes []int
			for i, a := range d.History {
				minutes = append(minutes, int(a.StartedAt.Sub(t0)/time.Minute))
				if a.Number != i+1 {
					t.Errorf("attempt %d numbered %d", i+1, a.Number)
				}
			}
			if d.Status != tt.wantStatus || d.Attempts != len(tt.wantMinutes) || !slices.Equal(minutes, tt.wantMinutes) ||
				*d.ResponseStatus != tt.wantLast || string(d.Payload) != `{"stored":1}` || !d.CreatedAt.Equal(t0) {
				t.Errorf("status %s, attempts %d started at minutes %v, last %d, payload %s, created %s",
					d.Status, d.Attempts, minutes, *d.ResponseStatus, d.Payload, d.CreatedAt)
			}
			if d.Status.Final() && (d.Status == StatusDelivered) != (d.DeliveredAt != nil) {
				t.Errorf("delivered_at %v with status %s", d.DeliveredAt, d.Status)
			}
		})
	}
}

// A round that another round's record made delivered stays delivered
// when its own attempts then fail.
func TestFinishKeepsDelivered(t *testing.T) {
	t.Parallel()
	d := New("d1", "ws", EventMessageReceived, []byte(`{}`), t0)
	d.Status = StatusDelivered
	d.Record(Attempt{Number: d.NextAttempt(), StartedAt: t0, ResponseStatus: 503, Error: "receiver answered 503"})
	d.Finish()
	if d.Status != StatusDelivered {
		t.Fatalf("status %s, want delivered", d.Status)
	}
}
