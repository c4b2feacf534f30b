package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// startMemAgents is startAgents on the in-process network (memnet), whose
// partitions a test can set: the client ports still listen on loopback.
func startMemAgents(t *testing.T, n int) *agents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := dlmtest.New(ctx, n, dlmtest.Configure(func(_ int, cfg *dlm.Config) { cfg.DeadlockWait = 200 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	a := &agents{t: t, cluster: cl, nodes: cl.Nodes()}
	for _, nd := range a.nodes {
		a.serve(nd, nil)
	}
	t.Cleanup(a.close)
	return a
}

// eventually polls cond every 10ms until it holds, failing after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-end:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// TestLockContext: a client lock's Context is cancelled the moment the
// lock stops being the client's: on Unlock (cause ErrNotHeld), when the
// agent dies (ErrLockLost, within the client's lease), when the session
// ends with Close (ErrClosed); a Context of a lock already lost is born
// cancelled.
func TestLockContext(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c := dial(t, a.addrs[0])
	ls := c.Lockspace("test")

	lk, err := ls.Lock(bg, "ctx-unlock", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := lk.Context(bg)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("the context of a held lock is cancelled")
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	within(t, ctx.Done(), time.Second, "the context after Unlock")
	if !errors.Is(context.Cause(ctx), lockapi.ErrNotHeld) {
		t.Fatalf("cause after Unlock: %v", context.Cause(ctx))
	}

	// A context the caller cancels leaves the lock's others alone.
	lk2, err := ls.Lock(bg, "ctx-close", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	mine, done := lk2.Context(bg)
	ctx2, cancel2 := lk2.Context(bg)
	defer cancel2()
	done()
	if mine.Err() == nil || ctx2.Err() != nil {
		t.Fatalf("a CancelFunc cancelled %v, the other context %v", mine.Err(), ctx2.Err())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, ctx2.Done(), time.Second, "the context after Close")
	if !errors.Is(context.Cause(ctx2), lockapi.ErrClosed) {
		t.Fatalf("cause after Close: %v", context.Cause(ctx2))
	}

	// The agent dies: the client stops trusting the lock within its lease.
	c2 := dial(t, a.addrs[1])
	lk3, err := c2.Lockspace("test").Lock(bg, "ctx-death", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	ctx3, cancel3 := lk3.Context(bg)
	defer cancel3()
	killed := time.Now()
	a.kill(1)
	within(t, ctx3.Done(), 5*time.Second, "the context after the agent died")
	if !errors.Is(context.Cause(ctx3), lockapi.ErrLockLost) {
		t.Fatalf("cause after the agent died: %v", context.Cause(ctx3))
	}
	t.Logf("context cancelled %v after the agent died", time.Since(killed))
	late, cancel4 := lk3.Context(bg)
	defer cancel4()
	if !errors.Is(context.Cause(late), lockapi.ErrLockLost) {
		t.Fatalf("context of a lost lock: %v", context.Cause(late))
	}
}

// TestLockContextOnLostPush: the agent's node loses its quorum (it is cut
// off from the others): the client's lock is lost, by the agent's push or
// the end of its lease, and its Context is cancelled with ErrLockLost
// before the others can have been granted it.
func TestLockContextOnLostPush(t *testing.T) {
	a := startMemAgents(t, 3)
	c := dial(t, a.addrs[0])
	res := a.resourceOn(1, "ctx-push")
	lk, err := c.Lockspace("test").Lock(bg, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := lk.Context(bg)
	defer cancel()
	a.cluster.Network().Isolate(a.nodes[0].Name())
	cut := time.Now()
	within(t, ctx.Done(), 10*time.Second, "the context after the agent lost its quorum")
	lostAfter := time.Since(cut)
	if !errors.Is(context.Cause(ctx), lockapi.ErrLockLost) {
		t.Fatalf("cause: %v", context.Cause(ctx))
	}
	ls1, err := a.nodes[1].Lockspace("test")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(bg, 20*time.Second)
	defer wcancel()
	other, err := ls1.Lock(wctx, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if grantedAfter := time.Since(cut); grantedAfter <= lostAfter {
		t.Fatalf("the majority granted the lock %v after the cut, the client's context ended only after %v", grantedAfter, lostAfter)
	}
	if other.Token() <= lk.Token() {
		t.Fatalf("new token %d not above %d", other.Token(), lk.Token())
	}
	_ = other.Unlock()
}

// TestClientSemaphore: permits through clients of different agents and an
// embedded node share one semaphore: FIFO without barging (a request for
// 1 does not overtake a waiting request for 3), increasing tokens, a try
// that fails when a request waits ahead, a mismatched count and a
// semaphore's name locked in a mode refused with their own errors, and a
// permit's Context cancelled by its Release.
func TestClientSemaphore(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(2, "sem")
	sems := make([]*Semaphore, 3)
	for i := range sems {
		s, err := dial(t, a.addrs[i]).Lockspace("test").Semaphore(res, 3)
		if err != nil {
			t.Fatal(err)
		}
		sems[i] = s
	}
	p0, err := sems[0].Acquire(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	big := make(chan *Permit, 1)
	go func() {
		p, err := sems[1].Acquire(bg, 3)
		if err != nil {
			t.Error(err)
		}
		big <- p
	}()
	eventually(t, 5*time.Second, "the request for 3 queued", func() bool {
		d, err := sems[2].ls.Describe(bg, res)
		return err == nil && len(d.Locks) == 2
	})
	if _, err := sems[2].TryAcquire(bg, 1); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("a try for the free permit, with 3 asked before it: %v", err)
	}
	small := make(chan *Permit, 1)
	go func() {
		p, err := sems[2].Acquire(bg, 1)
		if err != nil {
			t.Error(err)
		}
		small <- p
	}()
	eventually(t, 5*time.Second, "the request for 1 queued", func() bool {
		d, err := sems[2].ls.Describe(bg, res)
		return err == nil && len(d.Locks) == 3
	})
	d, err := sems[0].ls.Describe(bg, res)
	if err != nil {
		t.Fatal(err)
	}
	if d.Permits != 3 || d.Locks[0].Permits != 2 || d.Locks[0].Token != p0.Token() || d.Locks[1].Permits != 3 || d.Locks[2].Permits != 1 ||
		d.Locks[1].Queue != 3 || d.Locks[2].Queue != 3 {
		t.Fatalf("describe of the semaphore: %+v", d)
	}
	select {
	case p := <-small:
		t.Fatalf("the request for 1 overtook the one for 3 (token %d)", p.Token())
	case <-time.After(200 * time.Millisecond):
	}
	pctx, pcancel := p0.Context(bg)
	defer pcancel()
	if err := p0.Release(); err != nil {
		t.Fatal(err)
	}
	within(t, pctx.Done(), time.Second, "the permit's context after Release")
	p1 := within(t, big, 5*time.Second, "the request for 3 after the release")
	if p1 == nil || p1.Token() <= p0.Token() || p1.Count() != 3 {
		t.Fatalf("the request for 3: %+v", p1)
	}
	if err := p1.Release(); err != nil {
		t.Fatal(err)
	}
	p2 := within(t, small, 5*time.Second, "the request for 1")
	if p2 == nil || p2.Token() <= p1.Token() {
		t.Fatalf("the request for 1: %+v", p2)
	}

	// The embedded node's semaphore of that name is the same one.
	ls0, err := a.nodes[0].Lockspace("test")
	if err != nil {
		t.Fatal(err)
	}
	es, err := ls0.Semaphore(res, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := es.TryAcquire(bg, 3); !errors.Is(err, dlm.ErrNotQueued) {
		t.Fatalf("an embedded try for all 3 while a client holds 1: %v", err)
	}
	ep, err := es.TryAcquire(bg, 2)
	if err != nil || ep.Token() <= p2.Token() {
		t.Fatalf("an embedded try for the 2 free: %v", err)
	}
	_ = ep.Release()

	wrong, err := sems[0].ls.Semaphore(res, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Acquire(bg, 1); !errors.Is(err, lockapi.ErrPermitsMismatch) {
		t.Fatalf("another count: %v", err)
	}
	if _, err := sems[0].ls.Lock(bg, res, modes.EX); !errors.Is(err, lockapi.ErrWrongKind) {
		t.Fatalf("a lock on the semaphore's name: %v", err)
	}
	if err := p2.Release(); err != nil {
		t.Fatal(err)
	}
	if err := p2.Release(); !errors.Is(err, lockapi.ErrNotHeld) {
		t.Fatalf("second Release: %v", err)
	}
	for name, f := range map[string]func() error{
		"0 permits":      func() error { _, err := sems[0].ls.Semaphore(res, 0); return err },
		"too many":       func() error { _, err := sems[0].Acquire(bg, 4); return err },
		"none":           func() error { _, err := sems[0].Acquire(bg, 0); return err },
		"lock option":    func() error { _, err := sems[0].Acquire(bg, 1, lockapi.Expedite()); return err },
		"empty name":     func() error { _, err := sems[0].ls.Semaphore("", 1); return err },
		"negative ttl":   func() error { _, err := sems[0].Acquire(bg, 1, lockapi.WithTTL(-time.Second)); return err },
		"foreign owner":  func() error { _, err := sems[0].Acquire(bg, 1, lockapi.WithOwner(sems[1].ls.NewOwner())); return err },
		"embedded owner": func() error { _, err := sems[0].Acquire(bg, 1, lockapi.WithOwner(ls0.NewOwner())); return err },
	} {
		if err := f(); !errors.Is(err, lockapi.ErrInvalidArgument) && !errors.Is(err, lockapi.ErrInvalidName) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestClientSemaphoreTTLAndCancel: permits with a TTL of their own are
// renewed by Renew and lost when it runs out; an Acquire whose context
// ends leaves nothing queued behind it.
func TestClientSemaphoreTTLAndCancel(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c := dial(t, a.addrs[0])
	sem, err := c.Lockspace("test").Semaphore("sem-ttl", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.Acquire(bg, 1, lockapi.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Renew(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	if _, err := sem.Acquire(ctx, 1); !errors.Is(err, lockapi.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an Acquire that timed out: %v", err)
	}
	within(t, p.Lost(), 5*time.Second, "permits whose TTL ran out")
	if !errors.Is(p.Err(), lockapi.ErrLockLost) {
		t.Fatalf("lost with %v", p.Err())
	}
	ctx2, cancel2 := context.WithTimeout(bg, 10*time.Second)
	defer cancel2()
	q, err := sem.Acquire(ctx2, 1)
	if err != nil {
		t.Fatalf("the permit after the TTL ran out (the timed-out request must not hold it): %v", err)
	}
	_ = q.Release()
}

// TestClientFailFast: while the client's agent has no quorum, a request
// with lockapi.FailFast fails at once with ErrNoQuorum; one without it
// waits for quorum (an expiring context says it timed out waiting for
// quorum), and is granted once quorum is back.
func TestClientFailFast(t *testing.T) {
	a := startMemAgents(t, 3)
	c := dial(t, a.addrs[0])
	ls := c.Lockspace("test")
	res := a.resourceOn(1, "ff")
	sem, err := ls.Semaphore(a.resourceOn(2, "ff-sem"), 2)
	if err != nil {
		t.Fatal(err)
	}
	a.cluster.Network().Isolate(a.nodes[0].Name())
	eventually(t, 10*time.Second, "the cut-off agent losing its quorum", func() bool {
		_, held := a.nodes[0].QuorumLease()
		return !held
	})
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := ls.Lock(ctx, res, modes.EX, lockapi.FailFast()); !errors.Is(err, lockapi.ErrNoQuorum) {
		t.Fatalf("FailFast lock without quorum: %v", err)
	}
	if _, err := sem.Acquire(ctx, 1, lockapi.FailFast()); !errors.Is(err, lockapi.ErrNoQuorum) {
		t.Fatalf("FailFast acquire without quorum: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("FailFast took %v", d)
	}
	short, cancelShort := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelShort()
	start = time.Now()
	if _, err := ls.Lock(short, res, modes.EX); !errors.Is(err, lockapi.ErrTimeout) {
		t.Fatalf("a lock without FailFast and quorum, with a short context: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("a lock without FailFast gave up after %v, its context allowed 300ms", d)
	}
	got := make(chan error, 2)
	go func() {
		wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
		defer wcancel()
		lk, err := ls.Lock(wctx, res, modes.EX)
		if err == nil {
			err = lk.Unlock()
		}
		if err != nil {
			err = fmt.Errorf("lock: %w", err)
		}
		got <- err
	}()
	go func() {
		wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
		defer wcancel()
		p, err := sem.Acquire(wctx, 2)
		if err == nil {
			err = p.Release()
		}
		if err != nil {
			err = fmt.Errorf("acquire: %w", err)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a request without FailFast answered while the agent had no quorum: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	a.cluster.Network().Heal()
	for range 2 {
		if err := within(t, got, 30*time.Second, "a request waiting for quorum, after it came back"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientConvertFailFast: the master of a client's lock is cut off
// from every node but the client's agent, so it has no quorum and
// refuses conversions. With lockapi.FailFast the client's Convert fails
// at once with ErrNoQuorum and the lock keeps its mode; without it the
// agent asks again (a short context says it timed out) until the
// partition heals, and the conversion is granted. The partition is
// asymmetric (the master reaches the agent, the others do not reach the
// master): the agent's own quorum may waver meanwhile on a loaded
// machine, which loses the lock; the test then has nothing left to show
// and says so.
func TestClientConvertFailFast(t *testing.T) {
	a := startMemAgents(t, 5)
	c := dial(t, a.addrs[0])
	res := a.resourceOn(1, "cv")
	// A TTL of its own: the session's renewals, which a master without
	// quorum refuses, do not carry it (its trust would run out).
	lk, err := c.Lockspace("test").Lock(bg, res, modes.PR, lockapi.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []int{2, 3, 4} {
		a.cluster.Network().Partition(a.nodes[1].Name(), a.nodes[other].Name())
	}
	eventually(t, 10*time.Second, "the master losing its quorum", func() bool {
		_, held := a.nodes[1].QuorumLease()
		return !held
	})
	if _, held := a.nodes[0].QuorumLease(); !held {
		t.Skip("the client's agent lost its quorum in the asymmetric partition too: nothing to show")
	}
	start := time.Now()
	if err := lk.Convert(bg, modes.EX, lockapi.FailFast()); !errors.Is(err, lockapi.ErrNoQuorum) {
		if lerr := lk.Err(); lerr != nil {
			t.Skipf("the lock was lost in the asymmetric partition (%v): nothing left to show", lerr)
		}
		t.Fatalf("FailFast conversion at a master without quorum: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("FailFast conversion took %v", d)
	}
	short, cancelShort := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelShort()
	if err := lk.Convert(short, modes.EX); !errors.Is(err, lockapi.ErrTimeout) {
		if lerr := lk.Err(); lerr != nil {
			t.Skipf("the lock was lost in the asymmetric partition (%v): nothing left to show", lerr)
		}
		t.Fatalf("a conversion without FailFast, with a short context, while the master has no quorum: %v", err)
	}
	if err := lk.Err(); err != nil {
		t.Skipf("the lock was lost in the asymmetric partition (%v): nothing left to show", err)
	}
	if lk.Mode() != modes.PR {
		t.Fatalf("after the refused conversions: mode %v, want PR", lk.Mode())
	}
	// The agent's side of the timed-out conversion ends a moment after the
	// client's: until then the lock is busy there.
	eventually(t, 10*time.Second, "the timed-out conversion ending at the agent", func() bool {
		return !errors.Is(lk.Convert(bg, modes.EX, lockapi.FailFast()), lockapi.ErrBusy)
	})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		done <- lk.Convert(ctx, modes.EX)
	}()
	select {
	case err := <-done:
		t.Fatalf("a conversion without FailFast answered while its master had no quorum: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	a.cluster.Network().Heal()
	if err := within(t, done, 30*time.Second, "the conversion after the heal"); err != nil {
		if lerr := lk.Err(); lerr != nil {
			t.Skipf("the lock was lost in the asymmetric partition (%v): nothing left to show", lerr)
		}
		t.Fatal(err)
	}
	if lk.Mode() != modes.EX {
		t.Fatalf("mode %v after the conversion", lk.Mode())
	}
	// The recoveries of the heal may still cost the lock (see above).
	if err := lk.Unlock(); err != nil && !errors.Is(err, lockapi.ErrLockLost) {
		t.Fatal(err)
	}
}

// TestClientCancelWhileWaitingForQuorum: a lock and an acquisition that
// wait for the agent's quorum end promptly with their context's error
// when it is cancelled, and leave nothing behind: once quorum is back,
// another client takes EX and every permit at once, and no grant ever
// reaches the cancelled requests' session.
func TestClientCancelWhileWaitingForQuorum(t *testing.T) {
	a := startMemAgents(t, 3)
	c := dial(t, a.addrs[0])
	ls := c.Lockspace("test")
	res := a.resourceOn(1, "cancel")
	sem, err := ls.Semaphore(a.resourceOn(2, "cancel-sem"), 2)
	if err != nil {
		t.Fatal(err)
	}
	a.cluster.Network().Isolate(a.nodes[0].Name())
	eventually(t, 10*time.Second, "the cut-off agent losing its quorum", func() bool {
		_, held := a.nodes[0].QuorumLease()
		return !held
	})
	type result struct {
		err error
		at  time.Time
	}
	got := make(chan result, 2)
	ctx, cancel := context.WithCancel(bg)
	go func() {
		_, err := ls.Lock(ctx, res, modes.EX)
		got <- result{fmt.Errorf("lock: %w", err), time.Now()}
	}()
	go func() {
		_, err := sem.Acquire(ctx, 2)
		got <- result{fmt.Errorf("acquire: %w", err), time.Now()}
	}()
	select {
	case r := <-got:
		t.Fatalf("a request answered while the agent had no quorum: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	cancelled := time.Now()
	cancel()
	for range 2 {
		r := within(t, got, 10*time.Second, "a cancelled request waiting for quorum")
		if !errors.Is(r.err, lockapi.ErrCancelled) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled while waiting for quorum: %v", r.err)
		}
		if d := r.at.Sub(cancelled); d > 2*time.Second {
			t.Fatalf("cancelled request returned %v after the cancel", d)
		}
	}
	a.cluster.Network().Heal()
	eventually(t, 30*time.Second, "the agent regaining its quorum", func() bool {
		_, held := a.nodes[0].QuorumLease()
		return held && a.nodes[0].State() == dlm.StateServing
	})
	// Whatever the agent still had of the cancelled requests would be
	// granted by now: give it a moment, then another client must get
	// everything at once.
	time.Sleep(time.Second)
	other := dial(t, a.addrs[1])
	ols := other.Lockspace("test")
	lk, err := ols.TryLock(bg, res, modes.EX)
	if err != nil {
		t.Fatalf("EX at once after the cancelled request (quorum back): %v", err)
	}
	osem, err := ols.Semaphore(sem.Name(), 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := osem.TryAcquire(bg, 2)
	if err != nil {
		t.Fatalf("every permit at once after the cancelled acquisition: %v", err)
	}
	// And the cancelled client is told so, not granted anything.
	if _, err := ls.TryLock(bg, res, modes.PR); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("the cancelled client's TryLock while the other holds EX: %v", err)
	}
	if _, err := sem.TryAcquire(bg, 1); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("the cancelled client's TryAcquire while the other holds every permit: %v", err)
	}
	_ = lk.Unlock()
	_ = p.Release()
}

// TestClientRWMutex: the RWMutex of a client and of an embedded node are
// one implementation and one lock: readers of both share it, an upgrade
// through a client waits for the embedded reader, two upgraders are a
// conversion deadlock (one fails with ErrDeadlock and keeps its read
// lock), and a downgrade lets a waiting reader in.
func TestClientRWMutex(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(1, "rw")
	c0, c1 := dial(t, a.addrs[0]), dial(t, a.addrs[2])
	m0, m1 := c0.Lockspace("test").RWMutex(res), c1.Lockspace("test").RWMutex(res)
	ls, err := a.nodes[1].Lockspace("test")
	if err != nil {
		t.Fatal(err)
	}
	em := ls.RWMutex(res)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	for _, m := range []*lockapi.RWMutex{m0, m1, em} {
		if err := m.RLockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	up := make(chan error, 2)
	go func() { up <- m0.Upgrade(ctx) }()
	go func() {
		time.Sleep(100 * time.Millisecond) // the second upgrader
		up <- m1.Upgrade(ctx)
	}()
	err = within(t, up, 10*time.Second, "one of two upgraders")
	if !errors.Is(err, lockapi.ErrDeadlock) {
		t.Fatalf("the conversion deadlock of two upgraders: %v", err)
	}
	m1.RUnlock() // the loser gives way
	select {
	case err := <-up:
		t.Fatalf("the upgrade did not wait for the embedded reader: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	em.RUnlock()
	if err := within(t, up, 10*time.Second, "the upgrade after the readers left"); err != nil {
		t.Fatal(err)
	}
	tok := m0.Token()
	if tok == 0 {
		t.Fatal("no token for the write lock")
	}
	if em.TryRLock() {
		t.Fatal("a reader got in beside the writer")
	}
	reader := make(chan error, 1)
	go func() { reader <- em.RLockContext(ctx) }()
	time.Sleep(100 * time.Millisecond)
	if err := m0.Downgrade(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, reader, 10*time.Second, "a reader after the downgrade"); err != nil {
		t.Fatal(err)
	}
	m0.RUnlock()
	em.RUnlock()
	// The client's unlock does not wait for its agent: the write lock is
	// free soon, not at once.
	if err := m1.LockContext(ctx); err != nil {
		t.Fatalf("the write lock after every reader left: %v", err)
	}
	m1.Unlock()
}

// TestClientLockAll: clients of two agents take overlapping sets of locks
// in opposite orders, over and over, and never deadlock nor hold one
// resource's EX together; a LockAll whose middle request fails releases
// what it took.
func TestClientLockAll(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	names := []string{a.resourceOn(0, "all"), a.resourceOn(1, "all"), a.resourceOn(2, "all")}
	var holders [3]atomic.Int32
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(bg, 60*time.Second)
	defer cancel()
	for g := range 2 {
		ls := dial(t, a.addrs[g]).Lockspace("test")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				reqs := []lockapi.Request{{Resource: names[0], Mode: modes.EX}, {Resource: names[1], Mode: modes.EX}, {Resource: names[2], Mode: modes.EX}}
				if g == 1 {
					reqs[0], reqs[2] = reqs[2], reqs[0]
				}
				locks, err := ls.LockAll(ctx, reqs[i%2:])
				if err != nil {
					t.Errorf("client %d, round %d: %v", g, i, err)
					return
				}
				for _, lk := range locks {
					for k, n := range names {
						if n == lk.Resource() && holders[k].Add(1) != 1 {
							t.Errorf("two holders of %s in EX", n)
						}
					}
				}
				for _, lk := range locks {
					for k, n := range names {
						if n == lk.Resource() {
							holders[k].Add(-1)
						}
					}
					if err := lk.Unlock(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the LockAll loops did not finish: deadlock")
	}

	ls, other := dial(t, a.addrs[0]).Lockspace("test"), dial(t, a.addrs[1]).Lockspace("test")
	blocker, err := other.Lock(bg, names[1], modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ls.LockAll(bg, []lockapi.Request{{Resource: names[2], Mode: modes.EX}, {Resource: names[1], Mode: modes.EX, Options: []lockapi.Option{lockapi.Try()}}, {Resource: names[0], Mode: modes.PR}})
	if !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("LockAll with a try on a held resource: %v", err)
	}
	for _, n := range []string{names[0], names[2]} {
		// The client's Unlock does not wait for its agent: free soon, not
		// at once.
		fctx, fcancel := context.WithTimeout(bg, 5*time.Second)
		lk, err := other.Lock(fctx, n, modes.EX)
		fcancel()
		if err != nil {
			t.Fatalf("%s after the failed LockAll: %v", n, err)
		}
		_ = lk.Unlock()
	}
	_ = blocker.Unlock()
	for name, reqs := range map[string][]lockapi.Request{
		"twice":    {{Resource: "x", Mode: modes.EX}, {Resource: "x", Mode: modes.PR}},
		"bad mode": {{Resource: "x", Mode: modes.Mode(9)}},
		"no name":  {{Resource: "", Mode: modes.EX}},
	} {
		if _, err := ls.LockAll(bg, reqs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestClientDescribeQueues: Describe through any agent shows the holder
// and the waiter with their modes, nodes, owner, token and time waited.
func TestClientDescribeQueues(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(2, "describe")
	hold := dial(t, a.addrs[0]).Lockspace("test")
	lk, err := hold.Lock(bg, res, modes.PW, lockapi.WithOwner(hold.NewOwner()))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(bg)
	defer wcancel()
	go func() { _, _ = dial(t, a.addrs[1]).Lockspace("test").Lock(wctx, res, modes.EX) }()
	var d Resource
	eventually(t, 5*time.Second, "the waiter queued", func() bool {
		d, err = dial(t, a.addrs[2]).Lockspace("test").Describe(bg, res)
		return err == nil && len(d.Locks) == 2 && d.Locks[1].Waited >= 50*time.Millisecond
	})
	g, w := d.Locks[0], d.Locks[1]
	if d.Master != a.nodes[2].Name() || !d.Known ||
		g.Queue != 1 || g.Granted != modes.PW || g.Node != a.nodes[0].Name() || g.Token != lk.Token() || g.Owner == 0 || g.ID == 0 ||
		w.Queue != 3 || w.Granted != modes.NL || w.Requested != modes.EX || w.Node != a.nodes[1].Name() || w.Token != 0 {
		t.Fatalf("describe: %+v", d)
	}
	ctx, cancel := context.WithTimeout(bg, time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := hold.Describe(ctx, res); !errors.Is(err, lockapi.ErrTimeout) {
		t.Fatalf("a describe whose context ended: %v", err)
	}
	if _, err := hold.Describe(bg, ""); !errors.Is(err, lockapi.ErrInvalidName) {
		t.Fatalf("describe of no name: %v", err)
	}
	_ = fmt.Sprint(d)
	_ = lk.Unlock()
}
