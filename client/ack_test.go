package client

import (
	"net"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestAckGoesAlone: a client that reads frame after frame and sends no
// request acknowledges on its own, naming the last reply it read, and
// does not acknowledge that reply again while only pushes follow it (an
// acknowledgement names a reply: the pushes are told with the next).
func TestAckGoesAlone(t *testing.T) {
	agentEnd, clientEnd := net.Pipe()
	defer agentEnd.Close()
	c, cn := pipeClient(clientEnd)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.acker() }()
	defer func() {
		close(c.stop)
		cn.fail(errConnLost)
		c.wg.Wait()
	}()
	dec := wire.NewClientDecoder(wire.DefaultLimits())
	nextAck := func() uint64 {
		t.Helper()
		_ = agentEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := readFrame(agentEnd, dec)
		if err != nil {
			t.Fatal(err)
		}
		a, ok := m.(*wire.ClientAck)
		if !ok {
			t.Fatalf("the client sent %T, want a ClientAck", m)
		}
		return a.Read
	}
	pushes := func(n int) {
		for i := range n {
			c.dispatch(cn, wire.Header{}, &wire.ClientLost{Lock: uint64(i + 1), Code: wire.CodeLockLost})
		}
	}
	c.dispatch(cn, wire.Header{ID: 5, Reply: true}, &wire.ClientOK{})
	pushes(2 * ackEvery)
	if read := nextAck(); read != 5 {
		t.Fatalf("acknowledged reply %d, want 5", read)
	}
	pushes(4 * ackEvery)
	c.dispatch(cn, wire.Header{ID: 9, Reply: true}, &wire.ClientOK{})
	if read := nextAck(); read != 9 {
		t.Fatalf("next acknowledged reply %d, want 9 (and reply 5 not again)", read)
	}
}
