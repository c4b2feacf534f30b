package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// dropConn breaks the client's connection from its side, as a network
// blip would.
func dropConn(t *testing.T, c *Client) {
	t.Helper()
	c.mu.Lock()
	cn := c.cn
	c.mu.Unlock()
	if cn == nil {
		t.Fatal("not connected")
	}
	_ = cn.nc.Close()
}

// TestResumeAcrossDrop: a connection that drops is resumed with the same
// agent within the lease: the lock is kept (never Lost), a request that
// was waiting is granted through the new connection, and the session is
// the same.
func TestResumeAcrossDrop(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c, other := dial(t, a.addrs[0]), dial(t, a.addrs[1])
	session := c.Session()
	held, err := c.Lockspace("test").Lock(bg, a.resourceOn(1, "keep"), modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	busy := a.resourceOn(2, "busy")
	blocker, err := other.Lockspace("test").Lock(bg, busy, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		lk, err := c.Lockspace("test").Lock(bg, busy, modes.EX)
		if err == nil {
			err = lk.Unlock()
		}
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)
	dropConn(t, c)
	time.Sleep(50 * time.Millisecond)
	if err := blocker.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, waiting, 10*time.Second, "the waiting request, granted across the drop"); err != nil {
		t.Fatal(err)
	}
	if c.Session() != session {
		t.Fatalf("session %x after the drop, was %x", c.Session(), session)
	}
	select {
	case <-held.Lost():
		t.Fatalf("lock lost across a short drop: %v", held.Err())
	default:
	}
	if _, err := other.Lockspace("test").TryLock(bg, held.Resource(), modes.EX); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("the resumed session's lock was free to others: %v", err)
	}
	time.Sleep(2 * time.Second) // keep-alives go on over the new connection
	if err := held.Unlock(); err != nil {
		t.Fatalf("unlock after the drop: %v", err)
	}
}

// TestAgentDeath: the agent of a client dies; the client's locks are lost
// (Lost closes), a waiter through another agent gets the lock after the
// lock-delay with a larger token, and the client's next requests go to
// another of its addresses, in a new session.
func TestAgentDeath(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	c := dial(t, a.addrs[0], a.addrs[1], a.addrs[2])
	res := a.resourceOn(2, "death")
	lk, err := c.Lockspace("test").Lock(bg, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	session := c.Session()
	waiter := dial(t, a.addrs[1])
	got := make(chan *Lock, 1)
	go func() {
		w, err := waiter.Lockspace("test").Lock(bg, res, modes.EX)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(50 * time.Millisecond)
	killed := time.Now()
	a.kill(0)
	within(t, lk.Lost(), 5*time.Second, "Lost after the agent died")
	lostAfter := time.Since(killed)
	if !errors.Is(lk.Err(), lockapi.ErrLockLost) {
		t.Fatalf("lost lock's error: %v", lk.Err())
	}
	w := within(t, got, 20*time.Second, "the waiter's grant")
	if w == nil {
		t.FailNow()
	}
	grantedAfter := time.Since(killed)
	if grantedAfter <= lostAfter {
		t.Fatalf("waiter granted %v after the death, the dead agent's client stopped trusting its lock only after %v", grantedAfter, lostAfter)
	}
	if w.Token() <= lk.Token() {
		t.Fatalf("waiter's token %d not above %d", w.Token(), lk.Token())
	}
	if err := w.Unlock(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	next, err := c.Lockspace("test").Lock(ctx, res, modes.EX)
	if err != nil {
		c.mu.Lock()
		connected, agent, trust := c.cn != nil, c.addr, time.Until(c.trust)
		c.mu.Unlock()
		t.Fatalf("a request after the agent died: %v (connected %v, agent %d, trust for %v)", err, connected, agent, trust)
	}
	if c.Session() == session || c.Node() == a.nodes[0].Name() {
		t.Fatalf("still on session %x at %s", c.Session(), c.Node())
	}
	if err := next.Unlock(); err != nil {
		t.Fatal(err)
	}
}
