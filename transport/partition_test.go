package transport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func cancelReq(lock uint64) *wire.CancelRequest {
	return &wire.CancelRequest{Epoch: 1, Lockspace: "ls", Resource: "res", Lock: lock}
}

func TestLinksUnderPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b", "c")
		defer closeAll(nodes)
		a := nodes["a"]
		callOK(t, a, "b", 1)
		callOK(t, a, "c", 2)

		// Requests b will never answer (the recorder answers lock requests
		// only): one asynchronous, one blocked in Call.
		goErr := make(chan error, 1)
		if err := a.links.Go("b", cancelReq(3), func(_ wire.Message, err error) { goErr <- err }); err != nil {
			t.Fatal(err)
		}
		callErr := make(chan error, 1)
		go func() {
			_, err := a.links.Call(context.Background(), "b", cancelReq(4))
			callErr <- err
		}()
		synctest.Wait() // both requests are pending

		start := time.Now()
		net.Partition("a", "b")
		for _, ch := range []chan error{goErr, callErr} {
			if err := <-ch; !errors.Is(err, transport.ErrConnLost) {
				t.Fatalf("pending call ended with %v, want ErrConnLost", err)
			}
		}
		if d := time.Since(start); d > 0 {
			t.Fatalf("pending calls failed %v after the partition, want at once", d)
		}

		// fail fast while unreachable: no waiting, no queueing
		synctest.Wait()
		start = time.Now()
		if err := a.links.Send("b", lockReq(5)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Send during partition: %v", err)
		}
		if _, err := a.links.Call(context.Background(), "b", lockReq(6)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Call during partition: %v", err)
		}
		if d := time.Since(start); d > 0 {
			t.Fatalf("failing fast took %v", d)
		}
		callOK(t, a, "c", 7) // other peers are unaffected
		callOK(t, nodes["c"], "b", 8)

		time.Sleep(10 * time.Second) // the partition lasts; redials keep failing
		if err := a.links.Send("b", lockReq(9)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Send late in the partition: %v", err)
		}

		net.Heal()
		healed := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
			if err := nodes[pair[0]].links.WaitConnected(ctx, pair[1]); err != nil {
				t.Fatalf("%s→%s not reconnected: %v", pair[0], pair[1], err)
			}
		}
		// the reconnect waits at most one capped backoff (2 s) plus the dial
		if d := time.Since(healed); d > 3*time.Second {
			t.Fatalf("reconnected %v after heal", d)
		}
		callOK(t, a, "b", 10)
		callOK(t, nodes["b"], "a", 11)
		if got := counter(t, a.reg, "dlm_transport_reconnects_total"); got < 1 {
			t.Fatalf("reconnects_total = %v", got)
		}
	})
}

// A peer that is removed, or a Links that is closed, fails pending calls with
// its own sentinel, on a library goroutine.
func TestPendingCallsFailOnRemoveAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b", "c")
		defer closeAll(nodes)
		a := nodes["a"]
		callOK(t, a, "b", 1)
		callOK(t, a, "c", 1)
		removed, closed := make(chan error, 1), make(chan error, 1)
		if err := a.links.Go("b", cancelReq(2), func(_ wire.Message, err error) { removed <- err }); err != nil {
			t.Fatal(err)
		}
		if err := a.links.Go("c", cancelReq(3), func(_ wire.Message, err error) { closed <- err }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a.links.RemovePeer("b")
		if err := <-removed; !errors.Is(err, transport.ErrPeerRemoved) {
			t.Fatalf("after RemovePeer: %v", err)
		}
		if err := a.links.Send("b", lockReq(4)); !errors.Is(err, transport.ErrUnknownPeer) {
			t.Fatalf("Send to removed peer: %v", err)
		}
		if err := a.links.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-closed; !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
		if err := a.links.Send("c", lockReq(5)); !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Send after Close: %v", err)
		}
	})
}
