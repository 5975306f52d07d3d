package recent

import (
	"errors"
	"testing"
	"time"
)

// TestCache: a value is read once per maxAge; an error is not kept; a
// Forget drops what is kept and a read that began before it.
func TestCache(t *testing.T) {
	t.Parallel()
	c := New[string, int](time.Second)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	c.Now = func() time.Time { return now }
	reads := 0
	read := func() (int, error) { reads++; return reads, nil }

	if v, _ := c.Get("a", read); v != 1 {
		t.Fatalf("first read %d", v)
	}
	now = now.Add(time.Second - time.Millisecond)
	if v, _ := c.Get("a", read); v != 1 || reads != 1 {
		t.Fatalf("within maxAge: %d after %d reads", v, reads)
	}
	now = now.Add(time.Millisecond)
	if v, _ := c.Get("a", read); v != 2 {
		t.Fatalf("at maxAge: %d, want a new read", v)
	}

	failed := errors.New("owner down")
	if _, err := c.Get("b", func() (int, error) { return 0, failed }); !errors.Is(err, failed) {
		t.Fatalf("error %v", err)
	}
	if v, _ := c.Get("b", read); v != 3 {
		t.Fatalf("after an error: %d, want a new read", v)
	}

	c.Forget()
	if v, _ := c.Get("a", read); v != 4 {
		t.Fatalf("after Forget: %d, want a new read", v)
	}
	// A read under way when Forget comes is answered but not kept.
	if v, _ := c.Get("c", func() (int, error) { c.Forget(); return read() }); v != 5 {
		t.Fatalf("read across a Forget: %d", v)
	}
	if v, _ := c.Get("c", read); v != 6 {
		t.Fatalf("a read that began before a Forget was kept: %d", v)
	}
}

// TestCacheForgetsOutdatedWhenFull: past forgetAbove keys, the outdated
// ones go.
func TestCacheForgetsOutdatedWhenFull(t *testing.T) {
	t.Parallel()
	c := New[int, int](time.Second)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	c.Now = func() time.Time { return now }
	for i := range forgetAbove {
		_, _ = c.Get(i, func() (int, error) { return i, nil })
	}
	now = now.Add(time.Second)
	_, _ = c.Get(-1, func() (int, error) { return -1, nil })
	if n := len(c.known); n != 1 {
		t.Fatalf("%d keys kept, want only the new one", n)
	}
}
