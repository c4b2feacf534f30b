package client

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockUnlockAcrossAgents: clients of different agents lock resources
// mastered on every node; modes are honoured across agents, tokens
// increase, TryLock does not wait, and unlock hands the lock on.
func TestLockUnlockAcrossAgents(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c1, c2 := dial(t, a.addrs[0]), dial(t, a.addrs[1])
	ls1, ls2 := c1.Lockspace("test"), c2.Lockspace("test")
	for m := range 3 {
		res := a.resourceOn(m, "basic")
		pr1, err := ls1.Lock(bg, res, modes.PR)
		if err != nil {
			t.Fatal(err)
		}
		pr2, err := ls2.Lock(bg, res, modes.PR) // PR shares
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ls2.TryLock(bg, res, modes.EX); !errors.Is(err, lockapi.ErrNotQueued) {
			t.Fatalf("TryLock EX next to PR holders: %v", err)
		}
		ex := make(chan *Lock, 1)
		go func() {
			lk, err := ls2.Lock(bg, res, modes.EX)
			if err != nil {
				t.Error(err)
			}
			ex <- lk
		}()
		time.Sleep(20 * time.Millisecond)
		select {
		case <-ex:
			t.Fatal("EX granted next to PR holders")
		default:
		}
		if err := pr1.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := pr2.Unlock(); err != nil {
			t.Fatal(err)
		}
		lk := within(t, ex, 5*time.Second, "EX after the PR holders left")
		if lk.Token() <= max(pr1.Token(), pr2.Token()) {
			t.Fatalf("EX token %d not above the PR tokens %d, %d", lk.Token(), pr1.Token(), pr2.Token())
		}
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(); !errors.Is(err, lockapi.ErrNotHeld) {
			t.Fatalf("second unlock: %v", err)
		}
	}
}
