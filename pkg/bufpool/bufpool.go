// Package bufpool keeps byte buffers between requests: a hot path that
// encodes tens of KB a request (a page of the API, its rpc reply) would
// otherwise allocate that much anew each time, and the garbage collector
// then spends about as much again reclaiming it.
package bufpool

import "sync"

// MaxKept is the largest buffer a Pool keeps for a next request: the odd
// answer of megabytes is let go rather than held.
const MaxKept = 256 << 10

// Pool hands out byte slices to append to, and takes them back once what
// was written there has been copied away. The zero value is ready to use.
type Pool struct{ p sync.Pool }

// Get returns an empty buffer, with the capacity of an earlier one when
// the pool holds one.
func (p *Pool) Get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	return new([]byte)
}

// Put gives b back for a next Get, unless it grew over MaxKept. Nothing
// may use *b afterwards.
func (p *Pool) Put(b *[]byte) {
	if cap(*b) <= MaxKept {
		p.p.Put(b)
	}
}
