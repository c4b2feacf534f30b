package dlm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

func TestRWMutexUpgradeDowngrade(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for i := range 3 {
			res := c.resourceOn(i, "rw")
			a, b := c.ls[0].RWMutex(res), c.ls[1].RWMutex(res)
			a.RLock()
			b.RLock()
			// Upgrade waits for the other reader to leave.
			up := make(chan error, 1)
			go func() { up <- a.Upgrade(bg) }()
			c.settle(c.queued(res, 1))
			// A reader that comes now queues behind the conversion.
			later, laterDone := make(chan struct{}), make(chan struct{})
			go func() {
				b2 := c.ls[2].RWMutex(res)
				b2.RLock()
				close(later)
				b2.RUnlock()
				close(laterDone)
			}()
			c.settle(c.queued(res, 2))
			b.RUnlock()
			if err := <-up; err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			tok := a.Token()
			if tok == 0 {
				t.Fatal("no token after the upgrade")
			}
			select {
			case <-later:
				t.Fatal("a reader got in while the upgraded writer holds EX")
			default:
			}
			// Downgrade: in place, never waits, keeps the token, lets the
			// queued reader in at once.
			if err := a.Downgrade(); err != nil {
				t.Fatal(err)
			}
			<-later
			<-laterDone
			c.settle(nil)
			if a.Token() != 0 {
				t.Fatal("Token after Downgrade should be 0: no write lock held")
			}
			info, err := c.ls[0].Describe(bg, res)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Granted) != 1 || info.Granted[0].Mode != modes.PR || info.Granted[0].Token != tok {
				t.Fatalf("after Downgrade: %+v, want one PR with token %d", info, tok)
			}
			a.RUnlock()
			if err := a.Downgrade(); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Downgrade without the write lock: %v", err)
			}
			if err := a.Upgrade(bg); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Upgrade without a read lock: %v", err)
			}
			c.settle(c.free(res))
		}
	})
}

// TestRWMutexUpgradersDeadlock: two readers upgrade at once; each would
// wait for the other's PR forever. The master fails the later one at once
// with ErrDeadlock; it keeps its read lock, and once it lets go the
// first upgrade goes through.
func TestRWMutexUpgradersDeadlock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for _, same := range []bool{false, true} { // readers on two nodes, or one
			res := c.resourceOn(2, fmt.Sprintf("up-%v", same))
			a := c.ls[0].RWMutex(res)
			b := c.ls[1].RWMutex(res)
			if same {
				b = a
			}
			a.RLock()
			b.RLock()
			first := make(chan error, 1)
			go func() { first <- a.Upgrade(bg) }()
			c.settle(c.queued(res, 1))
			if err := b.Upgrade(bg); !errors.Is(err, ErrDeadlock) {
				t.Fatalf("second upgrade (same node %v): %v, want ErrDeadlock", same, err)
			}
			select {
			case err := <-first:
				t.Fatalf("the first upgrade returned %v while the other still reads", err)
			default:
			}
			b.RUnlock() // the loser still held its read lock
			if err := <-first; err != nil {
				t.Fatalf("first upgrade: %v", err)
			}
			a.Unlock()
			c.settle(c.free(res))
		}
	})
}

// TestRWMutexRace: readers, writers, upgraders and downgraders on three
// nodes hammer one RWMutex; a writer is never concurrent with anyone, and
// everyone finishes (no missed wake-up). Run it with -race: over memnet in
// synctest, and over loopback TCP in real time.
func TestRWMutexRace(t *testing.T) {
	t.Run("memnet", func(t *testing.T) {
		synctestRun(t, func(t *testing.T) {
			c := startMem(t, 3, nil)
			defer c.close()
			rwRace(t, c)
		})
	})
	t.Run("tcp", func(t *testing.T) {
		c := startTCP(t, 3, nil)
		defer c.close()
		rwRace(t, c)
	})
}

func rwRace(t *testing.T, c *cluster) {
	const res = "rw-race"
	var readers, writers atomic.Int32
	check := func(what string) {
		if w, r := writers.Load(), readers.Load(); w > 1 || (w == 1 && r > 0) {
			t.Errorf("%s: %d writers and %d readers at once", what, w, r)
		}
	}
	var wg sync.WaitGroup
	for node := range 3 {
		m := c.ls[node].RWMutex(res)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(node), uint64(g)))
				for range 30 {
					ctx, cancel := context.WithTimeout(bg, time.Minute)
					switch rng.IntN(4) {
					case 0: // read
						if err := m.RLockContext(ctx); err != nil {
							t.Error(err)
						} else {
							readers.Add(1)
							check("read")
							time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
							readers.Add(-1)
							m.RUnlock()
						}
					case 1: // write
						if err := m.LockContext(ctx); err != nil {
							t.Error(err)
						} else {
							writers.Add(1)
							check("write")
							time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
							writers.Add(-1)
							m.Unlock()
						}
					case 2: // read, upgrade, write, release
						if err := m.RLockContext(ctx); err != nil {
							t.Error(err)
							break
						}
						err := m.Upgrade(ctx)
						switch {
						case errors.Is(err, ErrDeadlock):
							m.RUnlock() // another upgrader: back off
						case err != nil:
							t.Error(err)
							m.RUnlock()
						default:
							writers.Add(1)
							check("upgraded")
							writers.Add(-1)
							m.Unlock()
						}
					case 3: // write, downgrade, read, release
						if err := m.LockContext(ctx); err != nil {
							t.Error(err)
							break
						}
						writers.Add(1)
						check("before downgrade")
						writers.Add(-1)
						readers.Add(1)
						if err := m.Downgrade(); err != nil {
							t.Error(err)
						}
						check("downgraded")
						readers.Add(-1)
						m.RUnlock()
					}
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	c.settle(c.free(res))
}
