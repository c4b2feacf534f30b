package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestValueNotValidAfterMasterLoss: an EX holder writes the value and
// converts down (or unlocks); the master dies; the resource is rebuilt at a
// new master from survivors that hold it only in NL or CR, none of whom has
// a copy it may vouch for: the next grant that reads the value says it is
// not valid, never valid and empty.
func TestValueNotValidAfterMasterLoss(t *testing.T) {
	for _, down := range []string{"NL", "CR", "unlock"} {
		t.Run(down, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := startMem(t, 3, nil)
				defer c.close()
				res := c.resourceOn(1, "vl")
				keep := mustLock(t, c.ls[2], res, modes.NL)
				w := mustLock(t, c.ls[0], res, modes.EX)
				_ = w.SetValue([]byte("five"))
				var err error
				switch down {
				case "NL":
					err = w.Convert(bg, modes.NL)
				case "CR":
					err = w.Convert(bg, modes.CR)
				default:
					err = w.Unlock()
				}
				if err != nil {
					t.Fatal(err)
				}
				c.kill(1)
				c.waitView(2, 10*time.Second)
				if down == "CR" {
					mustUnlock(t, w) // the EX below waits for no one
				}
				ctx, cancel := context.WithTimeout(bg, 20*time.Second)
				defer cancel()
				if err := keep.Convert(ctx, modes.EX); err != nil {
					t.Fatal(err)
				}
				if v, ok := keep.Value(); ok {
					t.Fatalf("value after its master died with no holder above CR: %q, reported valid", v)
				}
				mustUnlock(t, keep)
			})
		})
	}
}

// TestDroppedStateKeepsReportsOfTheNextView: reports for a view this node
// has not installed yet (the others installed it first and reported their
// locks on what it masters there) survive the node dropping its own lock
// state on installing that view, as a node that missed a view (a zombie)
// does, or on being evicted: the rebuild needs them, or the locks they
// carry are lost at their master while their holders still believe in
// them, and the resource, recreated, hands out an empty value as valid.
func TestDroppedStateKeepsReportsOfTheNextView(t *testing.T) {
	for _, how := range []string{"zombie", "evicted"} {
		t.Run(how, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := startMem(t, 3, nil)
				defer c.close()
				nd := c.nodes[1]
				next := nd.epoch() + 1
				nd.acceptReport(c.nodes[2].Name(), &wire.LockReport{Epoch: next, Lockspace: "test", Locks: []wire.ReportedLock{
					{Resource: "counter", Lock: 7, Queue: wire.QueueGranted, Granted: modes.NL, Requested: modes.NL, Token: 3},
				}})
				why := errors.New("test: state dropped")
				if how == "zombie" {
					nd.dropLockState(why)
				} else {
					recoveryHost{nd}.LeaseLost(true)
				}
				rs := &nd.recov
				rs.mu.Lock()
				defer rs.mu.Unlock()
				if rs.buf == nil || rs.buf.epoch != next {
					t.Fatalf("the reports of epoch %d were dropped with the node's own state", next)
				}
				sp := rs.buf.spaces["test"]
				if sp == nil || len(sp.locks) != 1 || sp.locks[0].Resource != "counter" {
					t.Fatalf("reports of epoch %d after the drop: %+v", next, sp)
				}
			})
		})
	}
}
