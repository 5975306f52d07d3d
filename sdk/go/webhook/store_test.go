package webhook

import (
	"context"
	"testing"
	"time"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	s := NewMemoryStore(time.Minute, 3)
	s.now = func() time.Time { return now }
	claim := func(id string, want bool) {
		t.Helper()
		if first, err := s.Claim(ctx, id); err != nil || first != want {
			t.Fatalf("Claim(%s) = %v, %v; want %v", id, first, err, want)
		}
	}

	claim("a", true)
	claim("a", false)
	if err := s.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	claim("a", true) // released: the retry is handled

	now = now.Add(30 * time.Second)
	claim("b", true)
	now = now.Add(30 * time.Second) // a is a minute old
	claim("a", true)
	claim("b", false)

	// Bounded: the oldest is forgotten first.
	claim("c", true)
	claim("d", true)
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	claim("b", true) // b was the oldest, forgotten for d
	claim("d", false)

	now = now.Add(time.Hour)
	if s.Len() != 0 {
		t.Fatalf("Len an hour later = %d, want 0", s.Len())
	}
	if err := s.Release(ctx, "never claimed"); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryStoreDefaults(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0, -1)
	if s.ttl != DefaultTTL || s.max != DefaultMaxIDs {
		t.Fatalf("ttl %s, max %d; want %s, %d", s.ttl, s.max, DefaultTTL, DefaultMaxIDs)
	}
}

// Concurrent claims of one id: exactly one is first.
func TestMemoryStoreConcurrentClaims(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0, 0)
	const n = 64
	firsts := make(chan bool, n)
	for i := 0; i < n; i++ {
		go func() {
			first, _ := s.Claim(context.Background(), "id")
			firsts <- first
		}()
	}
	count := 0
	for i := 0; i < n; i++ {
		if <-firsts {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d claims were first, want 1", count)
	}
}
