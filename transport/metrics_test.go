package transport_test

import (
	"testing"
	"testing/synctest"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The traffic counters: what one node counts as sent, by type and bytes,
// the other counts as received, and a removed peer's messages stay
// counted.
func TestTrafficCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memCluster(t, newNet(t), nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		for i := range 3 {
			if err := a.links.Send("b", lockReq(uint64(i+1))); err != nil {
				t.Fatal(err)
			}
		}
		callOK(t, a, "b", 4)
		synctest.Wait()
		req, rep := wire.TypeLockRequest.String(), wire.TypeCompletion.String()
		for _, c := range []struct {
			node        *node
			name, typ   string
			want        float64
			bytesSentBy *node
		}{
			{a, "dlm_transport_messages_sent_total", req, 4, nil},
			{b, "dlm_transport_messages_received_total", req, 4, a},
			{b, "dlm_transport_messages_sent_total", rep, 1, nil},
			{a, "dlm_transport_messages_received_total", rep, 1, b},
		} {
			if got := counter(t, c.node.reg, c.name, "type", c.typ); got != c.want {
				t.Errorf("%s: %s{type=%s} = %v, want %v", c.node.links.Name(), c.name, c.typ, got, c.want)
			}
			if c.bytesSentBy == nil {
				continue
			}
			sent := counter(t, c.bytesSentBy.reg, "dlm_transport_bytes_sent_total", "type", c.typ)
			recv := counter(t, c.node.reg, "dlm_transport_bytes_received_total", "type", c.typ)
			if sent == 0 || sent != recv {
				t.Errorf("%s bytes: %v sent, %v received", c.typ, sent, recv)
			}
		}
		writes := counter(t, a.reg, "dlm_transport_write_syscalls_total")
		if writes == 0 {
			t.Error("no write counted")
		}
		a.links.RemovePeer("b")
		synctest.Wait() // its manager goroutine has ended and retired it
		if got := counter(t, a.reg, "dlm_transport_messages_sent_total", "type", req); got != 4 {
			t.Errorf("after the peer was removed, %v lock requests counted as sent, want 4", got)
		}
		if got := counter(t, a.reg, "dlm_transport_write_syscalls_total"); got != writes {
			t.Errorf("after the peer was removed, %v writes counted, want %v", got, writes)
		}
	})
}
