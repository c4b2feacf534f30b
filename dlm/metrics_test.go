package dlm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seed-a6839e30/dlm/modes"
)

// registries makes a registry for each of n nodes, and a config change
// that gives the nodes them in the order they start, then applies mut
// (if any).
func registries(n int, mut func(*Config)) ([]*prometheus.Registry, func(*Config)) {
	regs := make([]*prometheus.Registry, n)
	for i := range regs {
		regs[i] = prometheus.NewRegistry()
	}
	i := 0
	return regs, func(cfg *Config) {
		cfg.Registerer = regs[i]
		i++
		if mut != nil {
			mut(cfg)
		}
	}
}

// metricValue returns the value of the metric name with the given label
// values (in any order) from reg, or -1 if there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return -1
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func TestMetrics(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, func(cfg *Config) { cfg.MaxLocks = 2 })
		c := startMem(t, 3, mut)
		defer c.close()
		local := c.resourceOn(0, "met")
		remote := c.resourceOn(1, "met")
		a := mustLock(t, c.ls[0], local, modes.EX, OnBlocking(func(modes.Mode) {}))
		b := mustLock(t, c.ls[0], remote, modes.PR)
		if _, err := c.ls[1].TryLock(bg, local, modes.EX); !errors.Is(err, ErrNotQueued) {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { mustUnlock(t, mustLock(t, c.ls[2], local, modes.PR)); close(done) }()
		synctestWait()
		mustUnlock(t, a)
		<-done
		x := mustLock(t, c.ls[0], c.resourceOn(0, "x"), modes.NL)
		if _, err := c.ls[0].Lock(bg, "y", modes.NL); !errors.Is(err, ErrLimit) {
			t.Fatalf("over MaxLocks: %v", err)
		}
		r0 := regs[0]
		for _, want := range []struct {
			name   string
			labels map[string]string
			value  float64
		}{
			{"dlm_requests_total", map[string]string{"op": "lock", "mode": "EX", "result": "ok"}, 1},
			{"dlm_requests_total", map[string]string{"op": "lock", "mode": "PR", "result": "ok"}, 1},
			{"dlm_requests_total", map[string]string{"op": "lock", "mode": "NL", "result": "limit"}, 1},
			{"dlm_requests_total", map[string]string{"op": "unlock", "mode": "EX", "result": "ok"}, 1},
			{"dlm_lock_seconds", map[string]string{"mode": "EX", "master": "local"}, 1},
			{"dlm_lock_seconds", map[string]string{"mode": "PR", "master": "remote"}, 1},
			{"dlm_blocking_notifications_total", nil, 1},
			{"dlm_limit_rejections_total", map[string]string{"limit": "locks_per_node"}, 1},
			{"dlm_client_locks", nil, 2},
			{"dlm_mastered_resources", map[string]string{"lockspace": "test"}, 1}, // x (local was freed)
		} {
			if got := metricValue(t, r0, want.name, want.labels); got != want.value {
				t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
			}
		}
		if got := metricValue(t, regs[1], "dlm_requests_total", map[string]string{"op": "lock", "mode": "EX", "result": "not_queued"}); got != 1 {
			t.Errorf("node 2 not_queued = %v", got)
		}
		if got := metricValue(t, regs[1], "dlm_transport_messages_received_total", nil); got == -1 {
			t.Errorf("transport metrics missing from the node's registry")
		}
		mustUnlock(t, b)
		mustUnlock(t, x)
	})
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Name, good.Members = "a", []string{"a", "b"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no name":          func(c *Config) { c.Name = "" },
		"not a member":     func(c *Config) { c.Name = "z" },
		"no members":       func(c *Config) { c.Members = nil },
		"member twice":     func(c *Config) { c.Members = []string{"a", "a"} },
		"no cluster id":    func(c *Config) { c.ClusterID = "" },
		"no link address":  func(c *Config) { c.LinkAddr = "" },
		"bad gossip key":   func(c *Config) { c.GossipKey = []byte("short") },
		"shards not pow 2": func(c *Config) { c.Shards = 12 },
		"no tick":          func(c *Config) { c.TickInterval = 0 },
		"deadlock wait":    func(c *Config) { c.DeadlockWait = -time.Second },
		"bad drift":        func(c *Config) { c.ClockDrift = 0.7 },
		"probe timeout":    func(c *Config) { c.ProbeTimeout = 2 * c.ProbeInterval },
		"negative limit":   func(c *Config) { c.MaxLocks = -1 },
		"bad lockspace":    func(c *Config) { c.Lockspaces = map[string]LockspaceConfig{"x": {MaxNameLen: 0}} },
		"lockspace name":   func(c *Config) { c.Lockspaces = map[string]LockspaceConfig{"": DefaultLockspaceConfig()} },
		"big LVB":          func(c *Config) { c.DefaultLockspace.MaxLVB = 1 << 20 },
		"link advertise":   func(c *Config) { c.LinkAdvertiseAddr = "10.0.0.1" },
		"gossip advertise": func(c *Config) { c.GossipAdvertiseAddr = "host.example:7946" },
		"advertise port":   func(c *Config) { c.GossipAdvertiseAddr = "10.0.0.1:0" },
		"tag too long":     func(c *Config) { c.Tags = map[string]string{"admin": strings.Repeat("x", 200)} },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v", name, err)
		}
		if _, err := Start(bg, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Start = %v", name, err)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		ls := c.ls[0]
		for name, tc := range map[string]struct {
			err  error
			call func() error
		}{
			"bad mode":        {ErrInvalidMode, func() error { _, err := ls.Lock(bg, "r", 7); return err }},
			"empty name":      {ErrInvalidName, func() error { _, err := ls.Lock(bg, "", modes.EX); return err }},
			"long name":       {ErrInvalidName, func() error { _, err := ls.Lock(bg, string(make([]byte, 300)), modes.EX); return err }},
			"negative TTL":    {ErrInvalidArgument, func() error { _, err := ls.Lock(bg, "r", modes.EX, WithTTL(-1)); return err }},
			"expedite PR":     {ErrInvalidArgument, func() error { _, err := ls.Lock(bg, "r", modes.PR, Expedite()); return err }},
			"expedite try":    {ErrInvalidArgument, func() error { _, err := ls.TryLock(bg, "r", modes.NL, Expedite()); return err }},
			"quecvt on lock":  {ErrInvalidArgument, func() error { _, err := ls.Lock(bg, "r", modes.PR, QueueConvert()); return err }},
			"lockspace name":  {ErrInvalidName, func() error { _, err := c.nodes[0].Lockspace(""); return err }},
			"renew w/out TTL": {ErrInvalidArgument, func() error { lk := mustLock(t, ls, "q", modes.NL); defer lk.Unlock(); return lk.Renew(bg) }},
		} {
			if err := tc.call(); !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", name, err, tc.err)
			}
		}
		lk := mustLock(t, ls, "r", modes.EX)
		mustUnlock(t, lk)
		if err := lk.Unlock(); !errors.Is(err, ErrNotHeld) {
			t.Errorf("double unlock: %v", err)
		}
		if err := lk.Convert(bg, modes.NL); !errors.Is(err, ErrNotHeld) {
			t.Errorf("convert after unlock: %v", err)
		}
		if rs, ok := c.ls[0].masterState("r"); ok {
			t.Errorf("bad requests left state behind: %+v", rs)
		}
	})
}

// TestRecoveryMetrics: a node holding a lock others wait for is killed; the
// survivors count the recovery, its phases, the lock rebuilt (the waiter's)
// and the lock purged (the dead holder's, known from the old master's
// snapshot).
func TestRecoveryMetrics(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, nil)
		c := startMem(t, 3, mut)
		defer c.close()
		res := c.resourceOn(1, "recmet")
		mustLock(t, c.ls[2], res, modes.EX)
		// A lock on a resource the dying node masters: it moves, and its
		// new master rebuilds it from node 0's report.
		moved := mustLock(t, c.ls[0], c.resourceOn(2, "recmet-moved"), modes.PR)
		got := make(chan *Lock, 1)
		go func() { got <- mustLock(t, c.ls[0], res, modes.EX) }()
		c.settle(c.queued(res, 1))
		c.kill(2)
		lk := <-got
		sum := func(name string, labels map[string]string) float64 {
			total := 0.0
			for _, reg := range regs[:2] {
				if v := metricValue(t, reg, name, labels); v > 0 {
					total += v
				}
			}
			return total
		}
		if v := metricValue(t, regs[0], "dlm_epoch", nil); v < 2 {
			t.Errorf("dlm_epoch = %v, want at least 2", v)
		}
		if v := metricValue(t, regs[0], "dlm_quorum", nil); v != 1 {
			t.Errorf("dlm_quorum = %v, want 1", v)
		}
		if v := metricValue(t, regs[0], "dlm_recoveries_total", nil); v < 2 {
			t.Errorf("dlm_recoveries_total = %v, want at least 2", v)
		}
		if v := metricValue(t, regs[0], "dlm_recovery_phase_seconds", map[string]string{"phase": "rebuild"}); v < 2 {
			t.Errorf("rebuild phases observed = %v, want at least 2", v)
		}
		if v := sum("dlm_recovery_locks_rebuilt_total", nil); v < 1 {
			t.Errorf("locks rebuilt = %v, want the moved resource's lock", v)
		}
		if v := sum("dlm_recovery_locks_purged_total", nil); v != 1 {
			t.Errorf("locks purged = %v, want the dead holder's one", v)
		}
		mustUnlock(t, lk)
		mustUnlock(t, moved)
	})
}

// A node restarted in the same process with the same registry starts: every
// layer's metrics were unregistered when the first one stopped.
func TestRestartWithSameRegistry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		first := nodeNames(3)[0]
		c := startMem(t, 3, func(cfg *Config) {
			if cfg.Name == first {
				cfg.Registerer = reg
			}
		})
		defer c.close()
		c.kill(0)
		c.startNode(0)
		c.waitView(3, 30*time.Second)
		mustUnlock(t, mustLock(t, c.ls[0], c.resourceOn(1, "again"), modes.EX))
		for _, name := range []string{"dlm_requests_total", "dlm_transport_messages_sent_total", "dlm_membership_members", "dlm_epoch"} {
			if got := metricValue(t, reg, name, nil); got == -1 {
				t.Errorf("%s missing after the restart", name)
			}
		}
	})
}

// TestRemoteLockReadsItsGrant: over TCP, a Lock waiting for a remote
// master's grant reads the master's connection itself (transport's Await),
// once the reader goroutine has stepped aside for it.
func TestRemoteLockReadsItsGrant(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := true
	c := startTCP(t, 3, func(cfg *Config) {
		if first {
			cfg.Registerer, first = reg, false
		}
	})
	defer c.close()
	// Whether the caller or the link's reader reads a grant first is up
	// to the scheduler; on a loaded machine the reader wins some rounds.
	// A round of mostly lent reads shows the path works; none in five
	// rounds shows it does not.
	const locks, rounds = 100, 5
	var before float64
	for round := range rounds {
		for i := range locks {
			mustUnlock(t, mustLock(t, c.ls[0], c.resourceOn(1, fmt.Sprintf("lend%d-%d-", round, i)), modes.EX))
		}
		total := metricValue(t, reg, "dlm_transport_reads_lent_total", nil)
		lent := total - before
		before = total
		t.Logf("round %d: %v of %d remote locks read their grant", round, lent, locks)
		if lent >= locks/2 {
			return
		}
	}
	t.Fatalf("in none of %d rounds did most of %d remote locks read their own grant", rounds, locks)
}
