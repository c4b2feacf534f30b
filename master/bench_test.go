package master

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// BenchmarkUncontendedLockUnlock: request and release of an EX lock on a
// resource with no other locks, the master's share of a local lock.
func BenchmarkUncontendedLockUnlock(b *testing.B) {
	t := New(DefaultConfig())
	names := make([]string, 1024)
	for i := range names {
		names[i] = "inode/" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := LockID{Node: 1, ID: uint64(i + 1)}
		if _, err := t.Request(Request{Resource: names[i&1023], Lock: id, Mode: modes.EX}); err != nil {
			b.Fatal(err)
		}
		if err := t.Release(Release{Lock: id}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContendedHandoff: an EX lock handed between two owners through
// the wait queue. Each op is one handoff: the holder releases, the waiter
// is granted, and a new request queues behind it.
func BenchmarkContendedHandoff(b *testing.B) {
	t := New(DefaultConfig())
	holder := LockID{Node: 1, ID: 1}
	if _, err := t.Request(Request{Resource: "hot", Lock: holder, Mode: modes.EX}); err != nil {
		b.Fatal(err)
	}
	waiter := LockID{Node: 2, ID: 1}
	if _, err := t.Request(Request{Resource: "hot", Lock: waiter, Mode: modes.EX}); err != nil {
		b.Fatal(err)
	}
	t.Effects()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := t.Release(Release{Lock: holder}); err != nil {
			b.Fatal(err)
		}
		if e := t.Effects(); len(e) == 0 || e[0].Kind != EffectGranted || e[0].Lock != waiter {
			b.Fatalf("no handoff: %v", e)
		}
		holder, waiter = waiter, LockID{Node: holder.Node, ID: uint64(i + 2)}
		if _, err := t.Request(Request{Resource: "hot", Lock: waiter, Mode: modes.EX}); err != nil {
			b.Fatal(err)
		}
		t.Effects()
	}
}

// BenchmarkMillionLocks: 1,000,000 granted locks on 1,000,000 resources.
// It reports the heap bytes per lock, counting everything the table holds
// for it: the lock, its resource, the two index entries and the name.
func BenchmarkMillionLocks(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t := New(DefaultConfig())
		for i := range n {
			name := fmt.Sprintf("fs1/inode/%08d", i)
			if _, err := t.Request(Request{Resource: name, Lock: LockID{Node: NodeID(i % 5), ID: uint64(i)}, Mode: modes.PR}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if r, l := t.Len(); r != n || l != n {
			b.Fatalf("table has %d resources, %d locks", r, l)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lock")
		runtime.KeepAlive(t)
	}
}

// BenchmarkRecoveryRebuild: what a master's table does in a recovery after
// one of five nodes died, at the size one shard of a node has at a million
// locks (16 shards): 12,500 resources with an EX lock each, 2,500 of them
// the dead node's, purged; 2,500 moved resources restored from the
// survivors' reports (EX, each offering its empty value block), then
// finished. ns/lock is per lock purged or restored.
func BenchmarkRecoveryRebuild(b *testing.B) {
	const kept, moved = 12_500, 2_500
	names := make([]string, kept+moved)
	for i := range names {
		names[i] = fmt.Sprintf("rec/%d", i)
	}
	var reports []LockState
	for i := range moved {
		reports = append(reports, LockState{
			Resource: names[kept+i], Lock: LockID{Node: NodeID(1 + i%4), ID: uint64(1_000_000 + i)},
			Queue: QueueGranted, Granted: modes.EX, Requested: modes.EX, Token: uint64(i + 1),
			LVB: &LVB{Valid: true},
		})
	}
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		t := New(DefaultConfig())
		for i := range kept {
			if _, err := t.Request(Request{Resource: names[i], Lock: LockID{Node: NodeID(1 + i%5), ID: uint64(i + 1)}, Mode: modes.EX}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for more := true; more; {
			_, more = t.PurgeNodeUpTo(5, 256)
		}
		for i := 0; i < len(reports); i += 256 {
			for _, ls := range reports[i:min(i+256, len(reports))] {
				if err := t.Restore(ls); err != nil {
					b.Fatal(err)
				}
			}
		}
		for t.FinishRecoveryUpTo(256) {
		}
		t.Effects()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(kept/5+moved), "ns/lock")
}

// BenchmarkRecoveryRebuildShards is BenchmarkRecoveryRebuild over the 16
// shards' tables of a node at a million locks, one table after another as
// dlm rebuilds them: 200,000 resources, more than the processor's caches
// hold, so that it counts the memory waits a real rebuild has.
func BenchmarkRecoveryRebuildShards(b *testing.B) {
	const shards, kept, moved = 16, 12_500, 2_500
	names := make([][]string, shards)
	reports := make([][]LockState, shards)
	for s := range shards {
		for i := range kept + moved {
			names[s] = append(names[s], fmt.Sprintf("rec/%d/%d", s, i))
		}
		for i := range moved {
			reports[s] = append(reports[s], LockState{
				Resource: names[s][kept+i], Lock: LockID{Node: NodeID(1 + i%4), ID: uint64(1_000_000 + i)},
				Queue: QueueGranted, Granted: modes.EX, Requested: modes.EX, Token: uint64(i + 1),
				LVB: &LVB{Valid: true},
			})
		}
	}
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		tables := make([]*Table, shards)
		for s := range tables {
			t := New(DefaultConfig())
			for i := range kept {
				if _, err := t.Request(Request{Resource: names[s][i], Lock: LockID{Node: NodeID(1 + i%5), ID: uint64(i + 1)}, Mode: modes.EX}); err != nil {
					b.Fatal(err)
				}
			}
			tables[s] = t
		}
		runtime.GC()
		b.StartTimer()
		for s, t := range tables {
			for more := true; more; {
				_, more = t.PurgeNodeUpTo(5, 256)
			}
			for i := 0; i < moved; i += 256 {
				for _, ls := range reports[s][i:min(i+256, moved)] {
					if err := t.Restore(ls); err != nil {
						b.Fatal(err)
					}
				}
				for t.FinishRecoveryUpTo(256) {
				}
				t.Effects()
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(shards*(kept/5+moved)), "ns/lock")
}
