package dlm

import (
	"testing"
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
