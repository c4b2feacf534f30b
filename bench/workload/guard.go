package workload

import (
	"sync/atomic"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// guard watches, inside the harness, that grants of one resource never
// coexist in conflicting modes. A holder enters after Lock returns and leaves
// before it calls Unlock, so with a correct lock service the next grant comes
// after the leave and no overlap is ever seen; with a lease that expired under
// a slow holder it is.
type guard struct{ slots []guardSlot }

type guardSlot struct {
	writers atomic.Int32
	readers atomic.Int32
}

func newGuard(n int) *guard { return &guard{slots: make([]guardSlot, n)} }

// enter records a grant and reports whether it was alone as it should be.
// Sequentially consistent atomics make the check symmetric: of two
// conflicting holders that overlap, at least one sees the other.
func (g *guard) enter(i int, mode lockbench.Mode) bool {
	s := &g.slots[i]
	if mode == lockbench.Shared {
		s.readers.Add(1)
		return s.writers.Load() == 0
	}
	w := s.writers.Add(1)
	return w == 1 && s.readers.Load() == 0
}

// leave undoes enter.
func (g *guard) leave(i int, mode lockbench.Mode) {
	s := &g.slots[i]
	if mode == lockbench.Shared {
		s.readers.Add(-1)
		return
	}
	s.writers.Add(-1)
}
