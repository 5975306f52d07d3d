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
	s := NewMemoryStore(time.Hour, 3)
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

	now = now.Add(30 * time.Minute)
	claim("b", true)
	now = now.Add(30 * time.Minute) // a is an hour old
	claim("a", true)
	claim("b", false)

	// Bounded: the oldest is forgotten first, once MinTTL old.
	now = now.Add(MinTTL) // b and a are past MinTTL
	claim("c", true)
	claim("d", true)
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	claim("b", true) // b was the oldest, forgotten for d
	claim("d", false)

	now = now.Add(2 * time.Hour)
	if s.Len() != 0 {
		t.Fatalf("Len two hours later = %d, want 0", s.Len())
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

// TestMemoryStoreKeepsIDsThatStillVerify: whatever its ttl and max, a
// MemoryStore remembers an id for MinTTL; past that, the TTL and the bound
// apply.
func TestMemoryStoreKeepsIDsThatStillVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Nanosecond, time.Minute, 2 * Tolerance, MinTTL, time.Hour} {
		t.Run(ttl.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Unix(1_800_000_000, 0)
			now := start
			s := NewMemoryStore(ttl, 2)
			s.now = func() time.Time { return now }
			ids := []string{"1", "2", "3", "4", "5"}
			for _, id := range ids { // a second apart: the last claimed at start+4s
				if first, err := s.Claim(ctx, id); !first || err != nil {
					t.Fatalf("Claim(%s) = %v, %v", id, first, err)
				}
				now = now.Add(time.Second)
			}
			now = start.Add(MinTTL - time.Nanosecond) // "1" may still verify
			for _, id := range ids {
				if first, err := s.Claim(ctx, id); first || err != nil {
					t.Fatalf("%s later, Claim(%s) = %v, %v: handled again", now.Sub(start), id, first, err)
				}
			}
			if n := s.Len(); n != len(ids) {
				t.Fatalf("Len = %d, want %d: all kept beyond max", n, len(ids))
			}
			now = start.Add(4*time.Second + MinTTL) // all past MinTTL
			if first, _ := s.Claim(ctx, "6"); !first {
				t.Fatal("Claim(6) not first")
			}
			want := 2 // the bound
			if ttl <= MinTTL {
				want = 1 // "5" is MinTTL old: the TTL is MinTTL
			}
			if n := s.Len(); n != want {
				t.Fatalf("Len = %d, want %d", n, want)
			}
			if first, _ := s.Claim(ctx, "1"); !first {
				t.Fatal("Claim(1) past MinTTL and the bound: not first")
			}
		})
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
