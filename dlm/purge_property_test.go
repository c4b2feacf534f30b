package dlm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seed-a6839e30/dlm/modes"
)

// rapidTB lets the cluster helpers, written for testing.TB, run inside a
// rapid property (rapid.SyncTest), whose failures rapid shrinks. Only the
// methods the helpers call are provided; the embedded TB is nil.
type rapidTB struct {
	testing.TB
	t *rapid.T
}

func (r rapidTB) Helper()                          {}
func (r rapidTB) Name() string                     { return "rapid" }
func (r rapidTB) Fatal(args ...any)                { r.t.Fatal(args...) }
func (r rapidTB) Fatalf(format string, a ...any)   { r.t.Fatalf(format, a...) }
func (r rapidTB) Errorf(format string, a ...any)   { r.t.Errorf(format, a...) }
func (r rapidTB) Logf(format string, a ...any)     { r.t.Logf(format, a...) }
func (r rapidTB) Log(args ...any)                  { r.t.Log(args...) }
func (r rapidTB) Skipf(format string, args ...any) { r.t.Skipf(format, args...) }

// TestPurgeWaitsForTheLockDelay: a property over random small clusters. A
// victim node holds locks on resources mastered anywhere (by itself: the
// resource moves; by a survivor: its table stays and purges the victim's
// lock); survivors wait for each in a conflicting mode; the victim is then
// killed, or cut off alive (it believes it holds its locks until its lease
// ends). No survivor is granted across a victim's lock before the lock-delay
// (for a live victim: before the victim was told its lock is lost), and a
// resource the failure does not touch keeps being locked throughout.
func TestPurgeWaitsForTheLockDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster per check")
	}
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.SampledFrom([]int{3, 5}).Draw(rt, "nodes")
		victim := rapid.IntRange(0, nodes-1).Draw(rt, "victim")
		alive := rapid.Bool().Draw(rt, "alive") // cut off rather than killed
		type held struct {
			master, waiter int
			mode, want     modes.Mode
		}
		var hs []held
		for range rapid.IntRange(1, 4).Draw(rt, "resources") {
			h := held{master: rapid.IntRange(0, nodes-1).Draw(rt, "master")}
			for h.waiter = rapid.IntRange(0, nodes-1).Draw(rt, "waiter"); h.waiter == victim; h.waiter = (h.waiter + 1) % nodes {
			}
			h.mode = rapid.SampledFrom([]modes.Mode{modes.PR, modes.PW, modes.EX}).Draw(rt, "mode")
			h.want = modes.EX
			if h.mode == modes.EX {
				h.want = rapid.SampledFrom([]modes.Mode{modes.CR, modes.PR, modes.EX}).Draw(rt, "want")
			}
			hs = append(hs, h)
		}
		rapid.SyncTest(rt, func(rt *rapid.T) {
			tb := rapidTB{t: rt}
			c := startMem(tb, nodes, nil)
			defer c.close()
			survivor := (victim + 1) % nodes
			other := (victim + 2) % nodes
			if other == victim {
				other = survivor
			}
			var vlocks []*Lock
			type result struct {
				at  time.Time
				err error
			}
			results := make([]chan result, len(hs))
			for i, h := range hs {
				res := c.resourceOn(h.master, fmt.Sprintf("p%d", i))
				vlocks = append(vlocks, mustLock(tb, c.ls[victim], res, h.mode))
				results[i] = make(chan result, 1)
				go func() {
					lk, err := c.ls[h.waiter].Lock(bg, res, h.want)
					r := result{at: time.Now(), err: err}
					if err == nil {
						r.err = lk.Unlock()
					}
					results[i] <- r
				}()
			}
			synctestWait() // every waiter queued
			unaffected := c.resourceOn(survivor, "untouched")
			lostAt := make([]time.Time, len(vlocks))
			start := time.Now()
			if alive {
				for i, lk := range vlocks {
					go func() {
						<-lk.Lost()
						lostAt[i] = time.Now()
					}()
				}
				c.net.Isolate(c.nodes[victim].Name())
			} else {
				c.kill(victim)
			}
			// The untouched resource keeps being served while the victim's
			// recovery runs.
			var worst time.Duration
			for time.Since(start) < 3*time.Second {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(bg, time.Second)
				lk, err := c.ls[other].Lock(ctx, unaffected, modes.EX)
				cancel()
				if err != nil {
					rt.Fatalf("lock of an untouched resource during the recovery: %v", err)
				}
				mustUnlock(tb, lk)
				worst = max(worst, time.Since(t0))
				time.Sleep(50 * time.Millisecond)
			}
			if worst > 20*time.Millisecond {
				rt.Fatalf("an untouched resource waited %v during the recovery", worst)
			}
			cfg := c.nodes[survivor].rec.Config()
			for i, h := range hs {
				r := <-results[i]
				if r.err != nil {
					rt.Fatalf("waiter %d: %v", i, r.err)
				}
				if alive {
					synctestWait()
					if lostAt[i].IsZero() || !r.at.After(lostAt[i]) {
						rt.Fatalf("resource %d (master n%d): granted at %v, the live victim told of its loss at %v", i, h.master+1, r.at.Sub(start), lostAt[i].Sub(start))
					}
				} else if d := r.at.Sub(start); d < cfg.LockDelay()-cfg.HeartbeatInterval {
					rt.Fatalf("resource %d (master n%d): granted %v after the victim died, before the lock-delay %v", i, h.master+1, d, cfg.LockDelay())
				}
			}
			if alive {
				c.net.Heal()
			}
		})
	})
}
