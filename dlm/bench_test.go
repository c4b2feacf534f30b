package dlm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/pingpong"
	"github.com/seed-a6839e30/dlm/modes"
)

// benchCluster starts a 3-node cluster over loopback TCP for a benchmark.
func benchCluster(b *testing.B, mut func(*Config)) *cluster {
	b.Helper()
	c := startTCP(b, 3, mut)
	b.Cleanup(c.close)
	return c
}

// BenchmarkTCPPingPong is the floor the round trips here are measured
// against, run in the same invocation: a plain TCP ping-pong over loopback.
func BenchmarkTCPPingPong(b *testing.B) { pingpong.Bench(b) }

// BenchmarkLocalLockUnlock: lock and unlock (EX) of a resource this node
// masters: no encoding, no network, no extra goroutine.
func BenchmarkLocalLockUnlock(b *testing.B) { benchLockUnlock(b, 0) }

// BenchmarkCacheHit: acquire and release a hold on a cached PR lock whose
// master is another node: after the first, no message at all.
func BenchmarkCacheHit(b *testing.B) {
	c := benchCluster(b, nil)
	names := resourcesOn(b, c, 1, 64)
	cache, err := c.ls[0].NewCache(DefaultCacheConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h, err := cache.Acquire(ctx, names[i&63])
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoteLockUnlock: lock and unlock (EX) of a resource mastered by
// another node over loopback TCP: one round trip for the lock, and a
// one-way message for the unlock.
func BenchmarkRemoteLockUnlock(b *testing.B) { benchLockUnlock(b, 1) }

// benchLockUnlock locks and unlocks (EX), from node 0, resources that node
// masterIdx masters.
func benchLockUnlock(b *testing.B, masterIdx int) {
	c := benchCluster(b, nil)
	names := resourcesOn(b, c, masterIdx, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lk, err := c.ls[0].Lock(ctx, names[i&1023], modes.EX)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

func resourcesOn(b *testing.B, c *cluster, idx, n int) []string {
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("bench/%d", i)
		if c.ls[0].MasterOf(name) == c.nodes[idx].Name() {
			names = append(names, name)
		}
	}
	return names
}

// BenchmarkClusterThroughput: 3 nodes in one process, 64 goroutines per
// node, each locking and unlocking (EX) random resources out of 100,000.
// It reports lock+unlock pairs per second for the whole cluster.
func BenchmarkClusterThroughput(b *testing.B) {
	c := benchCluster(b, nil)
	const resources = 100_000
	names := make([]string, resources)
	for i := range names {
		names[i] = fmt.Sprintf("r/%d", i)
	}
	const perNode = 64
	var next atomic.Int64
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	errc := make(chan error, perNode*len(c.ls))
	for i, ls := range c.ls {
		for g := range perNode {
			go func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				for next.Add(1) <= int64(b.N) {
					lk, err := ls.Lock(ctx, names[rng.IntN(resources)], modes.EX)
					if err == nil {
						err = lk.Unlock()
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
		}
	}
	for range perNode * len(c.ls) {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
}

// BenchmarkFailoverTCP measures, on 3 nodes over loopback TCP with the
// default timing, how long after a node holding an EX lock is halted (as a
// crash would: no leave, its sockets cut) a waiter on another node is
// granted that lock: failure detection, the new view, recovery and the
// lock-delay, end to end. The holder's node masters nothing relevant: the
// resource is mastered by the third node, so this is the holder-death path
// (a master death adds remastering, which BenchmarkRecovery measures).
func BenchmarkFailoverTCP(b *testing.B) {
	for range b.N {
		b.StopTimer()
		c := startTCP(b, 3, nil)
		res := c.resourceOn(2, "failover")
		mustLock(b, c.ls[0], res, modes.EX)
		got := make(chan error, 1)
		go func() {
			lk, err := c.ls[1].Lock(context.Background(), res, modes.EX)
			if err == nil {
				err = lk.Unlock()
			}
			got <- err
		}()
		c.settle(c.queued(res, 1))
		start := time.Now()
		b.StartTimer()
		c.nodes[0].Halt()
		c.nodes[0] = nil
		if err := <-got; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "s/failover")
		c.close()
	}
}
