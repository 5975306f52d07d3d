package webhook

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store in the process's memory, for a receiver that runs
// as one instance: it remembers a delivery id for a TTL, and at most a
// number of ids, forgetting the oldest first. It is safe for concurrent
// use. The ids are lost when the process stops; several instances need a
// shared Store (see Store).
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

// Defaults of NewMemoryStore.
const (
	// DefaultTTL is how long a delivery id is remembered: Parley retries a
	// delivery within seconds, but an operator's replay of an event can
	// come days later.
	DefaultTTL = 24 * time.Hour
	// DefaultMaxIDs bounds the memory the ids take (about 100 bytes each).
	DefaultMaxIDs = 100_000
)

// NewMemoryStore returns a MemoryStore that remembers an id for ttl and at
// most max ids; zero or less means DefaultTTL, DefaultMaxIDs. Keep ttl at
// least twice Tolerance (10 minutes): an attempt recorded on its way
// verifies for up to that long after it first arrived, and one whose id
// the store forgot by then would be handled again.
func NewMemoryStore(ttl time.Duration, max int) *MemoryStore {
	if ttl <= 0 {
		ttl = DefaultTTL
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
	for s.order.Len() > s.max {
		s.remove(s.order.Front())
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
