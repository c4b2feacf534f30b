package dlm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

// cluster starts n nodes in this process (dlmtest, on the in-process
// network) and opens lockspace "app" on each.
func cluster(n int) ([]*dlm.Lockspace, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dlmtest.New(ctx, n)
	if err != nil {
		panic(err)
	}
	lss, err := c.Lockspaces("app")
	if err != nil {
		panic(err)
	}
	return lss, func() { _ = c.Close() }
}

// Mutual exclusion: workers on three nodes increment a counter that lives
// outside the lock manager, each under an EX lock.
func Example() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	counter := 0 // stands for a record in a shared store
	var wg sync.WaitGroup
	for _, ls := range lss {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					lk, err := ls.Lock(ctx, "counter", modes.EX)
					if err != nil {
						panic(err)
					}
					counter++
					lk.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	fmt.Println("counter:", counter)
	// Output: counter: 300
}

// Readers share PR; a writer's EX waits for them, and later readers wait
// for the writer: FIFO, so a stream of readers cannot starve it. The
// readers hear that a writer wants in through their blocking callbacks.
func ExampleLockspace_Lock_readersAndWriter() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	wanted := make(chan modes.Mode, 2)
	onBlocking := dlm.OnBlocking(func(m modes.Mode) { wanted <- m })
	r1, _ := lss[0].Lock(ctx, "config", modes.PR, onBlocking)
	r2, _ := lss[1].Lock(ctx, "config", modes.PR, onBlocking) // readers share
	fmt.Println("two readers:", r1.Mode(), r2.Mode())

	written := make(chan struct{})
	go func() {
		w, _ := lss[2].Lock(ctx, "config", modes.EX) // waits for both readers
		fmt.Println("writer in")
		w.Unlock()
		close(written)
	}()
	fmt.Println("readers told:", <-wanted, <-wanted)
	if _, err := lss[2].TryLock(ctx, "config", modes.PR); errors.Is(err, dlm.ErrNotQueued) {
		fmt.Println("a third reader would wait behind the writer")
	}
	r1.Unlock()
	r2.Unlock()
	<-written
	// Output:
	// two readers: PR PR
	// readers told: EX EX
	// a third reader would wait behind the writer
	// writer in
}

// The lock value block: a small value that travels with the lock. A PW or
// EX holder writes it when it converts down or unlocks; the next holder
// above NL reads it, with a sequence number and a valid flag.
func ExampleLock_SetValue() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	// An NL lock keeps the resource, and its value, alive between holders.
	keep, _ := lss[2].Lock(ctx, "inode/7", modes.NL)
	defer keep.Unlock()

	w, _ := lss[0].Lock(ctx, "inode/7", modes.EX)
	w.SetValue([]byte("size=4096"))
	w.Unlock() // writes the value back

	r, _ := lss[1].Lock(ctx, "inode/7", modes.PR)
	v, valid := r.Value()
	fmt.Printf("%s valid=%v seq=%d\n", v, valid, r.ValueSeq())
	r.Unlock()
	// Output: size=4096 valid=true seq=1
}

// TryLock takes a lock only if it is free now.
func ExampleLockspace_TryLock() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	held, _ := lss[0].Lock(ctx, "job/42", modes.EX)
	if _, err := lss[1].TryLock(ctx, "job/42", modes.EX); errors.Is(err, dlm.ErrNotQueued) {
		fmt.Println("job/42 is taken")
	}
	held.Unlock()
	// Output: job/42 is taken
}

// store refuses writes with a fencing token lower than the highest it has
// seen: what a database or object store must do for a lock to protect it.
type store struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

func (s *store) write(token uint64, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("stale token %d < %d", token, s.highest)
	}
	s.highest, s.value = token, v
	return nil
}

// Fencing: a holder that hangs past its TTL loses the lock to another
// holder; when it wakes up and writes, the store refuses its old token.
func ExampleLock_Token() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()
	var db store

	a, _ := lss[0].Lock(ctx, "coupon-event", modes.EX, dlm.WithTTL(200*time.Millisecond))
	// a hangs (a GC pause, say) and renews nothing: its TTL runs out.
	<-a.Lost()
	b, _ := lss[1].Lock(ctx, "coupon-event", modes.EX)
	fmt.Println("b writes:", db.write(b.Token(), "from b"))
	fmt.Println("a writes late:", db.write(a.Token(), "from a") != nil)
	fmt.Println("store holds:", db.value)
	b.Unlock()
	// Output:
	// b writes: <nil>
	// a writes late: true
	// store holds: from b
}

// Leader election: candidates campaign; observers see each leader and its
// fencing token.
func ExampleElection() {
	lss, stop := cluster(3)
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first, _ := lss[0].Election("scheduler").Campaign(ctx, []byte("node1"))
	seen := lss[2].Election("scheduler").Observe(ctx)
	fmt.Printf("leader: %s\n", (<-seen).Value)

	first.Resign(ctx)
	second, _ := lss[1].Election("scheduler").Campaign(ctx, []byte("node2"))
	for l := range seen { // observers may or may not see the gap between
		if string(l.Value) == "node2" {
			fmt.Printf("leader: %s, newer token: %v\n", l.Value, l.Token > first.Token())
			break
		}
	}
	second.Resign(ctx)
	// Output:
	// leader: node1
	// leader: node2, newer token: true
}

// A node-level cache of shared locks: many readers on one node share one PR
// lock at the master; a writer on another node retires it, waits for the
// readers' holds to end, and the next reader queues behind the writer.
func ExampleCache() {
	lss, stop := cluster(2)
	defer stop()
	ctx := context.Background()
	cache, err := lss[0].NewCache(dlm.DefaultCacheConfig())
	if err != nil {
		panic(err)
	}
	defer cache.Close()

	var holds []*dlm.Hold
	for range 3 { // one lock at the master, three holds on it
		h, err := cache.Acquire(ctx, "config")
		if err != nil {
			panic(err)
		}
		holds = append(holds, h)
	}
	fmt.Println("same grant:", holds[0].Token() == holds[2].Token())

	written := make(chan uint64)
	go func() {
		w, err := lss[1].Lock(ctx, "config", modes.EX) // waits for the holds
		if err != nil {
			panic(err)
		}
		written <- w.Token()
		w.Unlock()
	}()
	for _, h := range holds {
		h.Release()
	}
	writer := <-written
	h, err := cache.Acquire(ctx, "config") // a new grant, after the writer's
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("reader after writer:", h.Token() > writer)
	// Output:
	// same grant: true
	// reader after writer: true
}
