package transport_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

const lentMetric = "dlm_transport_reads_lent_total"

// TestCallsReadTheirOwnReplies: over TCP, once the reader goroutine has
// stepped aside, a Call reads its reply from the connection itself; over
// the in-process network the reader goroutine keeps reading.
func TestCallsReadTheirOwnReplies(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	defer b.links.Close()
	const calls = 200
	for i := range calls {
		callOK(t, a, "b", uint64(i+1))
	}
	lent := counter(t, a.reg, lentMetric)
	t.Logf("%d of %d calls read their own reply", int(lent), calls)
	if lent < calls/2 {
		t.Fatalf("%v of %d calls read their own reply, want most", lent, calls)
	}

	synctest.Test(t, func(t *testing.T) {
		nodes := memCluster(t, newNet(t), nil, "a", "b")
		defer closeAll(nodes)
		for i := range 20 {
			callOK(t, nodes["a"], "b", uint64(i+1))
		}
		if got := counter(t, nodes["a"].reg, lentMetric); got != 0 {
			t.Fatalf("in-process links lent their reading %v times", got)
		}
	})
}

// TestLentReadingKeepsOrder: while a's callers read b's connection in
// turn with its reader goroutine, b's own one-way messages and requests to
// a, which share that connection with the replies, are all handled, in the
// order b sent them. (Two callers: with more, one of them nearly always
// waits, and the reader goroutine keeps reading for it rather than step
// aside.)
func TestLentReadingKeepsOrder(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	defer b.links.Close()
	const callers, calls, sent = 2, 600, 3000
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				callOK(t, a, "b", uint64(c*calls+i+1))
			}
		})
	}
	wg.Go(func() {
		for i := range sent {
			m := &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: uint64(i + 1), Mode: 1}
			var err error
			if i%2 == 0 {
				err = b.links.Send("a", m)
			} else {
				_, err = b.links.Call(context.Background(), "a", lockReq(uint64(i+1)))
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	waitFor(t, func() bool { return len(a.rec.messages()) == sent })
	for i, m := range a.rec.messages() {
		if m.lock != uint64(i+1) {
			t.Fatalf("message %d from b is lock %d: out of order", i+1, m.lock)
		}
	}
	if lent := counter(t, a.reg, lentMetric); lent == 0 {
		t.Fatal("no call read its own reply: the test did not exercise lending")
	}
}

// TestLentReadingSlowReply: a reply that comes long after its Call started
// reading still reaches it, and so do the replies after it.
func TestLentReadingSlowReply(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	defer b.links.Close()
	callOK(t, a, "b", 1) // the reader steps aside for a's next call
	var answered sync.WaitGroup
	defer answered.Wait()
	b.rec.setHook(func(in transport.Inbound) {
		if _, ok := in.Msg.(*wire.Blocking); ok && in.ReplyTo.IsRequest() {
			answered.Add(1)
			time.AfterFunc(20*time.Millisecond, func() {
				defer answered.Done()
				_ = b.links.Reply(in.ReplyTo, grant(2))
			})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		rep, err := a.links.Call(ctx, "b", &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: 2, Mode: 1})
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := rep.(*wire.Completion); !ok || c.Lock != 2 {
			t.Fatalf("slow call %d: reply %#v", i, rep)
		}
		for j := range 5 {
			callOK(t, a, "b", uint64(10*i+j+3))
		}
	}
}

// TestLentReadingConnectionLoss: when the peer goes away while a call
// waits, the call fails with ErrConnLost, whether a helper or the reader
// goroutine meets the end of the connection.
func TestLentReadingConnectionLoss(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	callOK(t, a, "b", 1)
	errs := make(chan error, 1)
	go func() {
		// b never answers a Blocking sent as a request.
		_, err := a.links.Call(context.Background(), "b", &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: 2, Mode: 1})
		errs <- err
	}()
	waitFor(t, func() bool { return len(b.rec.messages()) == 2 })
	if err := b.links.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, transport.ErrConnLost) {
			t.Fatalf("waiting call ended with %v, want ErrConnLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting call not failed 10 s after its peer closed")
	}
}

// quietLinks spaces heartbeats a minute apart, so that a goroutine reading
// a connection for a waiter is not woken by them during a test.
func quietLinks(c *transport.Config) {
	c.HeartbeatInterval, c.IdleTimeout = time.Minute, 4*time.Minute
}

// within fails the test unless done is closed within 10 s.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting after 10 s", what)
	}
}

// TestLentCallCancelled: a Call reading the connection for a reply that
// never comes ends when its context does, although nothing else arrives
// to wake it.
func TestLentCallCancelled(t *testing.T) {
	a, b := tcpPairWith(t, quietLinks)
	defer a.links.Close()
	defer b.links.Close()
	lent := 0
	for i := range 20 {
		callOK(t, a, "b", uint64(i+1)) // the reader steps aside for the next
		cancel, done := unansweredCall(t, a, 2)
		waitFor(t, func() bool { return len(b.rec.messages()) == 2*i+2 })
		if transport.HelperReads(a.links, "b") { // the call does: nobody else waits
			lent++
		}
		cancel()
		within(t, done, "cancelled call")
	}
	if lent == 0 {
		t.Fatal("no cancelled call read the connection: the test did not exercise lending")
	}
	t.Logf("%d of 20 cancelled calls were reading the connection", lent)
}

// unansweredCall makes a call from a to b in a goroutine that b never
// answers (b's recorder does not answer a Blocking sent as a request); the
// call must end with context.Canceled once cancel is called, and done is
// closed when it has.
func unansweredCall(t *testing.T, a *node, lock uint64) (cancel func(), done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, err := a.links.Call(ctx, "b", &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: lock, Mode: 1})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call ended with %v", err)
		}
	}()
	return cancel, ended
}

// flag is a Waiter done once set.
type flag struct{ atomic.Bool }

func (f *flag) Done() bool { return f.Load() }

// TestLentReadingInterrupted: a goroutine reading the connection in Await
// for a waiter whose outcome comes from elsewhere leaves when the Lender is
// interrupted, although nothing arrives on the connection; the connection
// goes on working.
func TestLentReadingInterrupted(t *testing.T) {
	a, b := tcpPairWith(t, quietLinks)
	defer a.links.Close()
	defer b.links.Close()
	lent := 0
	for i := range 20 {
		callOK(t, a, "b", uint64(i+1))
		ld := a.links.Lender("b")
		if ld == nil {
			t.Fatal("no Lender for a TCP connection")
		}
		var w flag
		returned, interrupted := make(chan struct{}), make(chan bool)
		go func() {
			// Await either found the reading taken and returns at once, or
			// reads and stays until interrupted.
			reading := false
			for !reading {
				select {
				case <-returned:
				default:
					reading = transport.HelperReads(a.links, "b")
					runtime.Gosched()
					continue
				}
				break
			}
			w.Store(true)
			ld.Interrupt()
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Error("interrupted Await still reading after 10 s")
				_ = a.links.Close() // ends the read
			}
			interrupted <- reading
		}()
		ld.Await(context.Background(), &w).End()
		close(returned)
		if <-interrupted {
			lent++
		}
		if t.Failed() {
			return
		}
	}
	if lent == 0 {
		t.Fatal("no Await read the connection: the test did not exercise lending")
	}
	t.Logf("%d of 20 interrupted waits were reading the connection", lent)
	callOK(t, a, "b", 100)
	if ld := a.links.Lender("nobody"); ld != nil {
		t.Fatal("Lender for an unknown peer")
	}
	var nilLender *transport.Lender
	nilLender.Interrupt() // nothing to interrupt: no panic
	nilLender.Await(context.Background(), new(flag)).End()
}

// waitFor polls cond over real time (TCP tests), failing after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLentReadingManyWaiters: with more callers waiting at once than the
// reader goroutine keeps track of one by one (they then only count
// themselves), every call gets its reply; once they are done, the reader
// steps aside again, so a lone caller's calls read their own replies.
func TestLentReadingManyWaiters(t *testing.T) {
	// The watcher looks at the connection only every second once it
	// stepped down, so that the calls made alone find the reading free
	// however slowly this machine runs the caller between two of them.
	a, b := tcpPairWith(t, transport.SlowWatcher(time.Second))
	defer a.links.Close()
	defer b.links.Close()
	const callers, calls = 32, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				callOK(t, a, "b", uint64(c*calls+i+1))
			}
		})
	}
	wg.Wait()
	// The reader gives the reading back once nobody waits: at its next
	// read's end, which the test waits for rather than races.
	waitFor(t, func() bool { return !transport.HelperReads(a.links, "b") })
	before := counter(t, a.reg, lentMetric)
	const alone = 100
	for i := range alone {
		callOK(t, a, "b", uint64(callers*calls+i+1))
	}
	lent := counter(t, a.reg, lentMetric) - before
	t.Logf("%v of %d calls made alone read their own reply", lent, alone)
	if lent < alone/2 {
		t.Fatalf("%v of %d calls made alone after the crowd read their own reply, want most", lent, alone)
	}
}
