package webhook

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestNewIsActiveWithoutFailures(t *testing.T) {
	t.Parallel()
	w := New("ws", "https://h.example.com", "whsec_x", t0)
	if w.Status != StatusActive || w.ConsecutiveFailures != 0 || w.ID == "" || !w.CreatedAt.Equal(t0) || !w.UpdatedAt.Equal(t0) {
		t.Fatalf("New = %+v", w)
	}
}

func TestRecordDeliveryPausesAtThreshold(t *testing.T) {
	t.Parallel()
	w := New("ws", "https://h.example.com", "whsec_x", t0)
	for i := 1; i < 3; i++ {
		changed, paused := w.RecordDelivery(false, 3, t0.Add(time.Duration(i)*time.Second))
		if !changed || paused || w.Status != StatusActive || w.ConsecutiveFailures != i {
			t.Fatalf("failure %d: changed=%v paused=%v %+v", i, changed, paused, w)
		}
	}
	if !w.UpdatedAt.Equal(t0) {
		t.Fatalf("counting failures moved updated_at to %s", w.UpdatedAt)
	}
	at := t0.Add(time.Minute)
	changed, paused := w.RecordDelivery(false, 3, at)
	if !changed || !paused || w.Status != StatusPaused || w.ConsecutiveFailures != 3 || !w.UpdatedAt.Equal(at) {
		t.Fatalf("third failure: changed=%v paused=%v %+v", changed, paused, w)
	}
	// Further failures while paused do not pause again.
	if _, paused := w.RecordDelivery(false, 3, at); paused {
		t.Fatal("paused twice")
	}
}

func TestRecordDeliverySuccessResetsCount(t *testing.T) {
	t.Parallel()
	w := New("ws", "https://h.example.com", "whsec_x", t0)
	if changed, _ := w.RecordDelivery(true, 3, t0); changed {
		t.Fatal("a success with no failures changed the webhook")
	}
	w.RecordDelivery(false, 3, t0)
	w.RecordDelivery(false, 3, t0)
	if changed, _ := w.RecordDelivery(true, 3, t0); !changed || w.ConsecutiveFailures != 0 {
		t.Fatalf("success after failures: changed=%v %+v", changed, w)
	}
	// The count is of consecutive failures: two more do not reach 3.
	w.RecordDelivery(false, 3, t0)
	if _, paused := w.RecordDelivery(false, 3, t0); paused {
		t.Fatal("paused after 2 consecutive failures with threshold 3")
	}
}

func TestResaveActivatesWithNewSecret(t *testing.T) {
	t.Parallel()
	w := New("ws", "https://h.example.com", "whsec_old", t0)
	w.RecordDelivery(false, 1, t0)
	if w.Status != StatusPaused {
		t.Fatal("not paused")
	}
	at := t0.Add(time.Hour)
	w.Resave("whsec_new", at)
	if w.Status != StatusActive || w.ConsecutiveFailures != 0 || w.Secret != "whsec_new" || !w.UpdatedAt.Equal(at) || !w.CreatedAt.Equal(t0) {
		t.Fatalf("Resave = %+v", w)
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(a, SecretPrefix))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(raw) != 32 {
		t.Fatalf("secret %q: want whsec_ and 32 random bytes", a)
	}
}

func TestPausedAtIsWhenThePauseRuleFired(t *testing.T) {
	t.Parallel()
	pausedAt := t0.Add(time.Minute)
	tests := []struct {
		name string
		give func(w *Webhook)
		want *time.Time
	}{
		{"new", func(*Webhook) {}, nil},
		{"failures below the threshold", func(w *Webhook) {
			w.RecordDelivery(false, 3, t0)
			w.RecordDelivery(false, 3, t0)
		}, nil},
		{"paused", func(w *Webhook) {
			w.RecordDelivery(false, 2, t0)
			w.RecordDelivery(false, 2, pausedAt)
		}, &pausedAt},
		{"failures while paused keep the time", func(w *Webhook) {
			w.RecordDelivery(false, 1, pausedAt)
			w.RecordDelivery(false, 1, pausedAt.Add(time.Hour))
		}, &pausedAt},
		{"re-saved", func(w *Webhook) {
			w.RecordDelivery(false, 1, pausedAt)
			w.Resave("whsec_new", pausedAt.Add(time.Hour))
		}, nil},
		{"paused again after a re-save", func(w *Webhook) {
			w.RecordDelivery(false, 1, t0)
			w.Resave("whsec_new", t0.Add(time.Second))
			w.RecordDelivery(false, 1, pausedAt)
		}, &pausedAt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := New("ws", "https://h.example.com", "whsec_x", t0)
			tt.give(w)
			switch {
			case tt.want == nil && w.PausedAt != nil:
				t.Fatalf("PausedAt = %s, want nil", w.PausedAt)
			case tt.want != nil && (w.PausedAt == nil || !w.PausedAt.Equal(*tt.want)):
				t.Fatalf("PausedAt = %v, want %s", w.PausedAt, tt.want)
			case (w.PausedAt != nil) != (w.Status == StatusPaused):
				t.Fatalf("PausedAt %v with status %s", w.PausedAt, w.Status)
			}
		})
	}
}
