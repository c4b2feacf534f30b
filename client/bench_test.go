package client

import (
	"testing"

	"github.com/seed-a6839e30/dlm/internal/pingpong"
	"github.com/seed-a6839e30/dlm/modes"
)

// BenchmarkTCPPingPong is the floor BenchmarkClientLockUnlock is measured
// against (docs/BENCHMARKS.md): run both in one invocation.
func BenchmarkTCPPingPong(b *testing.B) { pingpong.Bench(b) }

// BenchmarkClientLockUnlock: one client, one connection, lock and unlock
// of an uncontended resource its agent masters (a one-node cluster).
func BenchmarkClientLockUnlock(b *testing.B) {
	a := startAgents(b, 1, nil, nil)
	c := dial(b, a.addrs[0])
	ls := c.Lockspace("bench")
	b.ReportAllocs()
	for b.Loop() {
		lk, err := ls.Lock(bg, "r", modes.EX)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}
