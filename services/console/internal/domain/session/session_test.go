package session_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

// TestPolicy: a session lives its idle TTL past its last use, slides with
// use, and never past its absolute cap.
func TestPolicy(t *testing.T) {
	t.Parallel()
	p := session.Policy{IdleTTL: time.Hour, MaxAge: 3 * time.Hour}
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	s := p.Start("s1", session.HashToken("tok"), "op1", t0)
	if !s.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("a new session expires at %s", s.ExpiresAt)
	}
	tests := []struct {
		name      string
		at        time.Duration
		wantNext  time.Duration
		wantWrite bool
	}{
		{"a use at once gains nothing worth a write", time.Second, time.Hour + time.Second, false},
		{"a use a minute on slides", time.Minute, time.Hour + time.Minute, true},
		{"late use slides to the cap", 2*time.Hour + 30*time.Minute, 3 * time.Hour, true},
	}
	for _, tt := range tests {
		next, write := p.Slide(s, t0.Add(tt.at))
		if !next.Equal(t0.Add(tt.wantNext)) || write != tt.wantWrite {
			t.Errorf("%s: Slide = %s %v, want %s %v", tt.name, next.Sub(t0), write, tt.wantNext, tt.wantWrite)
		}
	}
	capped := s
	capped.ExpiresAt = t0.Add(3 * time.Hour)
	if next, write := p.Slide(capped, t0.Add(2*time.Hour+59*time.Minute)); write || !next.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("a session at its cap slid to %s", next.Sub(t0))
	}
	if !s.Live(t0.Add(59*time.Minute)) || s.Live(t0.Add(time.Hour)) {
		t.Error("Live is wrong at the expiry")
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	a, err := session.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := session.NewToken()
	if a == b || len(a) != 43 {
		t.Fatalf("tokens %q %q", a, b)
	}
	if string(session.HashToken(a)) == a || len(session.HashToken(a)) != 32 {
		t.Fatal("HashToken is not a SHA-256")
	}
	if session.CSRFToken(a) == session.CSRFToken(b) || session.CSRFToken(a) != session.CSRFToken(a) || session.CSRFToken(a) == a {
		t.Fatal("CSRF tokens are not per session")
	}
	if session.SameToken("", "") || !session.SameToken(a, a) || session.SameToken(a, b) {
		t.Fatal("SameToken")
	}
}
