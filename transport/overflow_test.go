package transport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A peer whose reader stalls makes the sender's write buffer fill; past the
// limit the link is failed instead of blocking or growing, and it recovers
// once the peer reads again.
func TestWriteBufferLimitFailsLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		small := func(c *transport.Config) {
			c.Limits.MaxFrame = 784 << 10 // about the least wire allows: a view of wire.MaxMembers members with its configuration
			c.Limits.MaxRenew = 512
			c.WriteBufferLimit = 792 << 10
			c.WriteTimeout = time.Minute // the stall, not the write deadline, must trip
			c.IdleTimeout = time.Minute
		}
		nodes := memCluster(t, net, small, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		callOK(t, a, "b", 1)

		stalled, release := make(chan struct{}), make(chan struct{})
		b.rec.setHook(func(in transport.Inbound) {
			if bl, ok := in.Msg.(*wire.Blocking); ok && bl.Lock == 99 {
				close(stalled)
				<-release // b's reader stops reading
			}
		})
		pending := make(chan error, 1)
		if err := a.links.Go("b", cancelReq(2), func(_ wire.Message, err error) { pending <- err }); err != nil {
			t.Fatal(err)
		}
		if err := a.links.Send("b", &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: 99, Mode: modes.EX}); err != nil {
			t.Fatal(err)
		}
		<-stalled
		var err error
		sent := 0
		for ; sent < 100_000 && err == nil; sent++ { // bounded: the limit trips after ~15,000
			err = a.links.Send("b", lockReq(uint64(sent)+10))
		}
		if !errors.Is(err, transport.ErrWriteBufferFull) {
			t.Fatalf("after %d sends: %v, want ErrWriteBufferFull", sent, err)
		}
		if err := a.links.Send("b", lockReq(5)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Send after overflow: %v, want ErrUnreachable", err)
		}
		if err := <-pending; !errors.Is(err, transport.ErrConnLost) {
			t.Fatalf("pending call after overflow: %v", err)
		}
		if got := counter(t, a.reg, "dlm_transport_write_buffer_overflows_total"); got != 1 {
			t.Fatalf("overflows = %v", got)
		}
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.links.WaitConnected(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		callOK(t, a, "b", 3)
	})
}

// Under load, one write carries many messages.
func TestWritesCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		callOK(t, a, "b", 1)
		writes0 := counter(t, a.reg, "dlm_transport_write_syscalls_total")
		const n = 1000
		for i := range n {
			if err := a.links.Send("b", lockReq(uint64(i)+100)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		writes := counter(t, a.reg, "dlm_transport_write_syscalls_total") - writes0
		if got := len(b.rec.messages()); got != n+1 {
			t.Fatalf("b received %d messages, want %d", got, n+1)
		}
		if writes > n/10 { // a write per message would make it 1000
			t.Fatalf("%d messages took %v writes; want them coalesced", n, writes)
		}
		t.Logf("%d messages in %v writes", n, writes)
		// and in order
		for i, m := range b.rec.messages()[1:] {
			if m.lock != uint64(i)+100 {
				t.Fatalf("message %d is lock %d: out of order", i, m.lock)
			}
		}
	})
}
