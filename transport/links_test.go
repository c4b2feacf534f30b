package transport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func TestSendCallGoReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]

		if err := a.links.Send("b", lockReq(1)); err != nil {
			t.Fatal(err)
		}
		callOK(t, a, "b", 2)
		done := make(chan uint64, 1)
		if err := b.links.Go("a", lockReq(3), func(rep wire.Message, err error) {
			if err != nil {
				t.Error(err)
			}
			done <- rep.(*wire.Completion).Lock
		}); err != nil {
			t.Fatal(err)
		}
		if got := <-done; got != 3 {
			t.Fatalf("Go reply for lock %d", got)
		}
		synctest.Wait()
		got := b.rec.messages()
		if len(got) != 2 || got[0].lock != 1 || got[1].lock != 2 || got[0].from != "a" {
			t.Fatalf("b received %+v", got)
		}
	})
}

func TestUnknownPeerAndInvalidMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		a := nodes["a"]
		if err := a.links.Send("zz", lockReq(1)); !errors.Is(err, transport.ErrUnknownPeer) {
			t.Fatalf("unknown peer: %v", err)
		}
		if err := a.links.Send("b", lockReq(0)); !errors.Is(err, wire.ErrInvalid) {
			t.Fatalf("invalid message: %v", err)
		}
		if err := a.links.Reply(transport.ReplyTo{Peer: "b"}, grant(1)); !errors.Is(err, transport.ErrNotRequest) {
			t.Fatalf("reply to one-way: %v", err)
		}
		// the refused message cost nothing: the link still works
		callOK(t, a, "b", 5)
		if _, err := a.links.Call(context.Background(), "b", &wire.Ping{}); !errors.Is(err, transport.ErrReserved) {
			t.Fatalf("Call with a Ping: %v", err)
		}
		hello := &wire.Hello{Version: wire.LinkVersion, ClusterID: cluster, Node: "a", BootID: 1, Session: 1}
		if err := a.links.Send("b", hello); !errors.Is(err, transport.ErrReserved) {
			t.Fatalf("Send of a Hello: %v", err)
		}
	})
}
