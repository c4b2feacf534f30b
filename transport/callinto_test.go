package transport_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// CallInto decodes each reply into the message it is given, over TCP (where
// the caller reads its own reply) and in process (where the reader
// goroutine does); a reply of another type fails only that call, and a
// missing reply message is refused before anything is sent.
func TestCallInto(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		a, b := tcpPair(t)
		defer a.links.Close()
		defer b.links.Close()
		checkCallInto(t, a, b)
	})
	t.Run("memnet", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memCluster(t, newNet(t), nil, "a", "b")
			defer closeAll(nodes)
			checkCallInto(t, nodes["a"], nodes["b"])
		})
	})
}

func checkCallInto(t *testing.T, a, b *node) {
	ctx := context.Background()
	var c wire.Completion
	for lock := uint64(1); lock <= 20; lock++ {
		if err := a.links.CallInto(ctx, "b", lockReq(lock), &c); err != nil {
			t.Fatal(err)
		}
		if want := grant(lock); !reflect.DeepEqual(&c, want) {
			t.Fatalf("reply %+v, want %+v", c, *want)
		}
	}
	var ack wire.Ack
	if err := a.links.CallInto(ctx, "b", lockReq(21), &ack); !errors.Is(err, transport.ErrWrongReply) {
		t.Fatalf("a Completion into an Ack: %v", err)
	}
	if ack != (wire.Ack{}) {
		t.Fatalf("the refused reply changed the Ack: %+v", ack)
	}
	if err := a.links.CallInto(ctx, "b", lockReq(22), nil); err == nil {
		t.Fatal("CallInto without a reply message succeeded")
	}
	callOK(t, a, "b", 23) // the link is still up after the wrong reply
	var locks []uint64
	for _, m := range b.rec.messages() {
		locks = append(locks, m.lock)
	}
	if len(locks) != 22 || locks[20] != 21 || locks[21] != 23 {
		t.Fatalf("b received the requests of locks %v; want 1..21 and 23", locks)
	}
}

// A request's ReplyTo remembers the peer it came from, so that Reply needs
// no lookup; once that peer is removed it finds out by name, and fails as
// any reply to an unknown peer does.
func TestReplyAfterPeerRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memCluster(t, newNet(t), nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		kept := make(chan transport.ReplyTo, 1)
		b.rec.setHook(func(in transport.Inbound) {
			if in.ReplyTo.IsRequest() {
				select {
				case kept <- in.ReplyTo:
				default:
				}
			}
		})
		callOK(t, a, "b", 1)
		to := <-kept
		if err := b.links.Reply(to, grant(1)); err != nil {
			t.Fatalf("a second reply to a known peer: %v", err)
		}
		if err := b.links.Reply(to, &wire.Ping{}); !errors.Is(err, transport.ErrReserved) {
			t.Fatalf("reply with a Ping: %v", err)
		}
		b.links.RemovePeer("a")
		if err := b.links.Reply(to, grant(1)); !errors.Is(err, transport.ErrUnknownPeer) {
			t.Fatalf("reply to a removed peer: %v", err)
		}
		if err := b.links.Reply(to, &wire.Ping{}); !errors.Is(err, transport.ErrReserved) {
			t.Fatalf("reply with a Ping: %v", err)
		}
	})
}
