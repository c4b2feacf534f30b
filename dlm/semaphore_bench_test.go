package dlm

import (
	"context"
	"testing"
)

// BenchmarkLocalAcquireRelease: acquire and release one permit of a
// semaphore of 4 this node masters, for comparison with
// BenchmarkLocalLockUnlock.
func BenchmarkLocalAcquireRelease(b *testing.B) { benchAcquireRelease(b, 0) }

// BenchmarkRemoteAcquireRelease: the same, the semaphore mastered by
// another node over loopback TCP, for comparison with
// BenchmarkRemoteLockUnlock.
func BenchmarkRemoteAcquireRelease(b *testing.B) { benchAcquireRelease(b, 1) }

func benchAcquireRelease(b *testing.B, masterIdx int) {
	c := benchCluster(b, nil)
	names := resourcesOn(b, c, masterIdx, 1024)
	sems := make([]*Semaphore, len(names))
	for i, name := range names {
		sems[i] = mustSemaphore(b, c.ls[0], name, 4)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p, err := sems[i&1023].Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(); err != nil {
			b.Fatal(err)
		}
	}
}
