package dlm

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestSessionClockHeap: whatever sessions the lease clock schedules,
// reschedules and removes, its heap keeps the earliest due first, every
// session knows its place, and a removed one is gone. (The dues are hours
// away: the timer never fires here.)
func TestSessionClockHeap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ss sessions
		live := map[*Session]bool{}
		var all []*Session
		base := time.Now().Add(time.Hour)
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 2).Draw(t, "op"); {
			case op == 0 || len(all) == 0:
				s := &Session{}
				all = append(all, s)
				live[s] = true
				ss.add(s, base.Add(time.Duration(rapid.IntRange(0, 1000).Draw(t, "end"))*time.Second))
			case op == 1:
				s := all[rapid.IntRange(0, len(all)-1).Draw(t, "which")]
				if live[s] {
					ss.schedule(s, base.Add(time.Duration(rapid.IntRange(0, 1000).Draw(t, "new end"))*time.Second))
				}
			default:
				s := all[rapid.IntRange(0, len(all)-1).Draw(t, "which")]
				ss.remove(s)
				delete(live, s)
			}
			ss.mu.Lock()
			if len(ss.heap) != len(live) {
				t.Fatalf("heap holds %d sessions, %d live", len(ss.heap), len(live))
			}
			for i, s := range ss.heap {
				if int(s.at) != i+1 || !live[s] {
					t.Fatalf("heap[%d]: at %d, live %v", i, s.at, live[s])
				}
				if p := (i - 1) / 2; i > 0 && ss.heap[p].due > s.due {
					t.Fatalf("heap[%d] due %v before its parent's %v", i, s.due, ss.heap[p].due)
				}
			}
			ss.mu.Unlock()
		}
		ss.mu.Lock()
		if ss.timer != nil {
			ss.timer.Stop()
		}
		ss.mu.Unlock()
	})
}
