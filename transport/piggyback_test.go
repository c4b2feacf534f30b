package transport_test

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// idleLink returns two nodes over TCP, heartbeats a minute apart, whose
// reader goroutines look at a parked connection only every watch, after
// two calls from a to b; with a watch of a second or more, a's link to b
// is then in the state Piggyback waits in: a call has read its own reply
// and nobody holds the reading.
func idleLink(t *testing.T, watch time.Duration) (a, b *node) {
	t.Helper()
	a, b = tcpPairWith(t, func(c *transport.Config) {
		quietLinks(c)
		transport.SlowWatcher(watch)(c)
	})
	t.Cleanup(func() { _ = a.links.Close(); _ = b.links.Close() })
	callOK(t, a, "b", 1)
	callOK(t, a, "b", 2) // the first call's reply may have been read by the reader goroutine
	// With a short watch, the reader goroutine reads again after its next look.
	if watch >= time.Second {
		waitFor(t, func() bool { return transport.ReadingFree(a.links, "b") })
	}
	return a, b
}

func unlockMsg(lock uint64) *wire.UnlockRequest {
	return &wire.UnlockRequest{Epoch: 1, Lockspace: "ls", Resource: "res", Lock: lock}
}

// count returns how many messages of type typ b has received.
func count(b *node, typ wire.Type) int {
	n := 0
	for _, m := range b.rec.messages() {
		if m.typ == typ {
			n++
		}
	}
	return n
}

// TestPiggybackRidesOnNextMessage: a piggybacked message waits while
// nothing else goes to its peer, and leaves with the next message, in
// order and in the same write.
func TestPiggybackRidesOnNextMessage(t *testing.T) {
	a, b := idleLink(t, time.Hour)
	writes := counter(t, a.reg, "dlm_transport_write_syscalls_total")
	if err := a.links.Piggyback("b", unlockMsg(7)); err != nil {
		t.Fatal(err)
	}
	// Waiting for something not to happen: a message written at once
	// arrives within microseconds.
	time.Sleep(50 * time.Millisecond)
	if n := count(b, wire.TypeUnlockRequest); n != 0 {
		t.Fatalf("the piggybacked unlock left on its own (%d received)", n)
	}
	if err := a.links.Send("b", lockReq(8)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(b.rec.messages()) == 4 })
	got := b.rec.messages()[2:]
	if got[0].typ != wire.TypeUnlockRequest || got[1].typ != wire.TypeLockRequest || got[1].lock != 8 {
		t.Fatalf("received %+v, want the unlock, then lock request 8", got)
	}
	if d := counter(t, a.reg, "dlm_transport_write_syscalls_total") - writes; d != 1 {
		t.Fatalf("%v writes carried the unlock and the request, want 1", d)
	}
}

// TestPiggybackParkedWatcherTakesIt: with nothing following it, a
// piggybacked message leaves when the parked reader goroutine next looks
// (every 20 µs by default); the heartbeats are a minute apart. Each one
// follows a call that read its own reply: the reading is then free and the
// reader goroutine parked, for one park only (it then reads again), so the
// message is piggybacked rather than posted nearly every time.
func TestPiggybackParkedWatcherTakesIt(t *testing.T) {
	a, b := idleLink(t, 0)
	free := 0
	for i := range 20 {
		callOK(t, a, "b", uint64(10+i))
		if transport.ReadingFree(a.links, "b") {
			free++
		}
		if err := a.links.Piggyback("b", unlockMsg(uint64(i+1))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return count(b, wire.TypeUnlockRequest) == i+1 })
	}
	t.Logf("the reading was free just before %d of 20 piggybacks", free)
}

// TestPiggybackWhileWaitingIsPost: while a goroutine waits for a reply on
// the link, a piggybacked message does not wait for company: the waiter
// may read for a long time, and nobody else looks.
func TestPiggybackWhileWaitingIsPost(t *testing.T) {
	a, b := idleLink(t, time.Hour)
	cancel, done := unansweredCall(t, a, 3)
	waitFor(t, func() bool { return count(b, wire.TypeBlocking) == 1 })
	if err := a.links.Piggyback("b", unlockMsg(7)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return count(b, wire.TypeUnlockRequest) == 1 })
	cancel()
	within(t, done, "cancelled call")
	if err := a.links.Piggyback("nobody", unlockMsg(7)); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("Piggyback to an unknown peer: %v, want ErrUnknownPeer", err)
	}
}
