package dlm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func mustSession(t testing.TB, n *Node, ttl time.Duration) *Session {
	t.Helper()
	s, err := n.NewSession(ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionKeepAliveAndExpiry: a kept-alive session keeps its locks on
// every master with one renewal per master, not per lock; once renewals
// stop, every lock is lost on the holder's clock before the session's TTL
// has passed since the last renewal, and waiters elsewhere get the locks
// after it, with larger tokens.
func TestSessionKeepAliveAndExpiry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, nil)
		c := startMem(t, 3, mut)
		defer c.close()
		const ttl = 2 * time.Second
		lostCalls := make(chan uint64, 100)
		ended := make(chan error, 2)
		s, err := c.nodes[0].NewSession(ttl, OnLockLost(func(lk *Lock, why error) {
			if !errors.Is(why, ErrLockLost) {
				t.Errorf("OnLockLost with %v", why)
			}
			lostCalls <- lk.ID()
		}), OnSessionEnd(func(why error) { ended <- why }))
		if err != nil {
			t.Fatal(err)
		}
		if end, held := c.nodes[0].QuorumLease(); !held || !end.After(time.Now()) {
			t.Fatalf("QuorumLease of a serving node: %v %v", end, held)
		}
		var locks []*Lock
		var res []string
		for m := range 3 {
			for k := range 4 { // four locks per master: still one renewal each
				r := c.resourceOn(m, "sess"+string(rune('a'+k)))
				res = append(res, r)
				locks = append(locks, mustLock(t, c.ls[0], r, modes.EX, InSession(s)))
			}
		}
		if s.Len() != len(locks) {
			t.Fatalf("session has %d locks, want %d", s.Len(), len(locks))
		}
		renewsBefore := metricValue(t, regs[1], "dlm_transport_messages_received_total", map[string]string{"type": "renew"})
		ctx, stop := context.WithCancel(bg)
		kept := make(chan error, 1)
		go func() { kept <- s.KeepAlive(ctx) }()
		time.Sleep(5 * ttl)
		for _, lk := range locks {
			select {
			case <-lk.Lost():
				t.Fatalf("lock of a kept-alive session lost: %v", lk.Err())
			default:
			}
		}
		renews := metricValue(t, regs[1], "dlm_transport_messages_received_total", map[string]string{"type": "renew"}) - max(renewsBefore, 0)
		// KeepAlive renews every TTL/3: about 15 renewals in 5 TTLs, each one
		// message to node 2 for its four locks.
		if renews < 10 || renews > 16 {
			t.Fatalf("node 2 received %v renewals in %v; want one per TTL/3", renews, 5*ttl)
		}
		stop()
		if err := <-kept; err != nil {
			t.Fatal(err)
		}
		// The last renewal was at most TTL/3 ago; from now on nothing renews.
		start := time.Now()
		waiters := make(chan *Lock, len(res))
		for _, r := range res {
			go func() { waiters <- mustLock(t, c.ls[2], r, modes.EX) }()
		}
		<-s.Lost()
		lostAfter := time.Since(start)
		if lostAfter >= ttl {
			t.Fatalf("session lost %v after the last renewal, TTL %v", lostAfter, ttl)
		}
		if err := s.Err(); !errors.Is(err, ErrLockLost) || !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("expired session's error: %v", err)
		}
		for _, lk := range locks {
			<-lk.Lost()
			if !errors.Is(lk.Err(), ErrLockLost) {
				t.Fatalf("lock of an expired session: %v", lk.Err())
			}
		}
		if err := <-ended; !errors.Is(err, ErrLockLost) {
			t.Fatalf("OnSessionEnd with %v", err)
		}
		ids := map[uint64]bool{}
		for range locks {
			ids[<-lostCalls] = true
		}
		for _, lk := range locks {
			if !ids[lk.ID()] {
				t.Fatalf("OnLockLost not called for %s", lk.Resource())
			}
		}
		tokens := map[string]uint64{}
		for _, lk := range locks {
			tokens[lk.Resource()] = lk.Token()
		}
		for range res {
			next := <-waiters
			if next.Token() <= tokens[next.Resource()] {
				t.Fatalf("%s: next token %d not above %d", next.Resource(), next.Token(), tokens[next.Resource()])
			}
			mustUnlock(t, next)
		}
		if got := metricValue(t, regs[0], "dlm_sessions_expired_total", nil); got != 1 {
			t.Fatalf("dlm_sessions_expired_total = %v", got)
		}
		if got := metricValue(t, regs[0], "dlm_sessions", nil); got != 0 {
			t.Fatalf("dlm_sessions = %v after expiry", got)
		}
		if _, err := c.ls[0].Lock(bg, "after", modes.EX, InSession(s)); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("lock in an expired session: %v", err)
		}
		if err := s.Renew(bg); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("renew of an expired session: %v", err)
		}
		if err := locks[0].Unlock(); !errors.Is(err, ErrLockLost) {
			t.Fatalf("unlock of a lock of an expired session: %v", err)
		}
	})
}

// TestSessionMasterKeepsTTL: at its master, a lock of a session carries
// the session's TTL, so a master that never hears from the holder again
// releases it by itself; a lock with a TTL of its own keeps that one.
func TestSessionMasterKeepsTTL(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		s := mustSession(t, c.nodes[0], 3*time.Second)
		defer s.Close()
		r := c.resourceOn(1, "ttl")
		own := c.resourceOn(2, "own")
		a := mustLock(t, c.ls[0], r, modes.PR, InSession(s))
		b := mustLock(t, c.ls[0], own, modes.PR, InSession(s), WithTTL(10*time.Second))
		for _, want := range []struct {
			res string
			ttl time.Duration
		}{{r, 3 * time.Second}, {own, 10 * time.Second}} {
			rs, ok := c.ls[1].Dump(want.res)
			if !ok {
				rs, ok = c.ls[2].Dump(want.res)
			}
			// The dump says how long the lock has left: all of its TTL, as
			// no time passed since the grant in the bubble.
			if !ok || len(rs.Granted) != 1 || rs.Granted[0].TTL != want.ttl {
				t.Fatalf("%s at its master: %+v", want.res, rs)
			}
		}
		if err := a.Renew(bg); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Renew of a lock that lives by its session: %v", err)
		}
		if err := b.Renew(bg); err != nil {
			t.Fatalf("Renew of a session lock with its own TTL: %v", err)
		}
	})
}

// TestSessionClose: Close releases every lock of the session (a waiter
// elsewhere gets it at once), fails its waiting requests, closes Lost with
// ErrClosed, and refuses new locks.
func TestSessionClose(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		s := mustSession(t, c.nodes[0], time.Minute)
		local, remote := c.resourceOn(0, "close"), c.resourceOn(1, "close")
		held := []*Lock{mustLock(t, c.ls[0], local, modes.EX, InSession(s)), mustLock(t, c.ls[0], remote, modes.EX, InSession(s))}
		blocker := mustLock(t, c.ls[1], c.resourceOn(2, "blocked"), modes.EX)
		waiting := make(chan error, 1)
		go func() {
			_, err := c.ls[0].Lock(bg, blocker.Resource(), modes.PR, InSession(s))
			waiting <- err
		}()
		others := make(chan *Lock, 2)
		for _, lk := range held {
			go func() { others <- mustLock(t, c.ls[2], lk.Resource(), modes.EX) }()
		}
		synctestWait()
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-waiting; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting request of a closed session: %v", err)
		}
		for range held {
			mustUnlock(t, <-others)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("locks of a closed session released after %v", d)
		}
		for _, lk := range held {
			<-lk.Lost()
			if !errors.Is(lk.Err(), ErrClosed) {
				t.Fatalf("lock of a closed session: %v", lk.Err())
			}
		}
		synctestWait() // the cancel of the remote request reaches its master, which answers
		if s.Len() != 0 {
			t.Fatalf("closed session still has %d locks", s.Len())
		}
		if _, err := c.ls[0].Lock(bg, local, modes.EX, InSession(s)); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("lock in a closed session: %v", err)
		}
		mustUnlock(t, blocker)
		c.settle(c.free(blocker.Resource()))
	})
}

// TestSessionUnlockLeaves: locks unlocked one by one leave the session,
// which then renews nothing for them; bad arguments are refused.
func TestSessionUnlockLeaves(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		if _, err := c.nodes[0].NewSession(0); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("session TTL 0: %v", err)
		}
		s := mustSession(t, c.nodes[0], time.Second)
		defer s.Close()
		other := mustSession(t, c.nodes[1], time.Second)
		defer other.Close()
		if _, err := c.ls[0].Lock(bg, "x", modes.EX, InSession(other)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("lock in another node's session: %v", err)
		}
		for k := range 10 {
			lk := mustLock(t, c.ls[0], c.resourceOn(k%3, "leave"), modes.EX, InSession(s))
			mustUnlock(t, lk)
		}
		if s.Len() != 0 {
			t.Fatalf("session has %d locks after every one was unlocked", s.Len())
		}
		if _, err := c.ls[0].TryLock(bg, c.resourceOn(1, "try"), modes.EX, InSession(s)); err != nil {
			t.Fatal(err)
		}
		if s.Len() != 1 {
			t.Fatalf("session has %d locks, want 1", s.Len())
		}
		if err := s.Renew(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSessionRenewalNamesTheSession: a session's renewal is one message per
// master and lockspace, naming the session rather than its locks, however
// many locks the session has there, and it keeps every one of them alive
// at the master past the TTL.
func TestSessionRenewalNamesTheSession(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, nil)
		c := startMem(t, 3, mut)
		defer c.close()
		const ttl = 3 * time.Second
		s := mustSession(t, c.nodes[0], ttl)
		defer s.Close()
		// More locks at one master than one Renew of ids carries.
		n := wire.DefaultLimits().MaxRenew + 100
		var names []string
		for j := 0; len(names) < n; j++ {
			if name := fmt.Sprintf("renew-%d", j); c.ls[0].MasterOf(name) == c.nodes[1].Name() {
				names = append(names, name)
			}
		}
		locks := make([]*Lock, n)
		for j, name := range names {
			locks[j] = mustLock(t, c.ls[0], name, modes.PR, InSession(s))
		}
		sent := func(name string) float64 {
			return metricValue(t, regs[0], name, map[string]string{"type": "renew"})
		}
		msgs, bytes := sent("dlm_transport_messages_sent_total"), sent("dlm_transport_bytes_sent_total")
		for range 3 { // past the TTL, each renewal within it
			time.Sleep(ttl / 2)
			if err := s.Renew(bg); err != nil {
				t.Fatal(err)
			}
		}
		if m, b := sent("dlm_transport_messages_sent_total")-max(msgs, 0), sent("dlm_transport_bytes_sent_total")-max(bytes, 0); m != 3 || b > 3*64 {
			t.Fatalf("3 renewals of %d locks at one master sent %v messages of %v bytes, want 3 naming no lock", n, m, b)
		}
		for _, j := range []int{0, n / 2, n - 1} {
			rs, ok := c.ls[1].Dump(names[j])
			if !ok || len(rs.Granted) != 1 || rs.Granted[0].TTL <= ttl/3 {
				t.Fatalf("%s at its master after the renewals: %+v", names[j], rs)
			}
		}
		select {
		case <-locks[n-1].Lost():
			t.Fatal("a lock of the renewed session was lost")
		default:
		}
	})
}

// TestSessionRenewalAtAMasterWithoutQuorum: a master that has lost its
// quorum refuses a session's renewal, which names no lock, as it refuses a
// lock's: the session's lease is not extended on its word.
func TestSessionRenewalAtAMasterWithoutQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 5, nil)
		defer c.close()
		s := mustSession(t, c.nodes[0], time.Minute)
		defer s.Close()
		mustLock(t, c.ls[0], c.resourceOn(1, "minority"), modes.EX, InSession(s))
		// n2 hears only n1: it loses its quorum, while n1 keeps its own
		// and, until the others remove n2, sends it n2's renewals.
		for _, o := range []int{2, 3, 4} {
			c.net.Partition(c.nodes[1].Name(), c.nodes[o].Name())
		}
		for {
			if _, held := c.nodes[1].QuorumLease(); !held {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if c.ls[0].MasterOf(c.resourceOn(1, "minority")) != c.nodes[1].Name() {
			t.Fatal("n2 was removed before it lost its quorum lease")
		}
		if err := s.Renew(bg); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("renewal at a master without quorum: %v", err)
		}
	})
}
