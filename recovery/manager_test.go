package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNet connects Managers in one process. Messages are delivered on a
// goroutine each (like a reader goroutine), and links can be cut.
type fakeNet struct {
	mu    sync.Mutex
	nodes map[string]*Manager
	boots map[string]uint64
	cut   map[[2]string]bool
	// silent nodes are crashed without anyone knowing: what is sent to or
	// from them vanishes, and calls to them wait for their context.
	silent map[string]bool
	// connLost[{a, b}] is how many of a's next calls to b fail with
	// transport.ErrConnLost, undelivered.
	connLost map[[2]string]int
	// onSend, if set, sees every message sent, with its time.
	onSend func(from, to string, m wire.Message)
	wg     sync.WaitGroup
	next   uint64
	calls  map[uint64]func(wire.Message, error)
}

func newFakeNet() *fakeNet {
	return &fakeNet{nodes: map[string]*Manager{}, boots: map[string]uint64{}, cut: map[[2]string]bool{},
		silent: map[string]bool{}, connLost: map[[2]string]int{}, calls: map[uint64]func(wire.Message, error){}}
}

type fakeLinks struct {
	net  *fakeNet
	name string
}

var errCut = errors.New("fake: link cut")

func (l fakeLinks) deliver(to string, in transport.Inbound) error {
	n := l.net
	n.mu.Lock()
	m, ok := n.nodes[to]
	blocked := n.cut[[2]string{l.name, to}]
	silent := n.silent[to] || n.silent[l.name]
	onSend := n.onSend
	n.mu.Unlock()
	if onSend != nil {
		onSend(l.name, to, in.Msg)
	}
	if silent {
		return nil
	}
	if !ok || blocked {
		return errCut
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		m.Handle(in)
	}()
	return nil
}

func (l fakeLinks) Send(peer string, m wire.Message) error {
	l.net.mu.Lock()
	boot := l.net.boots[l.name]
	l.net.mu.Unlock()
	return l.deliver(peer, transport.Inbound{From: l.name, BootID: boot, Msg: m})
}

func (l fakeLinks) Go(peer string, m wire.Message, cb func(wire.Message, error)) error {
	n := l.net
	n.mu.Lock()
	n.next++
	id := n.next
	n.calls[id] = cb
	boot := n.boots[l.name]
	n.mu.Unlock()
	return l.deliver(peer, transport.Inbound{From: l.name, BootID: boot, Msg: m, ReplyTo: transport.ReplyTo{Peer: l.name, ID: id}})
}

func (l fakeLinks) Call(ctx context.Context, peer string, m wire.Message) (wire.Message, error) {
	l.net.mu.Lock()
	lost := l.net.connLost[[2]string{l.name, peer}] > 0
	if lost {
		l.net.connLost[[2]string{l.name, peer}]--
	}
	l.net.mu.Unlock()
	if lost {
		return nil, fmt.Errorf("%w: fake: the peer restarted", transport.ErrConnLost)
	}
	ch := make(chan wire.Message, 1)
	if err := l.Go(peer, m, func(r wire.Message, _ error) { ch <- r }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l fakeLinks) Reply(to transport.ReplyTo, m wire.Message) error {
	n := l.net
	n.mu.Lock()
	cb := n.calls[to.ID]
	delete(n.calls, to.ID)
	blocked := n.cut[[2]string{l.name, to.Peer}]
	silent := n.silent[l.name] || n.silent[to.Peer]
	n.mu.Unlock()
	if silent {
		return nil
	}
	if cb == nil || blocked {
		return errCut
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		cb(m, nil)
	}()
	return nil
}

// fakeHost records what the Manager asks of it.
type fakeHost struct {
	mu      sync.Mutex
	events  []string
	resumed []uint64
	evicted int
}

func (h *fakeHost) log(s string) { h.mu.Lock(); h.events = append(h.events, s); h.mu.Unlock() }

func (h *fakeHost) Prepare(ctx context.Context, v View) error {
	h.log(fmt.Sprintf("prepare %d", v.Epoch))
	return nil
}
func (h *fakeHost) Suspend(v View) { h.log(fmt.Sprintf("suspend %d", v.Epoch)) }
func (h *fakeHost) Report(ctx context.Context, v View) error {
	h.log(fmt.Sprintf("report %d", v.Epoch))
	return nil
}
func (h *fakeHost) Rebuild(v View) { h.log(fmt.Sprintf("rebuild %d", v.Epoch)) }
func (h *fakeHost) Resume(v View) {
	h.mu.Lock()
	h.resumed = append(h.resumed, v.Epoch)
	h.mu.Unlock()
	h.log(fmt.Sprintf("resume %d", v.Epoch))
}
func (h *fakeHost) LeaseLost(evicted bool) {
	h.mu.Lock()
	if evicted {
		h.evicted++
	}
	h.mu.Unlock()
	h.log(fmt.Sprintf("lease lost (evicted %v)", evicted))
}
func (h *fakeHost) LeaseRegained() { h.log("lease regained") }

type testCluster struct {
	net   *fakeNet
	names []string
	ms    map[string]*Manager
	hosts map[string]*fakeHost
}

// newTestCluster starts Managers for the given configured members; only
// those in up run, and every running one sees the others up.
func newTestCluster(t *testing.T, members []string, up []string, tweak func(*Config)) *testCluster {
	return startTestCluster(t, newFakeNet(), members, up, tweak)
}

// startTestCluster is newTestCluster on a fake network of the caller's.
func startTestCluster(t *testing.T, net *fakeNet, members []string, up []string, tweak func(*Config)) *testCluster {
	c := &testCluster{net: net, names: members, ms: map[string]*Manager{}, hosts: map[string]*fakeHost{}}
	for i, name := range up {
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = name, uint64(i+1)*100, members
		if tweak != nil {
			tweak(&cfg)
		}
		h := &fakeHost{}
		m, err := New(cfg, fakeLinks{c.net, name}, h)
		if err != nil {
			t.Fatal(err)
		}
		c.net.mu.Lock()
		c.net.nodes[name], c.net.boots[name] = m, cfg.BootID
		c.net.mu.Unlock()
		c.ms[name], c.hosts[name] = m, h
	}
	for _, a := range up {
		for _, b := range up {
			c.ms[a].MemberAlive(b, c.net.boots[b])
		}
	}
	for _, m := range c.ms {
		m.Start()
	}
	return c
}

func (c *testCluster) close() {
	for _, m := range c.ms {
		m.Close()
	}
	c.net.wg.Wait()
}

func TestFirstViewAndServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		c := newTestCluster(t, names, names, nil)
		defer c.close()
		for _, m := range c.ms {
			<-m.Served()
		}
		v := c.ms["b"].View()
		if v.Epoch != 1 || len(v.Members) != 3 || v.Coordinator != "a" {
			t.Fatalf("view %v", v)
		}
		// The recovery's steps in order; the lease comes once, at any
		// point (the heartbeat sent at the commit may be acknowledged
		// before the recovery ends, or after).
		for name, h := range c.hosts {
			h.mu.Lock()
			var steps []string
			leases := 0
			for _, e := range h.events {
				if e == "lease regained" {
					leases++
				} else {
					steps = append(steps, e)
				}
			}
			ev := fmt.Sprint(h.events)
			h.mu.Unlock()
			if fmt.Sprint(steps) != "[prepare 1 suspend 1 report 1 rebuild 1 resume 1]" || leases != 1 {
				t.Errorf("%s: %s", name, ev)
			}
		}
	})
}

// A minority cannot agree a view, and does not serve.
func TestMinorityCannotCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, []string{"a", "b", "c", "d", "e"}, []string{"a", "b"}, nil)
		defer c.close()
		time.Sleep(10 * time.Second)
		for name, m := range c.ms {
			if v := m.View(); v.Epoch != 0 || m.Serving() {
				t.Errorf("%s: view %v serving %v with 2 of 5 members", name, v, m.Serving())
			}
		}
	})
}

// The first view waits Settle for missing members once a quorum is up.
func TestFirstViewSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := newTestCluster(t, []string{"a", "b", "c"}, []string{"a", "b"}, nil)
		defer c.close()
		<-c.ms["a"].Served()
		if d := time.Since(start); d < DefaultConfig().Settle {
			t.Fatalf("first view after %v, before Settle", d)
		}
		if v := c.ms["a"].View(); len(v.Members) != 2 {
			t.Fatalf("view %v", v)
		}
	})
}

func TestPromiseOncePerEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, []string{"a", "b", "c"}, nil, nil)
		defer c.close()
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = "b", 7, []string{"a", "b", "c"}
		m, err := New(cfg, fakeLinks{c.net, "b"}, &fakeHost{})
		if err != nil {
			t.Fatal(err)
		}
		all := []wire.ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 7}, {Name: "c", BootID: 3}}
		p1 := &wire.Propose{Epoch: 5, Coordinator: "a", Members: all}
		p2 := &wire.Propose{Epoch: 5, Coordinator: "c", Members: all[1:]}
		if pr := m.promise(Member{}, p1); !pr.OK {
			t.Fatalf("first proposal refused: %+v", pr)
		}
		if pr := m.promise(Member{}, p2); pr.OK || pr.Promised != 5 {
			t.Fatalf("a second proposal for epoch 5 was promised: %+v", pr)
		}
		if pr := m.promise(Member{}, &wire.Propose{Epoch: 4, Coordinator: "a", Members: all}); pr.OK {
			t.Fatalf("an older epoch was promised: %+v", pr)
		}
		other := []wire.ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 8}}
		if pr := m.promise(Member{}, &wire.Propose{Epoch: 6, Coordinator: "a", Members: other}); pr.OK {
			t.Fatalf("a proposal naming another boot of this node was promised: %+v", pr)
		}
	})
}

// A node that sees a proposal whose previous epoch it never had drops its
// lock state before promising: it is a zombie. One that has committed no
// view since it started (it is joining) holds no lock state: it is not
// evicted (restarted agents logged an eviction on every join), and it
// still coordinates nothing until it is a member.
func TestZombieDropsStateBeforePromising(t *testing.T) {
	for _, committed := range []uint64{2, 0} {
		t.Run(fmt.Sprintf("committed=%d", committed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTestCluster(t, []string{"a", "b", "c"}, nil, nil)
				defer c.close()
				h := &fakeHost{}
				cfg := DefaultConfig()
				cfg.Name, cfg.BootID, cfg.Members = "b", 7, []string{"a", "b", "c"}
				m, _ := New(cfg, fakeLinks{c.net, "b"}, h)
				if committed != 0 {
					m.committed = View{Epoch: committed, Members: []Member{{"a", 1}, {"b", 7}, {"c", 3}}}
				}
				all := []wire.ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 7}, {Name: "c", BootID: 3}}
				pr := m.promise(Member{"a", 1}, &wire.Propose{Epoch: 9, PrevEpoch: 8, Coordinator: "a", Members: all})
				h.mu.Lock()
				ev := fmt.Sprint(h.events)
				h.mu.Unlock()
				m.mu.Lock()
				coordinates := m.isCoordinatorLocked()
				m.mu.Unlock()
				switch {
				case !pr.OK:
					t.Fatalf("promise %+v", pr)
				case committed != 0 && h.evicted != 1:
					t.Fatalf("zombie: evictions %d", h.evicted)
				case committed == 0 && (h.evicted != 0 || ev != "[]"):
					t.Fatalf("joining node: evictions %d, host told %s", h.evicted, ev)
				case coordinates:
					t.Fatal("a node that learned of views agreed without it coordinates")
				}
			})
		})
	}
}

// A proposer that missed views this node is in, and is not a member of
// them, is refused: it is back from a partition with a stale view and stale
// failure reports, and would evict healthy members. A member of the view
// that only missed its commit is heard.
func TestStaleProposerIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, []string{"a", "b", "c"}, nil, nil)
		defer c.close()
		h := &fakeHost{}
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = "b", 7, []string{"a", "b", "c"}
		m, _ := New(cfg, fakeLinks{c.net, "b"}, h)
		m.committed = View{Epoch: 2, Coordinator: "b", Members: []Member{{"b", 7}, {"c", 3}}}
		ab := []wire.ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 7}}
		pr := m.promise(Member{"a", 1}, &wire.Propose{Epoch: 5, PrevEpoch: 1, Coordinator: "a", Members: ab})
		if pr.OK || m.promised != 0 || h.evicted != 0 {
			t.Fatalf("stale proposer: promise %+v, promised %d, evictions %d", pr, m.promised, h.evicted)
		}
		bc := []wire.ViewMember{{Name: "b", BootID: 7}, {Name: "c", BootID: 3}}
		pr = m.promise(Member{"c", 3}, &wire.Propose{Epoch: 6, PrevEpoch: 1, Coordinator: "c", Members: bc})
		if !pr.OK || m.promised != 6 || h.evicted != 0 {
			t.Fatalf("member behind on commits: promise %+v, promised %d, evictions %d", pr, m.promised, h.evicted)
		}
	})
}

// A proposal that leaves out a member this node sees up is refused: after
// a heal, the node that was cut off may still think the others dead. Once
// membership here says the member is down (or up in another boot), the
// same view is promised.
func TestProposalDroppingLiveMemberIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCluster(t, []string{"a", "b", "c"}, nil, nil)
		defer c.close()
		h := &fakeHost{}
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = "b", 7, []string{"a", "b", "c"}
		m, _ := New(cfg, fakeLinks{c.net, "b"}, h)
		m.committed = View{Epoch: 3, Coordinator: "a", Members: []Member{{"a", 1}, {"b", 7}, {"c", 3}}}
		m.alive = map[string]uint64{"a": 1, "b": 7, "c": 3}
		ab := []wire.ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 7}}
		pr := m.promise(Member{"a", 1}, &wire.Propose{Epoch: 4, PrevEpoch: 3, Coordinator: "a", Members: ab})
		if pr.OK || m.promised != 0 || !strings.Contains(pr.Reason, "c@3") {
			t.Fatalf("proposal dropping c, which b sees up: promise %+v, promised %d; want refused, naming c@3", pr, m.promised)
		}
		m.alive["c"] = 4 // c restarted: the old boot is gone
		pr = m.promise(Member{"a", 1}, &wire.Propose{Epoch: 5, PrevEpoch: 3, Coordinator: "a", Members: ab})
		if !pr.OK || m.promised != 5 {
			t.Fatalf("proposal dropping c's old boot: promise %+v, promised %d", pr, m.promised)
		}
		delete(m.alive, "c")
		pr = m.promise(Member{"a", 1}, &wire.Propose{Epoch: 6, PrevEpoch: 3, Coordinator: "a", Members: ab})
		if !pr.OK || m.promised != 6 || h.evicted != 0 {
			t.Fatalf("proposal dropping c, down: promise %+v, promised %d, evictions %d", pr, m.promised, h.evicted)
		}
	})
}

func TestLeaseNeedsQuorumOfMemberAcks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.BootID, cfg.Members = "a", 1, []string{"a", "b", "c", "d", "e"}
	m, _ := New(cfg, nil, &fakeHost{})
	now := time.Now()
	m.acks = map[string]time.Time{"b": now.Add(-time.Second)}
	if _, ok := m.leaseEndLocked(); ok {
		t.Fatal("one ack of four peers held a lease needing two")
	}
	m.acks["c"] = now.Add(-200 * time.Millisecond)
	end, ok := m.leaseEndLocked()
	if !ok || !end.Equal(now.Add(-time.Second).Add(cfg.Lease)) {
		t.Fatalf("lease end %v, %v: want the second most recent ack plus L", end, ok)
	}
	if d := cfg.LockDelay(); d < cfg.Lease || d > cfg.Lease*11/10+cfg.MaxDelay {
		t.Fatalf("lock-delay %v for lease %v", d, cfg.Lease)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Name, good.BootID, good.Members = "a", 1, []string{"a"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"not a member": func(c *Config) { c.Name = "z" },
		"no boot":      func(c *Config) { c.BootID = 0 },
		"lease":        func(c *Config) { c.HeartbeatInterval = c.Lease },
		"drift":        func(c *Config) { c.ClockDrift = 0.5 },
		"intervals":    func(c *Config) { c.StatusInterval = 0 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A view that aborts the recovery of one removing a member still waits out
// that member's lock-delay: the removal is measured from the last view
// whose recovery completed, not from the aborted one. (A resync right
// after a crash, from a link that broke with it, is the common case.)
func TestAbortedRecoveryKeepsLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		c := newTestCluster(t, names, names, nil)
		defer c.close()
		for _, m := range c.ms {
			<-m.Served()
		}
		dead := c.ms["c"]
		c.net.mu.Lock()
		delete(c.net.nodes, "c")
		c.net.mu.Unlock()
		dead.Close()
		crashed := time.Now()
		for _, name := range []string{"a", "b"} {
			c.ms[name].MemberGone("c")
		}
		// As soon as the view without c commits, a link breaks: resync.
		for c.ms["a"].View().Epoch < 2 {
			time.Sleep(time.Millisecond)
		}
		c.ms["a"].RequestResync()
		c.ms["b"].RequestResync()
		for c.ms["a"].View().Epoch < 3 || !c.ms["a"].Serving() {
			time.Sleep(time.Millisecond)
		}
		h := c.hosts["a"]
		h.mu.Lock()
		events := fmt.Sprint(h.events)
		h.mu.Unlock()
		if !strings.Contains(events, "suspend 3") || strings.Contains(events, "rebuild 2") {
			t.Skipf("the resync did not abort epoch 2's recovery (events %s): nothing to check", events)
		}
		st := c.ms["a"].LastStats()
		if took := time.Since(crashed); took < DefaultConfig().LockDelay() {
			t.Fatalf("c's locks could be re-granted %v after it was last heard, within the lock-delay %v (events %s)", took, DefaultConfig().LockDelay(), events)
		}
		if len(st.Removed) != 1 || st.Removed[0].Name != "c" || st.LockDelay <= 0 {
			t.Fatalf("epoch %d's recovery: removed %v, lock-delay %v; want c and its lock-delay", st.Epoch, st.Removed, st.LockDelay)
		}
	})
}

// A Commit handled while or after the Manager closes (it arrives on a
// transport goroutine) starts no recovery: nothing runs after Close
// returns, and -race sees no Add of Close's WaitGroup after its Wait.
func TestCommitDuringCloseStartsNoRecovery(t *testing.T) {
	commit := &wire.Commit{Epoch: 1, Coordinator: "a", Members: []wire.ViewMember{{Name: "a", BootID: 100}}}
	for range 50 {
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = "a", 100, []string{"a"}
		h := &fakeHost{}
		m, err := New(cfg, fakeLinks{newFakeNet(), "a"}, h)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { m.Handle(transport.Inbound{From: "a", BootID: 100, Msg: commit}) })
		m.Close()
		wg.Wait()
		h.mu.Lock()
		closed := len(h.events)
		h.mu.Unlock()
		m.Handle(transport.Inbound{From: "a", BootID: 100, Msg: &wire.Commit{Epoch: 2, Coordinator: "a", Members: commit.Members}})
		h.mu.Lock()
		after := h.events[closed:]
		h.mu.Unlock()
		if len(after) != 0 {
			t.Fatalf("after Close: %v", after)
		}
	}
}

// stallHost is a fakeHost whose lease bookkeeping a test stalls
// (seam.LeaseStall), as a process pause stalls the lease's timer.
type stallHost struct {
	fakeHost
	stalled atomic.Bool
}

func (h *stallHost) LeaseStalled(seam.Key) bool { return h.stalled.Load() }

// The lease ends on the clock even when the Manager's timer runs late (a
// process pause): LeaseHeld and LeaseEnd say so at once, and acks that come
// after the end renew the lease only after the host was told it was lost,
// so that the locks held through the gap are fenced.
func TestLeaseEndsOnTheClockWhenItsTimerIsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Name, cfg.BootID, cfg.Members = "a", 1, []string{"a", "b", "c"}
		h := &stallHost{}
		m, err := New(cfg, nil, h)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ack := func() {
			m.mu.Lock()
			m.acks["b"], m.acks["c"] = time.Now(), time.Now()
			m.mu.Unlock()
		}
		ack()
		m.checkLease()
		if _, held := m.LeaseEnd(); !held || !m.LeaseHeld() {
			t.Fatal("no lease after a quorum of acks")
		}
		h.stalled.Store(true)
		time.Sleep(cfg.Lease + time.Millisecond)
		synctest.Wait() // the lease timer ran, and did nothing
		if m.LeaseHeld() {
			t.Fatal("LeaseHeld after the lease's end, before the Manager noticed")
		}
		if _, held := m.LeaseEnd(); held {
			t.Fatal("LeaseEnd reports a lease held after its end")
		}
		ack() // acks of heartbeats sent after the end
		h.stalled.Store(false)
		m.checkLease()
		if !m.LeaseHeld() {
			t.Fatal("no lease after new acks")
		}
		h.mu.Lock()
		got := strings.Join(h.events, "; ")
		h.mu.Unlock()
		if want := "lease regained; lease lost (evicted false); lease regained"; got != want {
			t.Fatalf("host was told %q, want %q", got, want)
		}
	})
}
