package workload

import "sync"

// Store is the fenced register the clients write to: per key, it refuses
// a write whose token is below the highest it accepted (equal tokens pass,
// so a holder may write repeatedly). It lives in the harness, where no
// nemesis reaches it, like the database a lock protects.
type Store struct {
	mu   sync.Mutex
	keys map[string]entry
}

type entry struct {
	max   uint64
	value int64
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{keys: make(map[string]entry)} }

// Write stores value under key if token is at least the highest accepted
// for key, and reports whether it did.
func (s *Store) Write(key string, token uint64, value int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if token < e.max {
		return false
	}
	s.keys[key] = entry{max: token, value: value}
	return true
}

// Read returns the value of key (0 if never written).
func (s *Store) Read(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].value
}

// MaxToken returns the highest token accepted for key.
func (s *Store) MaxToken(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].max
}
