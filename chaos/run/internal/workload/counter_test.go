package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/modes"
)

// lostAtGrant is a counter lock whose up-conversion is granted with a
// value that is stale by the time the client sees it: the lock is lost by
// then, as after a process pause between the grant and its thaw.
type lostAtGrant struct {
	mode    modes.Mode
	lost    chan struct{}
	written bool
}

func (l *lostAtGrant) Mode() modes.Mode { return l.mode }
func (l *lostAtGrant) Token() uint64    { return 7 }
func (l *lostAtGrant) Convert(_ context.Context, m modes.Mode) error {
	if m != modes.EX {
		return errors.New("the lock was lost")
	}
	close(l.lost)
	l.mode = m
	return nil
}
func (l *lostAtGrant) Unlock() error { return nil }
func (l *lostAtGrant) Value() ([]byte, bool) {
	return binary.BigEndian.AppendUint64(nil, 41), true
}
func (l *lostAtGrant) SetValue([]byte) error { l.written = true; return nil }
func (l *lostAtGrant) Lost() <-chan struct{} { return l.lost }

// TestIncrementDoesNotUseAValueOfALostLock: an EX grant of the counter that
// the client sees only with, or after, the lock's loss is recorded, and
// its value is neither counted as a read nor written back, whether the
// client's watch takes the loss or the grant first (both are ready: the
// rounds cover either order).
func TestIncrementDoesNotUseAValueOfALostLock(t *testing.T) {
	for round := range 20 {
		h := check.NewHistory(time.Now)
		r := New(h, NewStore(), []Service{{Node: "m1", Agent: -1}}, DefaultConfig(), Hooks{})
		c := &client{r: r, id: 1, svc: r.services[0]}
		lk := &lostAtGrant{mode: modes.NL, lost: make(chan struct{})}
		if r.increment(context.Background(), c, lk) {
			t.Errorf("round %d: the increment went on with a lost lock", round)
		}
		if incs := r.Results().Increments; len(incs) != 0 || lk.written {
			t.Errorf("round %d: increments %+v, value written %v: want none", round, incs, lk.written)
		}
		var granted, lost int
		for _, rec := range h.Records() {
			switch {
			case rec.Kind == check.Lost:
				lost++
			case rec.Outcome == check.OK && rec.Mode == modes.EX:
				granted++
			}
		}
		if granted != 1 || lost != 1 {
			t.Errorf("round %d: %d EX grants and %d losses recorded, want 1 and 1", round, granted, lost)
		}
	}
}
