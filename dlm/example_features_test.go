package dlm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

// A counting semaphore shared by three nodes: at most 3 permits out at
// once, FIFO, and every acquisition with its own fencing token.
func ExampleSemaphore() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	sems := make([]*dlm.Semaphore, len(lss))
	for i, ls := range lss {
		sems[i], _ = ls.Semaphore("db-connections", 3)
	}
	a, _ := sems[0].Acquire(ctx, 2)
	b, _ := sems[1].Acquire(ctx, 1)
	fmt.Println("held:", a.Count()+b.Count(), "tokens increase:", b.Token() > a.Token())

	// None left: a try fails at once, and a request waits its turn.
	if _, err := sems[2].TryAcquire(ctx, 1); errors.Is(err, dlm.ErrNotQueued) {
		fmt.Println("try: none free")
	}
	got := make(chan *dlm.Permit)
	go func() {
		p, _ := sems[2].Acquire(ctx, 2) // waits for two permits
		got <- p
	}()
	a.Release()
	p := <-got
	fmt.Println("granted after the release:", p.Count(), "permits")

	// The count belongs to the semaphore while it is in use.
	wrong, _ := lss[0].Semaphore("db-connections", 5)
	if _, err := wrong.Acquire(ctx, 1); errors.Is(err, dlm.ErrPermitsMismatch) {
		fmt.Println("another count: refused")
	}
	b.Release()
	p.Release()
	// Output:
	// held: 3 tokens increase: true
	// try: none free
	// granted after the release: 2 permits
	// another count: refused
}

// A reader that finds it must write upgrades in place, and downgrades when
// it is done writing, without ever letting a writer in between.
func ExampleRWMutex() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	m := lss[0].RWMutex("config")
	m.RLock()
	// ... read, decide to write ...
	if err := m.Upgrade(ctx); err != nil {
		// ErrDeadlock: another reader is upgrading; let it, and retry.
		m.RUnlock()
		return
	}
	fmt.Println("writing under token", m.Token() > 0)
	if err := m.Downgrade(); err != nil {
		return
	}
	// Readers on other nodes get in now; writers still wait.
	other := lss[1].RWMutex("config")
	fmt.Println("another reader gets in:", other.TryRLock())
	fmt.Println("a writer does not:", lss[2].RWMutex("config").TryLock())
	other.RUnlock()
	m.RUnlock()
	// Output:
	// writing under token true
	// another reader gets in: true
	// a writer does not: false
}

// Taking several locks at once: LockAll takes them in one order whatever
// the order asked, so two transfers between the same accounts, in opposite
// directions, cannot deadlock.
func ExampleLockspace_LockAll() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	transfer := func(ls *dlm.Lockspace, from, to string) error {
		locks, err := ls.LockAll(ctx, []dlm.Request{
			{Resource: "account/" + from, Mode: modes.EX},
			{Resource: "account/" + to, Mode: modes.EX},
		})
		if err != nil {
			return err // nothing is held
		}
		defer func() {
			for _, lk := range locks {
				lk.Unlock()
			}
		}()
		// ... move the money, writing under locks[0].Token() and locks[1].Token() ...
		return nil
	}
	done := make(chan error)
	for range 20 {
		go func() { done <- transfer(lss[0], "alice", "bob") }()
		go func() { done <- transfer(lss[1], "bob", "alice") }()
	}
	failed := 0
	for range 40 {
		if <-done != nil {
			failed++
		}
	}
	fmt.Println("transfers failed:", failed)
	// Output: transfers failed: 0
}

// Who holds a lock, and who waits for it: the resource's master says.
func ExampleLockspace_Describe() {
	lss, stop := cluster(3)
	defer stop()
	ctx := context.Background()

	held, _ := lss[1].Lock(ctx, "report", modes.PR)
	waiting := make(chan *dlm.Lock)
	go func() {
		lk, _ := lss[2].Lock(ctx, "report", modes.EX)
		waiting <- lk
	}()
	for { // until the writer's request has reached the master
		info, err := lss[0].Describe(ctx, "report")
		if err != nil {
			return
		}
		if len(info.Waiting) == 1 {
			g, w := info.Granted[0], info.Waiting[0]
			fmt.Printf("held by %s in %v (token %v), %s waits for %v\n", g.Node, g.Mode, g.Token == held.Token(), w.Node, w.Requested)
			break
		}
		time.Sleep(time.Millisecond)
	}
	held.Unlock()
	(<-waiting).Unlock()
	// Output: held by node2 in PR (token true), node3 waits for EX
}

// Work done under a lock stops when the lock does: its context is
// cancelled the moment the lock is lost (here its TTL runs out unrenewed).
func ExampleLock_Context() {
	lss, stop := cluster(3)
	defer stop()

	lk, err := lss[0].Lock(context.Background(), "job", modes.EX, dlm.WithTTL(time.Second))
	if err != nil {
		return
	}
	ctx, cancel := lk.Context(context.Background())
	defer cancel()
	select { // the work: it would go on for a minute
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	fmt.Println("work stopped:", errors.Is(context.Cause(ctx), dlm.ErrLockLost))
	// The store is the real guard: it refuses writes under an old token.
	lk.Unlock()
	// Output: work stopped: true
}

// A fencing token as JSON: a decimal string, which a JavaScript or Lua
// reader cannot round.
func ExampleToken() {
	lss, stop := cluster(1)
	defer stop()

	lk, _ := lss[0].Lock(context.Background(), "doc", modes.EX)
	defer lk.Unlock()
	b, _ := json.Marshal(struct {
		Token dlm.Token `json:"token"`
	}{dlm.Token(lk.Token())})
	var back struct {
		Token dlm.Token `json:"token"`
	}
	_ = json.Unmarshal(b, &back)
	fmt.Println(string(b) == fmt.Sprintf(`{"token":"%d"}`, lk.Token()), uint64(back.Token) == lk.Token(), lk.Token() < 1<<53)
	// Output: true true true
}

// Mutex is a sync.Locker; LockContext is its Lock with a deadline and an
// error.
func ExampleMutex_LockContext() {
	lss, stop := cluster(3)
	defer stop()

	m := lss[0].Mutex("nightly-report")
	m.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := lss[1].Mutex("nightly-report").LockContext(ctx)
	fmt.Println("second locker timed out:", errors.Is(err, dlm.ErrTimeout))
	m.Unlock()
	// Output: second locker timed out: true
}

// A node that has lost its quorum (here, cut off from the other two)
// makes a Lock wait for quorum to return, within its context; FailFast
// makes it fail at once instead.
func ExampleFailFast() {
	ctx := context.Background()
	c, err := dlmtest.New(ctx, 3)
	if err != nil {
		return
	}
	defer c.Close()
	ls, _ := c.Node(0).Lockspace("app")
	held, _ := ls.Lock(ctx, "canary", modes.NL)
	c.Network().Isolate(c.Names()[0])
	<-held.Lost() // the lease ran out: no quorum

	_, err = ls.Lock(ctx, "x", modes.EX, dlm.FailFast())
	fmt.Println("fail fast:", errors.Is(err, dlm.ErrNoQuorum))
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = ls.Lock(wait, "x", modes.EX)
	fmt.Println("waited, then timed out:", errors.Is(err, dlm.ErrTimeout), errors.Is(err, dlm.ErrNoQuorum))

	c.Network().Heal()
	back, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	lk, err := ls.Lock(back, "x", modes.EX) // waits until the node is back in a view
	fmt.Println("after the heal:", err == nil)
	if err == nil {
		lk.Unlock()
	}
	// Output:
	// fail fast: true
	// waited, then timed out: true true
	// after the heal: true
}

// How long locks are held, and how often requests had to wait, are in the
// node's metrics.
func ExampleConfig_metrics() {
	reg := prometheus.NewRegistry()
	c, err := dlmtest.New(context.Background(), 1, dlmtest.Configure(func(_ int, cfg *dlm.Config) { cfg.Registerer = reg }))
	if err != nil {
		return
	}
	defer c.Close()
	lss, _ := c.Lockspaces("app")

	lk, _ := lss[0].Lock(context.Background(), "r", modes.EX)
	lk.Unlock()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "dlm_lock_held_seconds":
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "EX" {
					fmt.Println(mf.GetName(), "EX:", m.GetHistogram().GetSampleCount())
				}
			}
		case "dlm_lock_contended_total":
			fmt.Println(mf.GetName(), "app:", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Unordered output:
	// dlm_lock_held_seconds EX: 1
	// dlm_lock_contended_total app: 0
}
