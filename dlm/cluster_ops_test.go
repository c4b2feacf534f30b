package dlm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestFIFOAcrossNodes: EX requests from different nodes are granted in the
// order they were queued at the master, whoever masters the resource.
func TestFIFOAcrossNodes(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		for masterIdx := range 2 {
			res := c.resourceOn(masterIdx, "fifo")
			holder := mustLock(t, c.ls[0], res, modes.EX)
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			got := make([]*Lock, len(c.ls))
			for i := 1; i < len(c.ls); i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lk := mustLock(t, c.ls[i], res, modes.EX)
					mu.Lock()
					order = append(order, i)
					got[i] = lk
					mu.Unlock()
				}()
				c.settle(c.queued(res, i)) // each request queued before the next is made
			}
			mustUnlock(t, holder)
			for i := 1; i < len(c.ls); i++ {
				c.settle(func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == i })
				mu.Lock()
				lk := got[i]
				mu.Unlock()
				mustUnlock(t, lk)
			}
			wg.Wait()
			if want := []int{1, 2, 3, 4}[:len(c.ls)-1]; !slices.Equal(order, want) {
				t.Errorf("master %d: grant order %v, want %v", masterIdx, order, want)
			}
		}
	})
}

// TestConversionsAcrossNodes: in-place and queued conversions, and both
// outcomes of a conversion deadlock, with the locks on different nodes.
func TestConversionsAcrossNodes(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(2, "conv")
		a := mustLock(t, c.ls[0], res, modes.PR)
		b := mustLock(t, c.ls[1], res, modes.PR)
		// An up-conversion blocked by the other PR queues...
		done := make(chan error, 1)
		go func() { done <- a.Convert(bg, modes.EX) }()
		c.settle(c.queued(res, 1))
		// ...and the second PR->EX is a conversion deadlock, refused at once.
		if err := b.Convert(bg, modes.EX); !errors.Is(err, ErrDeadlock) {
			t.Fatalf("second PR->EX: %v, want ErrDeadlock", err)
		}
		if b.Mode() != modes.PR {
			t.Fatalf("deadlocked lock is %v, want PR kept", b.Mode())
		}
		// Down-converting the second lock lets the first in.
		if err := b.Convert(bg, modes.NL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || a.Mode() != modes.EX {
			t.Fatalf("PR->EX: %v, mode %v", err, a.Mode())
		}
		// DemoteOnDeadlock: the second converter drops to NL and waits.
		if err := a.Convert(bg, modes.PR); err != nil {
			t.Fatal(err)
		}
		if err := b.Convert(bg, modes.PR); err != nil {
			t.Fatal(err)
		}
		go func() { done <- a.Convert(bg, modes.EX) }()
		c.settle(c.queued(res, 1))
		go func() { done <- b.Convert(bg, modes.EX, DemoteOnDeadlock()) }()
		if err := <-done; err != nil { // a gets EX once b is demoted
			t.Fatal(err)
		}
		mustUnlock(t, a)
		if err := <-done; err != nil || b.Mode() != modes.EX || !b.Demoted() {
			t.Fatalf("demoted conversion: %v, mode %v, demoted %v", err, b.Mode(), b.Demoted())
		}
		mustUnlock(t, b)
	})
}

// TestLVBAcrossNodes: a value written by an EX holder on one node is read
// by the next holder on another node, with its sequence.
func TestLVBAcrossNodes(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(2, "lvb")
		keep := mustLock(t, c.ls[2], res, modes.NL) // keeps the value alive
		w := mustLock(t, c.ls[0], res, modes.EX)
		if err := w.SetValue([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		mustUnlock(t, w)
		r := mustLock(t, c.ls[1], res, modes.PR)
		if v, ok := r.Value(); string(v) != "hello" || !ok || r.ValueSeq() != 1 {
			t.Fatalf("read %q valid=%v seq=%d", v, ok, r.ValueSeq())
		}
		// A PR holder cannot write; a PW holder writes on down-conversion.
		_ = r.SetValue([]byte("ignored"))
		mustUnlock(t, r)
		w = mustLock(t, c.ls[1], res, modes.PW)
		_ = w.SetValue([]byte("v2"))
		if err := w.Convert(bg, modes.CR); err != nil {
			t.Fatal(err)
		}
		if err := keep.Convert(bg, modes.PR); err != nil {
			t.Fatal(err)
		}
		if v, _ := keep.Value(); string(v) != "v2" || keep.ValueSeq() != 2 {
			t.Fatalf("after PW write: %q seq %d", v, keep.ValueSeq())
		}
		if err := w.SetValue(make([]byte, 65)); !errors.Is(err, ErrLimit) {
			t.Fatalf("oversized value: %v", err)
		}
		mustUnlock(t, w)
		mustUnlock(t, keep)
	})
}

// TestBlockingCallbacks: the holders that block a request, and only they,
// hear the requested mode, on their own node.
func TestBlockingCallbacks(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(1, "bast")
		type heard struct {
			node int
			mode modes.Mode
		}
		calls := make(chan heard, 10)
		on := func(node int) LockOption {
			return OnBlocking(func(m modes.Mode) { calls <- heard{node, m} })
		}
		pr := mustLock(t, c.ls[0], res, modes.PR, on(0))
		cr := mustLock(t, c.ls[2], res, modes.CR, on(2))
		nl := mustLock(t, c.ls[1], res, modes.NL, on(1)) // NL blocks nothing
		done := make(chan *Lock, 1)
		go func() { done <- mustLock(t, c.ls[1], res, modes.PW) }()
		got := []heard{<-calls}
		// PW is blocked by PR only (CR and NL are compatible with it).
		c.settle(c.queued(res, 1))
		select {
		case h := <-calls:
			got = append(got, h)
		default:
		}
		if len(got) != 1 || got[0] != (heard{0, modes.PW}) {
			t.Fatalf("heard %v, want only node 0 told PW", got)
		}
		// The PR holder gives way in its callback's spirit: down to NL.
		if err := pr.Convert(bg, modes.NL); err != nil {
			t.Fatal(err)
		}
		pw := <-done
		// A new EX request: PW, CR and both NLs... CR and PW holders hear EX.
		go func() { done <- mustLock(t, c.ls[0], res, modes.EX) }()
		c.settle(c.queued(res, 1))
		var ex []heard
		for len(ex) < 1 {
			ex = append(ex, <-calls)
		}
		mustUnlock(t, pw)
		mustUnlock(t, cr)
		for _, h := range ex {
			if h.node != 2 || h.mode != modes.EX {
				t.Errorf("unexpected callback %v", h)
			}
		}
		mustUnlock(t, <-done)
		mustUnlock(t, nl)
		mustUnlock(t, pr)
	})
}

// TestTryLockDoesNotBarge: a compatible TryLock still fails while a
// request waits (FIFO), and leaves nothing queued.
func TestTryLockDoesNotBarge(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(0, "try")
		pr := mustLock(t, c.ls[0], res, modes.PR)
		done := make(chan *Lock, 1)
		go func() { done <- mustLock(t, c.ls[1], res, modes.EX) }()
		c.settle(c.queued(res, 1))
		if _, err := c.ls[2].TryLock(bg, res, modes.PR); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("TryLock past a waiter: %v", err)
		}
		c.settle(c.queued(res, 1))
		mustUnlock(t, pr)
		mustUnlock(t, <-done)
	})
}

// TestCancellationAndDeadlines: a waiting request withdrawn by its
// context leaves the queue, and reports both the dlm and the context error.
func TestCancellationAndDeadlines(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		for masterIdx := range 2 {
			res := c.resourceOn(masterIdx, "cancel")
			ex := mustLock(t, c.ls[0], res, modes.EX)
			ctx, cancel := context.WithCancel(bg)
			errc := make(chan error, 1)
			go func() {
				_, err := c.ls[1].Lock(ctx, res, modes.PR)
				errc <- err
			}()
			c.settle(c.queued(res, 1))
			cancel()
			if err := <-errc; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled lock: %v", err)
			}
			c.settle(c.queued(res, 0))
			dctx, dcancel := context.WithTimeout(bg, 50*time.Millisecond)
			_, err := c.ls[1].Lock(dctx, res, modes.PR)
			dcancel()
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("lock past its deadline: %v", err)
			}
			c.settle(c.queued(res, 0))
			// With nothing left waiting, the resource is free once EX goes
			// (an unlock is asynchronous: wait for the master to see it).
			mustUnlock(t, ex)
			c.settle(c.free(res))
			lk, err := c.ls[2].TryLock(bg, res, modes.EX)
			if err != nil {
				t.Fatalf("resource not free after cancel: %v", err)
			}
			mustUnlock(t, lk)
		}
	})
}
