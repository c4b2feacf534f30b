package wire

import (
	"fmt"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// benchLockReport is what a node sends the new master of a busy lockspace:
// n locks on distinct resources, most granted, a quarter with an LVB, some
// converting or waiting.
func benchLockReport(n int) *LockReport {
	lvb := []byte("0123456789abcdef0123456789abcdef")
	m := &LockReport{Epoch: 42, Lockspace: "fs1", Locks: make([]ReportedLock, n)}
	for i := range m.Locks {
		k := ReportedLock{Resource: fmt.Sprintf("inode/%07d", i), Lock: uint64(i+1) << 20, Owner: 77,
			Queue: QueueGranted, Granted: modes.PR, Requested: modes.PR, Token: 1e9 + uint64(i)}
		switch i % 10 {
		case 8:
			k.Queue, k.Requested = QueueConverting, modes.EX
		case 9:
			k.Queue, k.Granted, k.Requested, k.TTL = QueueWaiting, modes.NL, modes.PW, 30e9
		}
		if i%4 == 0 {
			k.LVB, k.LVBSeq, k.LVBFlags = lvb, uint64(i), LVBPresent|LVBValid
		}
		m.Locks[i] = k
	}
	return m
}

// BenchmarkLockReportCodec is encode + decode of a LockReport of 1000 locks
// into reused buffers, the codec's share of rebuilding a lock table after a
// view change. ns/lock is ns/op over the 1000 locks.
func BenchmarkLockReportCodec(b *testing.B) {
	const n = 1000
	l := DefaultLimits()
	d := NewDecoder(l)
	m := benchLockReport(n)
	buf, err := AppendFrame(nil, Header{ID: 9}, m, &l)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = AppendFrame(buf[:0], Header{ID: 9}, m, &l); err != nil {
			b.Fatal(err)
		}
		if _, _, err := d.DecodeFrame(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/lock")
}
