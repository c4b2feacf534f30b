package client

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestLostLocksGoBackAfterTheGrace: when the client's trust in its session
// runs out, Lost closes at once, but the locks go back to the agent only
// LostGrace later, so that the program can stop using them before the
// agent grants them to another; with LostGrace 0, at once.
func TestLostLocksGoBackAfterTheGrace(t *testing.T) {
	for _, grace := range []time.Duration{100 * time.Millisecond, 0} {
		t.Run(grace.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				agentEnd, clientEnd := net.Pipe()
				defer agentEnd.Close()
				c, cn := pipeClient(clientEnd)
				c.cfg.LostGrace = grace
				defer cn.fail(errConnLost)
				unlocks := make(chan uint64, 4)
				go readUnlocks(t, agentEnd, unlocks)
				lk := &Lock{ls: &Lockspace{c: c}, id: 7}
				c.mu.Lock()
				c.locks[lk.id] = lk
				c.extendTrustLocked(time.Now(), 10*time.Millisecond)
				c.mu.Unlock()

				time.Sleep(10 * time.Millisecond) // the trust runs out
				synctest.Wait()
				select {
				case <-lk.Lost():
				default:
					t.Fatal("Lost is still open after the client's trust ran out")
				}
				if grace > 0 {
					time.Sleep(grace - time.Millisecond)
					synctest.Wait()
					select {
					case id := <-unlocks:
						t.Fatalf("lock %d given back before the grace of %v passed", id, grace)
					default:
					}
					time.Sleep(time.Millisecond)
				}
				synctest.Wait()
				select {
				case id := <-unlocks:
					if id != lk.id {
						t.Fatalf("gave back lock %d, want %d", id, lk.id)
					}
				default:
					t.Fatalf("lock not given back %v after its loss", grace)
				}
				c.mu.Lock()
				c.closed = true
				c.mu.Unlock()
			})
		})
	}
}

// readUnlocks sends the lock of each ClientUnlock the client writes.
func readUnlocks(t *testing.T, r net.Conn, out chan<- uint64) {
	dec := wire.NewClientDecoder(wire.DefaultLimits())
	for {
		m, err := readFrame(r, dec)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) {
			return
		}
		if err != nil {
			t.Error(err)
			return
		}
		if u, ok := m.(*wire.ClientUnlock); ok {
			out <- u.Lock
		}
	}
}
