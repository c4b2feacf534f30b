package transport_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func cancelReq(lock uint64) *wire.CancelRequest {
	return &wire.CancelRequest{Epoch: 1, Lockspace: "ls", Resource: "res", Lock: lock}
}

// locksFrom returns the ids of the lock requests n received from peer, in
// the order it handled them.
func locksFrom(n *node, peer string) []uint64 {
	var out []uint64
	for _, m := range n.rec.messages() {
		if m.from == peer && m.typ == wire.TypeLockRequest {
			out = append(out, m.lock)
		}
	}
	return out
}

// A partition shorter than SessionTimeout loses nothing: pending calls wait
// through it, what is sent during it queues, and after the heal every
// message arrives once, in the order it was sent, and answers sent during
// the partition reach their calls.
func TestLinksUnderPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b", "c")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		callOK(t, a, "b", 1)
		callOK(t, a, "c", 2)

		// Requests b does not answer at once (the recorder answers lock
		// requests only): one asynchronous, one blocked in Call. b keeps
		// the second's ReplyTo, and answers during the partition.
		var mu sync.Mutex
		var later transport.ReplyTo
		b.rec.setHook(func(in transport.Inbound) {
			if c, ok := in.Msg.(*wire.CancelRequest); ok && c.Lock == 4 {
				mu.Lock()
				later = in.ReplyTo
				mu.Unlock()
			}
		})
		goErr := make(chan error, 1)
		if err := a.links.Go("b", cancelReq(3), func(_ wire.Message, err error) { goErr <- err }); err != nil {
			t.Fatal(err)
		}
		callDone := make(chan error, 1)
		go func() {
			rep, err := a.links.Call(context.Background(), "b", cancelReq(4))
			if err == nil && rep.(*wire.Completion).Lock != 4 {
				err = fmt.Errorf("reply %v", rep)
			}
			callDone <- err
		}()
		synctest.Wait() // both requests are pending

		net.Partition("a", "b")
		synctest.Wait()
		select {
		case err := <-goErr:
			t.Fatalf("pending Go ended by the partition: %v", err)
		case err := <-callDone:
			t.Fatalf("pending Call ended by the partition: %v", err)
		default:
		}
		// Sends queue while the session lives.
		for i := range uint64(100) {
			if err := a.links.Send("b", lockReq(100+i)); err != nil {
				t.Fatalf("Send during partition: %v", err)
			}
		}
		mu.Lock()
		rt := later
		mu.Unlock()
		if err := b.links.Reply(rt, grant(4)); err != nil {
			t.Fatalf("Reply during partition: %v", err)
		}
		callOK(t, a, "c", 7) // other peers are unaffected
		callOK(t, nodes["c"], "b", 8)

		time.Sleep(10 * time.Second) // the partition lasts; redials keep failing
		if err := a.links.Send("b", lockReq(200)); err != nil {
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
		if err := <-callDone; err != nil {
			t.Fatalf("Call answered during the partition: %v", err)
		}
		callOK(t, a, "b", 10)
		callOK(t, nodes["b"], "a", 11)
		want := []uint64{1}
		for i := range uint64(100) {
			want = append(want, 100+i)
		}
		want = append(want, 200, 10)
		if got := locksFrom(b, "a"); !slices.Equal(got, want) {
			t.Fatalf("b handled a's lock requests %v, want %v", got, want)
		}
		select {
		case err := <-goErr:
			t.Fatalf("pending Go ended: %v", err)
		default:
		}
		if got := counter(t, a.reg, "dlm_transport_reconnects_total"); got < 1 {
			t.Fatalf("reconnects_total = %v", got)
		}
	})
}

// A partition longer than SessionTimeout ends the session: pending calls
// fail, sends fail fast, both ends are told frames may be lost, and after
// the heal a new session carries on.
func TestSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		var mu sync.Mutex
		lost := map[string][]string{}
		nodes := memCluster(t, net, func(c *transport.Config) {
			me := c.Name
			c.SessionTimeout = 5 * time.Second
			c.OnSessionLost = func(peer string, err error) {
				mu.Lock()
				lost[me] = append(lost[me], peer)
				mu.Unlock()
			}
		}, "a", "b")
		defer closeAll(nodes)
		a := nodes["a"]
		callOK(t, a, "b", 1)
		goErr := make(chan error, 1)
		if err := a.links.Go("b", cancelReq(2), func(_ wire.Message, err error) { goErr <- err }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		net.Partition("a", "b")
		if err := a.links.Send("b", lockReq(3)); err != nil {
			t.Fatalf("Send at the start of the partition: %v", err)
		}
		time.Sleep(8 * time.Second)
		if err := <-goErr; !errors.Is(err, transport.ErrConnLost) {
			t.Fatalf("pending Go after the session timed out: %v", err)
		}
		if err := a.links.Send("b", lockReq(4)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Send after the session timed out: %v", err)
		}
		net.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.links.WaitConnected(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		callOK(t, a, "b", 5)
		if got := locksFrom(nodes["b"], "a"); !slices.Equal(got, []uint64{1, 5}) {
			t.Fatalf("b handled %v, want [1 5]: the timed-out session's queue is dropped", got)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(lost["a"], "b") || !slices.Contains(lost["b"], "a") {
			t.Fatalf("sessions lost reported: %v, want both ends", lost)
		}
	})
}

// Connection resets in the middle of a stream of messages lose nothing and
// duplicate nothing: the receiver handles every message once, in order.
func TestResetsLoseNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		callOK(t, a, "b", 1)
		callOK(t, b, "a", 2)
		const n = 20000
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range uint64(n) {
				if err := a.links.Send("b", lockReq(1000+i)); err != nil {
					t.Errorf("Send %d: %v", i, err)
					return
				}
				if err := b.links.Send("a", lockReq(1000+i)); err != nil {
					t.Errorf("Send back %d: %v", i, err)
					return
				}
				if i%32 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resets := 0
		for ; resets < 8; resets++ {
			if err := a.links.WaitConnected(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			default:
				time.Sleep(time.Duration(1+len(locksFrom(b, "a"))%7) * time.Millisecond)
				net.Reset("a", "b")
				continue
			}
			break
		}
		<-done
		t.Logf("%d resets while %d messages went each way", resets, n)
		if err := a.links.WaitConnected(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		callOK(t, a, "b", 3)
		callOK(t, b, "a", 4)
		for _, pair := range [][2]*node{{a, b}, {b, a}} {
			from := "a"
			if pair[0] == b {
				from = "b"
			}
			got := locksFrom(pair[1], from)
			if len(got) != n+2 {
				t.Fatalf("%s handled %d lock requests from %s, want %d", pair[1].links.Name(), len(got), from, n+2)
			}
			for i, id := range got[1 : n+1] {
				if id != 1000+uint64(i) {
					t.Fatalf("%s: message %d is lock %d, want %d (lost, repeated or out of order)", pair[1].links.Name(), i, id, 1000+i)
				}
			}
		}
		if got := counter(t, a.reg, "dlm_transport_reconnects_total"); got < 1 || resets < 4 {
			t.Fatalf("reconnects_total = %v after %d resets", got, resets)
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
