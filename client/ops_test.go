package client

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestTokensIncrease: every grant of a resource, to any client through
// any agent, carries a larger token than the one before.
func TestTokensIncrease(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	cs := []*Client{dial(t, a.addrs[0]), dial(t, a.addrs[1]), dial(t, a.addrs[2])}
	res := a.resourceOn(1, "tok")
	var last uint64
	for i := range 30 {
		lk, err := cs[i%3].Lockspace("test").Lock(bg, res, modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		if lk.Token() <= last {
			t.Fatalf("grant %d: token %d not above %d", i, lk.Token(), last)
		}
		last = lk.Token()
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValueBlockCounter: a counter in the value block, incremented under
// EX by clients of every agent, loses no increment.
func TestValueBlockCounter(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(2, "counter")
	// A resource with no lock forgets its value block: an NL lock keeps it.
	keep, err := dial(t, a.addrs[1]).Lockspace("test").Lock(bg, res, modes.NL)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Unlock()
	const perClient, clients = 25, 3
	var wg sync.WaitGroup
	for i := range clients {
		c := dial(t, a.addrs[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				if err := increment(c.Lockspace("test"), res); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	lk, err := dial(t, a.addrs[0]).Lockspace("test").Lock(bg, res, modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := lk.Value()
	if !ok || len(v) != 8 || binary.BigEndian.Uint64(v) != perClient*clients {
		t.Fatalf("counter %x (valid %v), want %d", v, ok, perClient*clients)
	}
	if lk.ValueSeq() != perClient*clients {
		t.Fatalf("value sequence %d, want %d", lk.ValueSeq(), perClient*clients)
	}
}

func increment(ls lockapi.Lockspace, res string) error {
	lk, err := ls.Acquire(bg, res, modes.EX)
	if err != nil {
		return err
	}
	v, _ := lk.Value()
	var n uint64
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if err := lk.SetValue(binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
		return err
	}
	return lk.Unlock()
}

// TestBlockingNotifications: a holder that asked for them is told, with
// the mode wanted, when another client's request waits for its lock; it
// converts down and the waiter is granted.
func TestBlockingNotifications(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	holder, waiter := dial(t, a.addrs[0]), dial(t, a.addrs[2])
	res := a.resourceOn(1, "blk")
	wanted := make(chan modes.Mode, 4)
	lk, err := holder.Lockspace("test").Lock(bg, res, modes.EX, lockapi.OnBlocking(func(m modes.Mode) { wanted <- m }))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Lockspace("test").Lock(bg, res, modes.PR)
		if err == nil {
			err = w.Unlock()
		}
		got <- err
	}()
	if m := within(t, wanted, 5*time.Second, "blocking notification"); m != modes.PR {
		t.Fatalf("notified for %v, want PR", m)
	}
	if err := lk.Convert(bg, modes.PR); err != nil {
		t.Fatal(err)
	}
	if err := within(t, got, 5*time.Second, "the waiter's grant"); err != nil {
		t.Fatal(err)
	}
	if err := lk.Convert(bg, modes.EX); err != nil {
		t.Fatal(err)
	}
	if lk.Mode() != modes.EX {
		t.Fatalf("mode %v after converting up", lk.Mode())
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelByContext: a waiting Lock whose context ends fails with
// ErrTimeout (or ErrCancelled) matching the context's error, and leaves
// nothing queued: the next request behind it is granted when the holder
// lets go.
func TestCancelByContext(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c1, c2, c3 := dial(t, a.addrs[0]), dial(t, a.addrs[1]), dial(t, a.addrs[2])
	for m := range 3 {
		res := a.resourceOn(m, "cancel")
		held, err := c1.Lockspace("test").Lock(bg, res, modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		_, err = c2.Lockspace("test").Lock(ctx, res, modes.EX)
		cancel()
		if !errors.Is(err, lockapi.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out Lock: %v", err)
		}
		ctx, cancel = context.WithCancel(bg)
		errc := make(chan error, 1)
		go func() { _, err := c2.Lockspace("test").Lock(ctx, res, modes.EX); errc <- err }()
		time.Sleep(20 * time.Millisecond)
		cancel()
		if err := within(t, errc, 5*time.Second, "cancelled Lock"); !errors.Is(err, lockapi.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v", err)
		}
		next := make(chan error, 1)
		go func() {
			lk, err := c3.Lockspace("test").Lock(bg, res, modes.EX)
			if err == nil {
				err = lk.Unlock()
			}
			next <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := within(t, next, 5*time.Second, "the request behind the cancelled ones"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeadlockThroughOwners: two clients of two agents, each an owner
// holding one resource and asking for the other's, deadlock; detection
// follows the owners across agents and fails exactly one of them.
func TestDeadlockThroughOwners(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c1, c2 := dial(t, a.addrs[0]), dial(t, a.addrs[1])
	r1, r2 := a.resourceOn(1, "dl"), a.resourceOn(2, "dl")
	o1, o2 := c1.Lockspace("test").NewOwner(), c2.Lockspace("test").NewOwner()
	l1, err := c1.Lockspace("test").Lock(bg, r1, modes.EX, lockapi.WithOwner(o1))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := c2.Lockspace("test").Lock(bg, r2, modes.EX, lockapi.WithOwner(o2))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	locks := make(chan *Lock, 2)
	go func() {
		lk, err := c1.Lockspace("test").Lock(bg, r2, modes.EX, lockapi.WithOwner(o1))
		errs <- err
		locks <- lk
	}()
	go func() {
		lk, err := c2.Lockspace("test").Lock(bg, r1, modes.EX, lockapi.WithOwner(o2))
		errs <- err
		locks <- lk
	}()
	first := within(t, errs, 10*time.Second, "deadlock broken")
	if !errors.Is(first, lockapi.ErrDeadlock) {
		t.Fatalf("first outcome: %v, want ErrDeadlock (held locks lost: %v, %v)", first, l1.Err(), l2.Err())
	}
	<-locks
	// The victim's owner lets go of what it holds; the other is granted.
	_ = l1.Unlock()
	_ = l2.Unlock()
	if err := within(t, errs, 10*time.Second, "survivor granted"); err != nil {
		t.Fatalf("survivor: %v", err)
	}
	if lk := <-locks; lk != nil {
		_ = lk.Unlock()
	}
	if _, err := c1.Lockspace("test").Lock(bg, r1, modes.EX, lockapi.WithOwner(o2)); !errors.Is(err, lockapi.ErrInvalidArgument) {
		t.Fatalf("another client's owner: %v", err)
	}
}

// TestElectionMixed: a client and an embedded node campaign in the same
// election; observers on both sides see the same leaders, and tokens
// increase.
func TestElectionMixed(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c := dial(t, a.addrs[1])
	embedded, err := a.nodes[2].Lockspace("test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	seen := embedded.Election("e").Observe(ctx)
	first, err := c.Lockspace("test").Election("e").Campaign(ctx, []byte("client"))
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, seen, "client")
	l, err := embedded.Election("e").Leader(ctx)
	if err != nil || string(l.Value) != "client" || l.Token != first.Token() {
		t.Fatalf("embedded sees leader %+v, %v; client's token %d", l, err, first.Token())
	}
	won := make(chan *lockapi.Leadership, 1)
	go func() {
		l, err := embedded.Election("e").Campaign(ctx, []byte("embedded"))
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := within(t, won, 10*time.Second, "embedded candidate elected")
	waitLeader(t, seen, "embedded")
	cl, err := c.Lockspace("test").Election("e").Leader(ctx)
	if err != nil || string(cl.Value) != "embedded" || cl.Token <= first.Token() {
		t.Fatalf("client sees leader %+v, %v", cl, err)
	}
	if err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitLeader(t *testing.T, seen <-chan lockapi.Leader, value string) {
	t.Helper()
	for {
		l := within(t, seen, 10*time.Second, "observed leader "+value)
		if string(l.Value) == value {
			return
		}
	}
}

// TestMutexAndInterface: the same code, written against lockapi, runs on
// an embedded lockspace and a connected one, and they exclude each other:
// a counter incremented under a lockapi.Mutex from both sides loses
// nothing.
func TestMutexAndInterface(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	embedded, err := a.nodes[0].Lockspace("test")
	if err != nil {
		t.Fatal(err)
	}
	spaces := []lockapi.Lockspace{embedded, dial(t, a.addrs[1]).Lockspace("test")}
	var mu sync.Mutex // checks exclusion: TryLock must always succeed under the dlm mutex
	count := 0
	var wg sync.WaitGroup
	for _, ls := range spaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := lockapi.NewMutex(ls, "mutex", nil)
			for range 40 {
				m.Lock()
				if !mu.TryLock() {
					t.Error("two holders of the dlm mutex at once")
				} else {
					count++
					mu.Unlock()
				}
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	if count != 80 {
		t.Fatalf("count %d, want 80", count)
	}
	var _ lockapi.Lockspace = (*dlm.Lockspace)(nil)
}

// TestConvertOptions: conversions down and up, Try, QueueConvert, and a
// conversion deadlock resolved by DemoteOnDeadlock.
func TestConvertOptions(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c1, c2 := dial(t, a.addrs[0]), dial(t, a.addrs[1])
	res := a.resourceOn(2, "conv")
	p1, err := c1.Lockspace("test").Lock(bg, res, modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c2.Lockspace("test").Lock(bg, res, modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	if err := p1.Convert(bg, modes.EX, lockapi.Try()); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("try-convert next to a PR holder: %v", err)
	}
	up := make(chan error, 1)
	go func() { up <- p1.Convert(bg, modes.EX) }()
	time.Sleep(50 * time.Millisecond)
	// Both PR holders converting to EX: a conversion deadlock. With
	// DemoteOnDeadlock the second is demoted to NL and the first granted.
	demoted := make(chan error, 1)
	go func() { demoted <- p2.Convert(bg, modes.EX, lockapi.DemoteOnDeadlock()) }()
	if err := within(t, up, 10*time.Second, "first conversion"); err != nil {
		t.Fatal(err)
	}
	if err := p1.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, demoted, 10*time.Second, "demoted conversion"); err != nil {
		t.Fatal(err)
	}
	if !p2.Demoted() || p2.Mode() != modes.EX {
		t.Fatalf("after a demoted conversion: demoted %v, mode %v", p2.Demoted(), p2.Mode())
	}
	if err := p2.Convert(bg, modes.NL); err != nil {
		t.Fatal(err)
	}
	if err := p2.Convert(bg, modes.PW, lockapi.QueueConvert()); err != nil || p2.Mode() != modes.PW {
		t.Fatalf("queued up-conversion: %v, mode %v", err, p2.Mode())
	}
	if err := p2.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestDescribeAndBadInput: Describe names the master and the queues,
// at any agent (the agent asks the master); invalid arguments are refused
// before anything is sent.
func TestDescribeAndBadInput(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(0, "desc")
	c := dial(t, a.addrs[0])
	ls := c.Lockspace("test")
	lk, err := ls.Lock(bg, res, modes.PW)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ls.Describe(bg, res)
	if err != nil {
		t.Fatal(err)
	}
	if d.Master != a.nodes[0].Name() || !d.Known || len(d.Locks) != 1 || d.Locks[0].Granted != modes.PW {
		t.Fatalf("describe: %+v", d)
	}
	other, err := dial(t, a.addrs[1]).Lockspace("test").Describe(bg, res)
	if err != nil || other.Master != a.nodes[0].Name() || !other.Known || len(other.Locks) != 1 ||
		other.Locks[0].Token != lk.Token() || other.Locks[0].Node != a.nodes[0].Name() {
		t.Fatalf("describe at another agent: %+v, %v", other, err)
	}
	for name, f := range map[string]func() error{
		"empty resource":   func() error { _, err := ls.Lock(bg, "", modes.EX); return err },
		"bad mode":         func() error { _, err := ls.Lock(bg, "x", modes.Mode(9)); return err },
		"expedite EX":      func() error { _, err := ls.Lock(bg, "x", modes.EX, lockapi.Expedite()); return err },
		"quecvt on lock":   func() error { _, err := ls.Lock(bg, "x", modes.EX, lockapi.QueueConvert()); return err },
		"long lockspace":   func() error { _, err := c.Lockspace(string(make([]byte, 65))).Lock(bg, "x", modes.EX); return err },
		"too large value":  func() error { return lk.SetValue(make([]byte, 5000)) },
		"value over limit": func() error { return lk.SetValue(make([]byte, 100)) }, // the lockspace allows 64
	} {
		if err := f(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, lockapi.ErrInvalidName) && !errors.Is(err, lockapi.ErrInvalidMode) &&
			!errors.Is(err, lockapi.ErrInvalidArgument) && !errors.Is(err, lockapi.ErrLimit) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestCachedReaders: PR holds served from the agent's shared-lock cache
// share one lock at the master; a writer's EX waits for them, and readers
// that come after it queue behind it (FIFO through the cache).
func TestCachedReaders(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(1, "cached")
	r1, r2 := dial(t, a.addrs[0]), dial(t, a.addrs[0])
	h1, err := r1.Lockspace("test").Lock(bg, res, modes.PR, lockapi.Cached())
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r2.Lockspace("test").Lock(bg, res, modes.PR, lockapi.Cached())
	if err != nil {
		t.Fatal(err)
	}
	if h1.Token() != h2.Token() {
		t.Fatalf("two holds of one agent's cache have tokens %d and %d", h1.Token(), h2.Token())
	}
	d, err := dial(t, a.addrs[1]).Lockspace("test").Describe(bg, res)
	if err != nil || len(d.Locks) != 1 {
		t.Fatalf("master sees %+v (%v), want one PR lock for both holds", d, err)
	}
	if err := h1.Convert(bg, modes.EX); !errors.Is(err, lockapi.ErrInvalidArgument) {
		t.Fatalf("converting a hold: %v", err)
	}
	writer := dial(t, a.addrs[2])
	wrote := make(chan *Lock, 1)
	go func() {
		lk, err := writer.Lockspace("test").Lock(bg, res, modes.EX)
		if err != nil {
			t.Error(err)
		}
		wrote <- lk
	}()
	time.Sleep(100 * time.Millisecond)
	late := make(chan *Lock, 1)
	go func() {
		lk, err := r1.Lockspace("test").Lock(bg, res, modes.PR, lockapi.Cached())
		if err != nil {
			t.Error(err)
		}
		late <- lk
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-wrote:
		t.Fatal("EX granted while holds were held")
	case <-late:
		t.Fatal("a hold after a waiting writer was granted ahead of it")
	default:
	}
	_ = h1.Unlock()
	_ = h2.Unlock()
	w := within(t, wrote, 10*time.Second, "the writer after the holds")
	if w == nil {
		t.FailNow()
	}
	select {
	case <-late:
		t.Fatal("the late reader was granted while the writer held EX")
	case <-time.After(50 * time.Millisecond):
	}
	_ = w.Unlock()
	l := within(t, late, 10*time.Second, "the late reader")
	if l == nil || l.Token() <= w.Token() {
		t.Fatalf("late reader's token not above the writer's")
	}
	_ = l.Unlock()
}

// TestClientCache: holds of a client's own cache share one grant without
// a message (the token stays that of the first grant, and the master sees
// one lock); a writer on another agent retires the idle cached lock
// through its blocking notification and is granted, and the next hold
// takes a new lock with a higher token. A writer that comes while a hold
// is held waits for its release.
func TestClientCache(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(1, "client-cache")
	reader := dial(t, a.addrs[0])
	cache, err := reader.Lockspace("test").NewCache(lockapi.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	h, err := cache.Acquire(bg, res)
	if err != nil {
		t.Fatal(err)
	}
	first := h.Token()
	for range 100 {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		if h, err = cache.Acquire(bg, res); err != nil {
			t.Fatal(err)
		}
		if h.Token() != first {
			t.Fatalf("a hold of the cached lock has token %d, want the first grant's %d", h.Token(), first)
		}
	}
	d, err := dial(t, a.addrs[1]).Lockspace("test").Describe(bg, res)
	if err != nil || len(d.Locks) != 1 || d.Locks[0].Granted != modes.PR {
		t.Fatalf("master sees %+v (%v), want one PR lock for every hold", d, err)
	}
	writer := dial(t, a.addrs[2]).Lockspace("test")
	wrote := make(chan *Lock, 1)
	go func() {
		lk, err := writer.Lock(bg, res, modes.EX)
		if err != nil {
			t.Error(err)
		}
		wrote <- lk
	}()
	select {
	case <-wrote:
		t.Fatal("EX granted while a hold was held")
	case <-time.After(200 * time.Millisecond):
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	w := within(t, wrote, 10*time.Second, "the writer after the hold's release")
	if w == nil || w.Token() <= first {
		t.Fatalf("writer's token not above the cached grant's %d", first)
	}
	if err := w.Unlock(); err != nil {
		t.Fatal(err)
	}
	h, err = cache.Acquire(bg, res)
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() <= w.Token() {
		t.Fatalf("the hold after the writer has token %d, not above the writer's %d", h.Token(), w.Token())
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); !errors.Is(err, lockapi.ErrNotHeld) {
		t.Fatalf("a second Release: %v", err)
	}
	if err := cache.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Acquire(bg, res); !errors.Is(err, lockapi.ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	// Close released the idle lock (the unlock leaves with the client's
	// next write, so a try could still come first): a writer is granted.
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	lk, err := writer.Lock(ctx, res, modes.EX)
	if err != nil {
		t.Fatalf("EX after the cache closed: %v", err)
	}
	_ = lk.Unlock()
}
