package bufpool

import (
	"bytes"
	"testing"
)

// A buffer comes back empty whatever was written to it, and one grown over
// MaxKept is not kept.
func TestPool(t *testing.T) {
	var p Pool
	b := p.Get()
	*b = append(*b, "a page"...)
	p.Put(b)
	for range 100 {
		got := p.Get()
		if len(*got) != 0 {
			t.Fatalf("Get = %q, want an empty buffer", *got)
		}
		*got = append(*got, bytes.Repeat([]byte{'x'}, 1000)...)
		p.Put(got)
	}
	big := p.Get()
	*big = make([]byte, 0, MaxKept+1)
	p.Put(big)
	for range 100 {
		got := p.Get()
		if cap(*got) > MaxKept {
			t.Fatalf("Get returned a buffer of %d bytes, over MaxKept", cap(*got))
		}
	}
}
