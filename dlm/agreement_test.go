package dlm

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/chaos/check"
)

func TestFingerprintConflicts(t *testing.T) {
	cfg := DefaultConfig()
	base := fingerprint{version: 0, members: membersHash([]string{"a", "b", "c"}), settings: cfg.settingsHash()}
	if base.members != membersHash([]string{"c", "a", "b"}) {
		t.Error("the member hash depends on the order of the list")
	}
	other := cfg
	other.DefaultLockspace.MaxLVB++
	lease := cfg
	lease.Lease += time.Millisecond
	for _, tc := range []struct {
		name string
		f    fingerprint
		want bool
	}{
		{"same", base, false},
		{"other members", fingerprint{0, membersHash([]string{"a", "b"}), base.settings}, true},
		{"other members, newer version", fingerprint{1, membersHash([]string{"a", "b"}), base.settings}, false},
		{"other lockspace limits", fingerprint{0, base.members, other.settingsHash()}, true},
		{"other lease", fingerprint{0, base.members, lease.settingsHash()}, true},
	} {
		if got := base.conflicts(tc.f) != ""; got != tc.want {
			t.Errorf("%s: conflicts = %v, want %v", tc.name, got, tc.want)
		}
		back, ok := parseFingerprint(tc.f.tags())
		if !ok || back != tc.f {
			t.Errorf("%s: tags round trip: %v %v, want %v", tc.name, back, ok, tc.f)
		}
	}
	if _, ok := parseFingerprint(map[string]string{"admin": "x"}); ok {
		t.Error("parsed a fingerprint from tags without one")
	}
}

func TestConfigRefusesDLMTags(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.Members = "a", []string{"a"}
	cfg.Tags = map[string]string{"dlm.conf": "0-1"}
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "dlm.") {
		t.Fatalf("Validate = %v, want the reserved prefix refused", err)
	}
	cfg.Tags = map[string]string{"admin": strings.Repeat("x", 100)}
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want tags that leave no room for dlm's refused", err)
	}
	cfg.Tags = map[string]string{"admin": "http://127.0.0.1:7948"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// gauge reads a gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A node started with other lockspace limits is refused by the others,
// which form their view without it, and finds itself the odd one out: it
// never serves.
func TestMismatchedSettingsAreRefused(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMemOf(t, 3, 2, nil)
		defer c.close()
		reg := prometheus.NewRegistry()
		res := c.startOdd(2, func(cfg *Config) { cfg.DefaultLockspace.MaxLVB = 16; cfg.Registerer = reg }, testKnobs{})
		time.Sleep(10 * time.Second)
		if got := gauge(t, reg, "dlm_config_isolated"); got != 1 {
			t.Errorf("the odd node's dlm_config_isolated = %v, want 1", got)
		}
		for i := range 2 {
			if m := c.nodes[i].Members(); slices.Contains(m, "n3") {
				t.Errorf("%s's view %v counts the odd node", c.names[i], m)
			}
			if peers, iso := c.nodes[i].ConfigRefused(); peers["n3"] == "" || iso != "" {
				t.Errorf("%s: refused %v, isolated %q; want n3 refused, not isolated", c.names[i], peers, iso)
			}
		}
		if err := <-res; err == nil {
			t.Error("the odd node started serving")
		}
	})
}

// startOdd starts node i of c with its configuration changed by mut, in the
// background: the channel gets Start's error once its 20 s are up (nil if
// it served, and then c.nodes[i] is set).
func (c *cluster) startOdd(i int, mut func(*Config), knobs testKnobs) <-chan error {
	mn, err := c.net.AddNode(c.names[i])
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.ClusterID = c.names[i], "test"
	c.memConfig(&cfg, mn)
	mut(&cfg)
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		nd, err := start(ctx, cfg, knobs)
		if err == nil {
			ls, lerr := nd.Lockspace("test")
			if lerr != nil {
				panic(lerr)
			}
			c.nodes[i], c.ls[i] = nd, ls
		}
		out <- err
	}()
	return out
}

// runMismatch: three nodes n1..n3 configured as the cluster {n1..n4}, and
// n4 started with a member list of its own, {n4}, a quorum by itself, with
// clients on every node that serves. Without agreement n4 grants alone
// what the others grant too; with it, n4 is refused by the three and
// isolates itself.
func runMismatch(t *testing.T, seed uint64, knobs testKnobs) (check.Result, bool) {
	var res check.Result
	oddServed := false
	synctestRun(t, func(t *testing.T) {
		c := startMemWith(t, 4, 3, func(cfg *Config) { cfg.MaxLocks = 0 }, knobs)
		n := &nemesis{
			t: t, c: c, h: check.NewHistory(time.Now), rng: rand.New(rand.NewPCG(seed, 0x6e656d65)),
			store: &fencedStore{highest: map[string]uint64{}}, resources: []string{"hot-a", "hot-b", "hot-c"},
			dead: map[int]bool{3: true}, pause: map[int]bool{}, progress: map[int]time.Time{}, stop: make(chan struct{}),
			clients: map[int][]int{}, caches: map[*Lockspace]*Cache{},
		}
		for node := range 3 {
			for k := range 2 {
				n.startClient(node*2+k, node, seed)
			}
		}
		started := c.startOdd(3, func(cfg *Config) { cfg.Members = []string{"n4"} }, knobs)
		if err := <-started; err == nil {
			oddServed = true
			n.mu.Lock()
			n.dead[3] = false
			n.mu.Unlock()
			for k := range 2 {
				n.startClient(6+k, 3, seed)
			}
			time.Sleep(8 * time.Second)
		} else {
			for i := range 3 {
				if slices.Contains(c.nodes[i].Members(), "n4") {
					t.Errorf("%s's view counts n4: %v", c.names[i], c.nodes[i].Members())
				}
			}
		}
		close(n.stop)
		n.wg.Wait()
		res = check.Check(n.h, check.Options{MaxSteps: 2_000_000})
		c.close()
	})
	return res, oddServed
}

func TestMismatchedMembersOddOneOutRefused(t *testing.T) {
	for s := range min(nemesisSeeds(), 2) {
		seed := nemesisFirstSeed() + uint64(s)
		res, served := runMismatch(t, seed, testKnobs{})
		if served {
			t.Errorf("seed %d: the node with its own member list served", seed)
		}
		if !res.OK || res.Stats.Grants == 0 {
			t.Errorf("seed %d: %v", seed, res)
		}
	}
}

// The control: without agreement, the same start is caught by the checker.
func TestControlWithoutAgreementIsCaught(t *testing.T) {
	caught := 0
	seeds := min(nemesisSeeds(), 2)
	for s := range seeds {
		seed := nemesisFirstSeed() + uint64(s)
		res, _ := runMismatch(t, seed, testKnobs{noAgreement: true})
		if len(res.Violations) > 0 {
			caught++
			t.Logf("seed %d: caught: %v", seed, res.Violations[0])
		}
	}
	if caught == 0 {
		t.Fatal("no run without agreement was reported unsafe: the test cannot fail")
	}
}
