package dlm

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockSize bounds the size of a Lock: past 192 bytes (an allocation
// size class) it would cost 16 bytes a lock more, and a million locks are
// a million Locks. What few locks need goes in lockExt or, for a value
// block, heldValue.
func TestLockSize(t *testing.T) {
	if s := unsafe.Sizeof(Lock{}); s > 192 {
		t.Errorf("Lock is %d bytes, want at most 192", s)
	}
}

// TestHeldLockKeepsNoChannel: a lock whose request had to wait does not keep
// the channel it waited on once granted: a held lock costs its Lock, not 96
// bytes more and an object every collection scans. Both a master on the
// holder's own node and one across the network.
func TestHeldLockKeepsNoChannel(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 2, nil)
		defer c.close()
		for _, on := range []int{0, 1} {
			res := c.resourceOn(on, "chan")
			first := mustLock(t, c.ls[1-on], res, modes.EX)
			got := make(chan *Lock, 1)
			go func() { got <- mustLock(t, c.ls[0], res, modes.EX) }()
			synctestWait() // the second request waits at its master
			mustUnlock(t, first)
			lk := <-got
			lk.sh.mu.Lock()
			kept := lk.done != nil
			lk.sh.mu.Unlock()
			if kept {
				t.Errorf("master on node %d: a held lock keeps its done channel", on)
			}
			mustUnlock(t, lk)
		}
	})
}

// TestPlainLockKeepsNoExtras: a held lock on a resource whose value was
// never written carries no value copy and no lockExt, so it costs its Lock
// alone; one granted on a resource with a value gets the copy and its
// sequence. Both a master on the holder's own node and one across the
// network.
func TestPlainLockKeepsNoExtras(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 2, nil)
		defer c.close()
		extras := func(lk *Lock) (value bool, ext bool) {
			lk.sh.mu.Lock()
			defer lk.sh.mu.Unlock()
			return lk.value != nil, lk.ext.Load() != nil
		}
		for _, on := range []int{0, 1} {
			plain := mustLock(t, c.ls[0], c.resourceOn(on, "plain"), modes.EX)
			if value, ext := extras(plain); value || ext {
				t.Errorf("master on node %d: a plain held lock has a value copy %v, a lockExt %v; want neither", on, value, ext)
			}
			mustUnlock(t, plain)

			res := c.resourceOn(on, "valued")
			keep := mustLock(t, c.ls[1], res, modes.NL) // the value lives as long as its resource
			w := mustLock(t, c.ls[0], res, modes.EX)
			w.SetValue([]byte("v1"))
			mustUnlock(t, w)
			r := mustLock(t, c.ls[0], res, modes.PR)
			if value, ext := extras(r); !value || ext {
				t.Errorf("master on node %d: a reader of a written value has a value copy %v, a lockExt %v; want the copy alone", on, value, ext)
			}
			if v, ok := r.Value(); string(v) != "v1" || !ok || r.ValueSeq() != 1 {
				t.Errorf("master on node %d: reader sees %q valid %v seq %d, want \"v1\" valid seq 1", on, v, ok, r.ValueSeq())
			}
			mustUnlock(t, r)
			mustUnlock(t, keep)
		}
	})
}

// TestLostAskedAfterTheLoss: a lock lost before anyone asked for Lost
// gets no channel at its loss, and the first Lost after it returns one
// already closed.
func TestLostAskedAfterTheLoss(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 2, nil)
		defer c.close()
		res := c.resourceOn(1, "lost-late")
		lk := mustLock(t, c.ls[0], res, modes.EX, WithTTL(time.Second))
		// The master re-grants only after the holder's own clock gave the
		// lock up: once the next holder has it, the first one is lost.
		next := mustLock(t, c.ls[1], res, modes.EX)
		lk.sh.mu.Lock()
		made := lk.ext.Load().lost != nil
		lk.sh.mu.Unlock()
		if made {
			t.Error("a loss nobody watched made the Lost channel")
		}
		select {
		case <-lk.Lost():
		default:
			t.Fatal("Lost after the loss returned an open channel")
		}
		if !errors.Is(lk.Err(), ErrLockLost) {
			t.Errorf("Err after the loss: %v, want ErrLockLost", lk.Err())
		}
		mustUnlock(t, next)
	})
}
