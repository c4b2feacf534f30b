package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockWaitsForQuorum: a node cut off from the cluster loses its
// quorum; a Lock issued there waits (FailFast fails at once, a context
// ends the wait with its error and ErrNoQuorum), and is granted once the
// partition heals and the node is back in a view.
func TestLockWaitsForQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		held := mustLock(t, c.ls[0], "q-held", modes.EX)
		sem := mustSemaphore(t, c.ls[0], "q-sem", 2)
		c.net.Isolate(c.nodes[0].Name())
		<-held.Lost()

		if _, err := c.ls[0].Lock(bg, "q", modes.EX, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast without quorum: %v", err)
		}
		if _, err := sem.Acquire(bg, 1, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast Acquire without quorum: %v", err)
		}
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		_, err := c.ls[0].Lock(ctx, "q", modes.EX)
		cancel()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("Lock whose context ends while it waits for quorum: %v", err)
		}

		type result struct {
			err error
			at  time.Time
		}
		lockDone, semDone := make(chan result, 1), make(chan result, 1)
		go func() {
			lk, err := c.ls[0].Lock(bg, "q", modes.EX)
			if err == nil {
				err = lk.Unlock()
			}
			lockDone <- result{err, time.Now()}
		}()
		go func() {
			p, err := sem.Acquire(bg, 2)
			if err == nil {
				err = p.Release()
			}
			semDone <- result{err, time.Now()}
		}()
		time.Sleep(5 * time.Second) // well past any recovery: they must still wait
		select {
		case r := <-lockDone:
			t.Fatalf("Lock without quorum returned %v before the heal", r.err)
		case r := <-semDone:
			t.Fatalf("Acquire without quorum returned %v before the heal", r.err)
		default:
		}
		healed := time.Now()
		c.net.Heal()
		for _, ch := range []chan result{lockDone, semDone} {
			r := <-ch
			if r.err != nil {
				t.Fatalf("after the heal: %v", r.err)
			}
			if took := r.at.Sub(healed); took > 30*time.Second {
				t.Fatalf("granted %v after the heal", took)
			}
		}
		if err := held.Unlock(); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("unlock of the lock lost with quorum: %v", err)
		}
	})
}

// TestConvertWaitsForMastersQuorum: the resource's master is cut off from
// every node but the holder's, so it loses its quorum and refuses the
// holder's conversions. With FailFast a conversion fails at once with
// ErrNoQuorum, the lock keeping its mode; without it the conversion is
// asked again (a context that ends meanwhile says it timed out, and that
// it waited for quorum), and is granted once the partition heals.
func TestConvertWaitsForMastersQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 5, nil)
		defer c.close()
		res := c.resourceOn(1, "cv")
		lk := mustLock(t, c.ls[0], res, modes.PR)
		cutOffMasterFromAllButHolder(t, c)
		start := time.Now()
		if err := lk.Convert(bg, modes.EX, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast conversion at a master without quorum: %v (master %s)", err, c.ls[0].MasterOf(res))
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("FailFast conversion took %v", d)
		}
		if lk.Mode() != modes.PR || lk.Err() != nil {
			t.Fatalf("after the refused conversion: mode %v, err %v; want PR, held", lk.Mode(), lk.Err())
		}
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		err := lk.Convert(ctx, modes.EX)
		cancel()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("conversion whose context ends while the master has no quorum: %v", err)
		}
		if lk.Mode() != modes.PR || lk.Err() != nil {
			t.Fatalf("after the timed-out conversion: mode %v, err %v; want PR, held", lk.Mode(), lk.Err())
		}
		done := make(chan error, 1)
		go func() { done <- lk.Convert(bg, modes.EX) }()
		time.Sleep(3 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("the conversion answered %v while its master had no quorum", err)
		default:
		}
		c.net.Heal()
		if err := <-done; err != nil {
			t.Fatalf("conversion after the heal: %v", err)
		}
		if lk.Mode() != modes.EX {
			t.Fatalf("mode %v after the conversion", lk.Mode())
		}
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelWhileWaitingForQuorum: a Lock, a TryLock and an Acquire that
// wait for this node's quorum end the moment their context is cancelled,
// with its error (and ErrNoQuorum, what they waited for), and leave
// nothing behind: once quorum is back, and well after, another node takes
// EX and every permit at once, and the resources' masters know of no
// other lock.
func TestCancelWhileWaitingForQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "cancel")
		semName := c.resourceOn(2, "cancel-sem")
		sem := mustSemaphore(t, c.ls[0], semName, 2)
		held := mustLock(t, c.ls[0], c.resourceOn(1, "cancel-held"), modes.PR)
		c.net.Isolate(c.nodes[0].Name())
		<-held.Lost()
		if err := held.Convert(bg, modes.EX); !errors.Is(err, ErrLockLost) {
			t.Fatalf("conversion of a lock lost with this node's quorum: %v", err)
		}

		ctx, cancel := context.WithCancel(bg)
		type result struct {
			what string
			err  error
			at   time.Time
		}
		got := make(chan result, 3)
		go func() {
			_, err := c.ls[0].Lock(ctx, res, modes.EX)
			got <- result{"Lock", err, time.Now()}
		}()
		go func() {
			_, err := c.ls[0].TryLock(ctx, res, modes.PR)
			got <- result{"TryLock", err, time.Now()}
		}()
		go func() {
			_, err := sem.Acquire(ctx, 2)
			got <- result{"Acquire", err, time.Now()}
		}()
		time.Sleep(2 * time.Second)
		select {
		case r := <-got:
			t.Fatalf("%s answered without quorum: %v", r.what, r.err)
		default:
		}
		cancelled := time.Now()
		cancel()
		for range 3 {
			var r result
			select {
			case r = <-got:
			case <-time.After(time.Second):
				t.Fatal("a call waiting for quorum did not end within 1s of its cancel")
			}
			if !errors.Is(r.err, ErrCancelled) || !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, ErrNoQuorum) {
				t.Fatalf("%s cancelled while waiting for quorum: %v", r.what, r.err)
			}
			if d := r.at.Sub(cancelled); d > 0 {
				t.Fatalf("%s returned %v after its cancel", r.what, d)
			}
		}

		c.net.Heal()
		for c.nodes[0].State() != StateServing {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(10 * time.Second) // anything the cancelled calls left would be granted by now
		lk, err := c.ls[1].TryLock(bg, res, modes.EX)
		if err != nil {
			t.Fatalf("EX from another node after the cancels: %v", err)
		}
		p, err := mustSemaphore(t, c.ls[1], semName, 2).TryAcquire(bg, 2)
		if err != nil {
			t.Fatalf("every permit from another node after the cancel: %v", err)
		}
		for _, name := range []string{res, semName} {
			d, err := c.ls[0].Describe(bg, name)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Granted) != 1 || len(d.Converting)+len(d.Waiting) != 0 || d.Granted[0].Node != c.nodes[1].Name() {
				t.Fatalf("%s after the cancels: %+v, want n2's grant alone", name, d)
			}
		}
		mustUnlock(t, lk)
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRefusedDownConversionKeepsItsValue: an EX holder sets a value and
// converts down while the resource's master has no quorum. The master
// refuses the conversion, so it wrote nothing: the value must go with the
// conversion asked again (or the unlock) and be what the next EX holder
// reads. Both ways a conversion is asked again are checked: by the caller
// after FailFast, and by Convert itself.
func TestRefusedDownConversionKeepsItsValue(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 5, nil)
		defer c.close()
		resA, resB := c.resourceOn(1, "cv-value-a"), c.resourceOn(1, "cv-value-b")
		a := mustLock(t, c.ls[0], resA, modes.EX)
		b := mustLock(t, c.ls[0], resB, modes.EX)
		cutOffMasterFromAllButHolder(t, c)
		if err := a.SetValue([]byte("a-written")); err != nil {
			t.Fatal(err)
		}
		if err := a.Convert(bg, modes.NL, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast down-conversion at a master without quorum: %v", err)
		}
		if a.Mode() != modes.EX {
			t.Fatalf("after the refused down-conversion: mode %v, want EX", a.Mode())
		}
		if err := b.SetValue([]byte("b-written")); err != nil {
			t.Fatal(err)
		}
		doneA, doneB := make(chan error, 1), make(chan error, 1)
		go func() { doneA <- a.Convert(bg, modes.NL) }()
		go func() { doneB <- b.Convert(bg, modes.NL) }()
		time.Sleep(2 * time.Second) // refused, and asked again, meanwhile
		c.net.Heal()
		for _, done := range []chan error{doneA, doneB} {
			if err := <-done; err != nil {
				t.Fatalf("down-conversion after the heal: %v", err)
			}
		}
		for res, want := range map[string]string{resA: "a-written", resB: "b-written"} {
			next := mustLock(t, c.ls[2], res, modes.EX)
			if v, valid := next.Value(); string(v) != want || !valid {
				t.Errorf("%s: the next EX holder reads %q (valid %v), want %q", res, v, valid, want)
			}
			mustUnlock(t, next)
		}
		mustUnlock(t, a)
		mustUnlock(t, b)
	})
}

// TestGivenUpDownConversionHoldsTheWeakerMode: an EX holder converts down
// to NL with a context that ends before the master's answer comes back.
// The master grants the conversion when it arrives and may let another
// EX in at once, so the holder must not go on believing it holds EX: the
// lock says NL from the moment Convert returns.
func TestGivenUpDownConversionHoldsTheWeakerMode(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "down-given-up")
		lk := mustLock(t, c.ls[0], res, modes.EX)
		c.net.SetStreamDelay(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		err := lk.Convert(ctx, modes.NL)
		cancel()
		if err == nil {
			t.Fatal("the down-conversion was answered within 10 ms of a 100 ms round trip: the scenario did not happen")
		}
		if got := lk.Mode(); got != modes.NL {
			t.Fatalf("after giving up the down-conversion the lock says %v; want NL (the master may grant EX to another now)", got)
		}
		other := mustLock(t, c.ls[2], res, modes.EX) // granted once the conversion arrived
		c.net.SetStreamDelay(0)
		mustUnlock(t, other)
		if err := lk.Convert(bg, modes.EX); err != nil {
			t.Fatalf("converting up again: %v", err)
		}
		if lk.Mode() != modes.EX {
			t.Fatalf("mode %v after converting up", lk.Mode())
		}
		mustUnlock(t, lk)
	})
}

// cutOffMasterFromAllButHolder partitions node 1 of a five-node cluster
// from every node but node 0 (the holder), and waits until node 1 has lost
// its quorum lease while node 0 keeps its own.
func cutOffMasterFromAllButHolder(t *testing.T, c *cluster) {
	t.Helper()
	for _, other := range []int{2, 3, 4} {
		c.net.Partition(c.nodes[1].Name(), c.nodes[other].Name())
	}
	for {
		if _, held := c.nodes[1].QuorumLease(); !held {
			break
		}
		time.Sleep(10 * time.Millisecond) // fake time: the lease's end is what is waited for
	}
	if _, held := c.nodes[0].QuorumLease(); !held {
		t.Fatal("the holder's node lost its quorum too: the test shows nothing")
	}
}
