package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// agents starts a cluster of n nodes in this process (package dlmtest),
// each an agent serving a client port on loopback, and returns their
// addresses: what `dlmnode agent --client-addr` gives a client.
func agents(n int) ([]string, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dlmtest.New(ctx, n)
	if err != nil {
		panic(err)
	}
	var addrs []string
	var servers []*clientport.Server
	var served []chan error
	for _, nd := range c.Nodes() {
		cfg := clientport.DefaultConfig()
		cfg.Node = nd
		srv, err := clientport.New(cfg)
		if err != nil {
			panic(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		addrs, servers, served = append(addrs, ln.Addr().String()), append(servers, srv), append(served, done)
	}
	return addrs, func() {
		for i, s := range servers {
			_ = s.Close()
			<-served[i]
		}
		_ = c.Close()
	}
}

func connect(addrs ...string) *client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addrs...)
	if err != nil {
		panic(err)
	}
	return c
}

// A counting semaphore through clients of two agents: at most 3 permits
// out at once, FIFO, every acquisition with a larger fencing token.
func ExampleSemaphore() {
	addrs, stop := agents(3)
	defer stop()
	a, b := connect(addrs[0]), connect(addrs[1])
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	sa, _ := a.Lockspace("app").Semaphore("db-connections", 3)
	sb, _ := b.Lockspace("app").Semaphore("db-connections", 3)
	p1, _ := sa.Acquire(ctx, 2)
	if _, err := sb.TryAcquire(ctx, 2); errors.Is(err, lockapi.ErrNotQueued) {
		fmt.Println("try for 2: only 1 free")
	}
	got := make(chan *client.Permit)
	go func() {
		p, _ := sb.Acquire(ctx, 2) // waits for p1's release
		got <- p
	}()
	_ = p1.Release()
	p2 := <-got
	fmt.Println("granted:", p2.Count(), "permits, larger token:", p2.Token() > p1.Token())

	wrong, _ := a.Lockspace("app").Semaphore("db-connections", 5)
	if _, err := wrong.Acquire(ctx, 1); errors.Is(err, lockapi.ErrPermitsMismatch) {
		fmt.Println("another count: refused")
	}
	_ = p2.Release()
	// Output:
	// try for 2: only 1 free
	// granted: 2 permits, larger token: true
	// another count: refused
}

// Work under a lock runs under its Context, which is cancelled the moment
// the lock is lost (the session ends, the agent dies or loses quorum) or
// unlocked: the work is interrupted, not merely told.
func ExampleLock_Context() {
	addrs, stop := agents(3)
	defer stop()
	c := connect(addrs...)
	defer c.Close()

	lk, _ := c.Lockspace("app").Lock(context.Background(), "nightly-report", modes.EX)
	ctx, cancel := lk.Context(context.Background())
	defer cancel()
	work := make(chan error)
	go func() {
		<-ctx.Done() // a long job would check ctx between steps
		work <- context.Cause(ctx)
	}()
	_ = lk.Unlock()
	fmt.Println("work stopped:", errors.Is(<-work, lockapi.ErrNotHeld))
	// Output:
	// work stopped: true
}

// LockAll takes a set of locks in a canonical order, all or none, so two
// clients taking overlapping sets never deadlock.
func ExampleLockspace_LockAll() {
	addrs, stop := agents(3)
	defer stop()
	c := connect(addrs[0])
	defer c.Close()

	locks, err := c.Lockspace("app").LockAll(context.Background(), []lockapi.Request{
		{Resource: "accounts/bob", Mode: modes.EX},
		{Resource: "accounts/alice", Mode: modes.EX},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, lk := range locks {
		fmt.Println("holding", lk.Resource())
		_ = lk.Unlock()
	}
	// Output:
	// holding accounts/bob
	// holding accounts/alice
}

// A reader that finds it must write upgrades in place; the RWMutex of a
// client and of an embedded node are one lock.
func ExampleLockspace_RWMutex() {
	addrs, stop := agents(3)
	defer stop()
	c := connect(addrs[0])
	defer c.Close()
	ctx := context.Background()

	m := c.Lockspace("app").RWMutex("config")
	_ = m.RLockContext(ctx)
	if err := m.Upgrade(ctx); err == nil {
		fmt.Println("writing with token > 0:", m.Token() > 0)
	}
	_ = m.Downgrade() // readers queued behind are let in; no writer gets between
	m.RUnlock()
	// Output:
	// writing with token > 0: true
}

// Describe asks the resource's master, through any agent, who holds and
// who waits.
func ExampleLockspace_Describe() {
	addrs, stop := agents(3)
	defer stop()
	holder, other := connect(addrs[0]), connect(addrs[2])
	defer holder.Close()
	defer other.Close()
	ctx := context.Background()

	lk, _ := holder.Lockspace("app").Lock(ctx, "orders/42", modes.PW)
	d, _ := other.Lockspace("app").Describe(ctx, "orders/42")
	for _, l := range d.Locks {
		fmt.Printf("queue %d: %v held through %s, token matches: %v\n", l.Queue, l.Granted, l.Node, l.Token == lk.Token())
	}
	_ = lk.Unlock()
	// Output:
	// queue 1: PW held through node1, token matches: true
}

// A client that would rather do something else than wait for an agent
// without quorum asks to fail fast.
func ExampleLockspace_Lock_failFast() {
	addrs, stop := agents(3)
	defer stop()
	c := connect(addrs[0])
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lk, err := c.Lockspace("app").Lock(ctx, "cache/refresh", modes.EX, lockapi.FailFast())
	switch {
	case errors.Is(err, lockapi.ErrNoQuorum):
		fmt.Println("no quorum: serving stale data")
	case err == nil:
		fmt.Println("locked")
		_ = lk.Unlock()
	}
	// Output:
	// locked
}
