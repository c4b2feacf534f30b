package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func mustSemaphore(t testing.TB, ls *Lockspace, name string, permits int) *Semaphore {
	t.Helper()
	s, err := ls.Semaphore(name, permits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPermits(t testing.TB, s *Semaphore, n int) *Permit {
	t.Helper()
	p, err := s.Acquire(bg, n)
	if err != nil {
		t.Fatalf("acquire %d of %s: %v", n, s.Name(), err)
	}
	return p
}

// acquireAsync starts an Acquire and returns where its outcome arrives.
func acquireAsync(s *Semaphore, n int) <-chan *Permit {
	ch := make(chan *Permit, 1)
	go func() {
		p, err := s.Acquire(bg, n)
		if err != nil {
			p = nil
		}
		ch <- p
	}()
	return ch
}

func TestSemaphoreAcrossNodes(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		name := c.resourceOn(1, "pool")
		sems := make([]*Semaphore, 3)
		for i := range sems {
			sems[i] = mustSemaphore(t, c.ls[i], name, 5)
		}
		a := mustPermits(t, sems[0], 2)
		b := mustPermits(t, sems[2], 2)
		if a.Token() == 0 || b.Token() <= a.Token() || a.Count() != 2 {
			t.Fatalf("tokens %d then %d, count %d", a.Token(), b.Token(), a.Count())
		}
		// One permit is free: a request for 3 waits, and a later request
		// for 1 waits behind it (no barging), on any node.
		big := acquireAsync(sems[1], 3)
		c.settle(c.queued(name, 1))
		small := acquireAsync(sems[0], 1)
		c.settle(c.queued(name, 2))
		if _, err := sems[2].TryAcquire(bg, 1); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("TryAcquire with a request waiting: %v, want ErrNotQueued", err)
		}
		if err := a.Release(); err != nil {
			t.Fatal(err)
		}
		c.settle(nil)
		p3 := <-big // 1 + 2 free now
		if p3 == nil || p3.Token() <= b.Token() {
			t.Fatalf("the request for 3: %v", p3)
		}
		c.settle(c.queued(name, 1)) // the request for 1 still waits: 5 of 5 are out
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		p1 := <-small
		if p1 == nil || p1.Token() <= p3.Token() {
			t.Fatalf("the request for 1: %v", p1)
		}
		if err := p3.Release(); err != nil {
			t.Fatal(err)
		}
		if err := p3.Release(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Release: %v, want ErrNotHeld", err)
		}
		if err := p1.Release(); err != nil {
			t.Fatal(err)
		}
		c.settle(c.free(name))
	})
}

func TestSemaphoreBadInput(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for _, n := range []int{0, -1, MaxPermits + 1} {
			if _, err := c.ls[0].Semaphore("s", n); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Semaphore of %d permits: %v", n, err)
			}
		}
		if _, err := c.ls[0].Semaphore("", 3); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Semaphore with no name: %v", err)
		}
		for i := range 3 { // the semaphore mastered remotely and locally
			name := c.resourceOn(i, "sem")
			s := mustSemaphore(t, c.ls[0], name, 3)
			for _, n := range []int{0, 4} {
				if _, err := s.Acquire(bg, n); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("Acquire(%d) of 3: %v", n, err)
				}
			}
			if _, err := s.Acquire(bg, 1, QueueConvert()); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Acquire with a lock's option: %v", err)
			}
			p := mustPermits(t, s, 1)
			other := mustSemaphore(t, c.ls[1], name, 4)
			if _, err := other.Acquire(bg, 1); !errors.Is(err, ErrPermitsMismatch) {
				t.Errorf("Acquire with 4 permits of a semaphore of 3: %v, want ErrPermitsMismatch", err)
			}
			if _, err := c.ls[2].Lock(bg, name, modes.EX); !errors.Is(err, ErrWrongKind) {
				t.Errorf("Lock on a semaphore: %v, want ErrWrongKind", err)
			}
			lk := mustLock(t, c.ls[1], name+"-lock", modes.PR)
			if _, err := mustSemaphore(t, c.ls[2], name+"-lock", 2).Acquire(bg, 1); !errors.Is(err, ErrWrongKind) {
				t.Errorf("Acquire on a locked resource: %v, want ErrWrongKind", err)
			}
			mustUnlock(t, lk)
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
			c.settle(c.free(name))
			// Free, the semaphore is forgotten: another count is fine now.
			q := mustPermits(t, other, 4)
			if err := q.Release(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSemaphoreCancelAndTimeout: a withdrawn request leaves nothing behind
// and lets the ones behind it in.
func TestSemaphoreCancelAndTimeout(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		name := c.resourceOn(2, "sem")
		s := mustSemaphore(t, c.ls[0], name, 2)
		hold := mustPermits(t, s, 1)
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		if _, err := s.Acquire(ctx, 2); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed out Acquire: %v", err)
		}
		behind := acquireAsync(mustSemaphore(t, c.ls[1], name, 2), 1)
		if p := <-behind; p == nil {
			t.Fatal("the request behind the withdrawn one was not granted")
		} else if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if err := hold.Release(); err != nil {
			t.Fatal(err)
		}
		c.settle(c.free(name))
	})
}

// TestSemaphorePermitsSurviveMasterDeath: the master of a semaphore dies;
// the new master rebuilds it from the survivors' reports, permit count
// included: what they hold stays held, the waiter is granted only what is
// free, and a request with another count is still refused.
func TestSemaphorePermitsSurviveMasterDeath(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		name := c.resourceOn(2, "sem")
		s0, s1 := mustSemaphore(t, c.ls[0], name, 3), mustSemaphore(t, c.ls[1], name, 3)
		a := mustPermits(t, s0, 2)
		waiting := acquireAsync(s1, 2)
		c.settle(c.queued(name, 1))
		c.kill(2)
		c.waitView(2, 30*time.Second)
		if _, err := mustSemaphore(t, c.ls[1], name, 5).Acquire(bg, 1); !errors.Is(err, ErrPermitsMismatch) {
			t.Fatalf("after the rebuild, Acquire with another count: %v, want ErrPermitsMismatch", err)
		}
		select {
		case p := <-waiting:
			t.Fatalf("the waiter was granted 2 of 3 while 2 are held: %v", p)
		default:
		}
		info, err := c.ls[0].Describe(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Permits != 3 || len(info.Granted) != 1 || info.Granted[0].Permits != 2 || info.Granted[0].Token != a.Token() ||
			len(info.Waiting) != 1 || info.Waiting[0].Permits != 2 || info.Waiting[0].Node != c.nodes[1].Name() {
			t.Fatalf("rebuilt semaphore: %+v", info)
		}
		// One permit is free, but a request waits before any new one.
		if _, err := s0.TryAcquire(bg, 1); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("TryAcquire behind a waiter after the rebuild: %v, want ErrNotQueued", err)
		}
		if err := a.Release(); err != nil {
			t.Fatal(err)
		}
		p := <-waiting
		if p == nil || p.Token() <= a.Token() {
			t.Fatalf("the waiter after the release: %v (token before the rebuild %d)", p, a.Token())
		}
		small := mustPermits(t, s0, 1)
		for _, x := range []*Permit{p, small} {
			if err := x.Release(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSemaphoreDeadHolderAfterLockDelay: the permits of a node that dies
// come back only after the lock-delay.
func TestSemaphoreDeadHolderAfterLockDelay(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		name := c.resourceOn(0, "sem")
		mustPermits(t, mustSemaphore(t, c.ls[2], name, 1), 1) // dies with n3
		waiting := acquireAsync(mustSemaphore(t, c.ls[1], name, 1), 1)
		c.settle(c.queued(name, 1))
		killed := time.Now()
		c.kill(2)
		p := <-waiting
		if p == nil {
			t.Fatal("the dead holder's permit never came back")
		}
		// The last acknowledgement the dead node gave may be a heartbeat
		// interval older than its death.
		rc := c.nodes[1].rec.Config()
		if waited, least := time.Since(killed), rc.LockDelay()-rc.HeartbeatInterval; waited < least {
			t.Fatalf("the permit came back %v after its holder died, before the lock-delay (%v)", waited, rc.LockDelay())
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreTTL: permits taken WithTTL are lost on the holder's clock
// if not renewed, and the master gives them back by itself; KeepAlive
// keeps them.
func TestSemaphoreTTL(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		name := c.resourceOn(1, "ttl-sem")
		s := mustSemaphore(t, c.ls[0], name, 1)
		kept, err := s.Acquire(bg, 1, WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(bg)
		alive := make(chan error, 1)
		go func() { alive <- kept.KeepAlive(ctx) }()
		time.Sleep(10 * time.Second)
		if kept.Err() != nil {
			t.Fatalf("kept alive, yet lost: %v", kept.Err())
		}
		stop()
		if err := <-alive; err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		<-kept.Lost()
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("lost %v after the renewals stopped, past the TTL", took)
		}
		p := mustPermits(t, mustSemaphore(t, c.ls[2], name, 1), 1) // the master let it go
		if p.Token() <= kept.Token() {
			t.Fatalf("token %d after %d", p.Token(), kept.Token())
		}
		if err := kept.Release(); !errors.Is(err, ErrLockLost) {
			t.Fatalf("release of lost permits: %v, want ErrLockLost", err)
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

// The node checks permits as the wire does (dlm.MaxPermits is
// wire.MaxPermits), and the master must take what the wire carries.
func TestMaxPermitsAgree(t *testing.T) {
	if wire.MaxPermits != master.MaxPermits {
		t.Fatalf("MaxPermits: wire %d, master %d", wire.MaxPermits, master.MaxPermits)
	}
}
