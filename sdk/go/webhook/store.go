package webhook

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store in the process's memory, for a receiver that runs
// as one instance: it remembers a delivery id for a TTL of at least
// MinTTL, and at most a number of ids older than MinTTL, forgetting the
// oldest first. It is safe for concurrent use. The ids are lost when the
// process stops; several instances need a shared Store (see Store).
type MemoryStore struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.Mutex
	byID  map[string]*list.Element
	order *list.List // of *claim, oldest first
}

type claim struct {
	id string
	at time.Time
}

// Defaults and bounds of NewMemoryStore.
const (
	// DefaultTTL is how long a delivery id is remembered: Parley retries a
	// delivery within seconds, but an operator's replay of an event can
	// come days later.
	DefaultTTL = 24 * time.Hour
	// DefaultMaxIDs bounds the memory the ids take (about 100 bytes each).
	DefaultMaxIDs = 100_000
	// MinTTL is the least time a MemoryStore remembers an id, whatever it
	// was asked: as long as an attempt of the delivery can still verify.
	// An attempt stamped Tolerance ahead of the receiver's clock verifies
	// when it first arrives and again, recorded and sent anew, until it is
	// Tolerance behind (VerifyAt compares whole seconds: up to a second
	// more); an id forgotten sooner would be handled twice.
	MinTTL = 2*Tolerance + time.Second
)

// NewMemoryStore returns a MemoryStore that remembers an id for ttl, and at
// most max ids; zero or less means DefaultTTL, DefaultMaxIDs. A ttl under
// MinTTL is MinTTL, and an id younger than MinTTL is never forgotten for
// max: an id is remembered as long as its delivery verifies, so a replay is
// never handled again. The ids of the last MinTTL are kept beyond max,
// their number bounded by the deliveries Parley makes in that time (a
// forged one is refused before its id is stored).
func NewMemoryStore(ttl time.Duration, max int) *MemoryStore {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL {
		ttl = MinTTL
	}
	if max <= 0 {
		max = DefaultMaxIDs
	}
	return &MemoryStore{ttl: ttl, max: max, now: time.Now, byID: map[string]*list.Element{}, order: list.New()}
}

var _ Store = (*MemoryStore)(nil)

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	if _, ok := s.byID[id]; ok {
		return false, nil
	}
	s.byID[id] = s.order.PushBack(&claim{id: id, at: now})
	for e := s.order.Front(); s.order.Len() > s.max && now.Sub(e.Value.(*claim).at) >= MinTTL; e = s.order.Front() {
		s.remove(e)
	}
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.remove(e)
	}
	return nil
}

// Len is how many ids the store remembers now.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	return s.order.Len()
}

// expire forgets the ids older than the TTL: claims are in the order of
// their time, so they are at the front.
func (s *MemoryStore) expire(now time.Time) {
	for e := s.order.Front(); e != nil && now.Sub(e.Value.(*claim).at) >= s.ttl; e = s.order.Front() {
		s.remove(e)
	}
}

func (s *MemoryStore) remove(e *list.Element) {
	delete(s.byID, e.Value.(*claim).id)
	s.order.Remove(e)
}
