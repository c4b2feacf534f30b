package recovery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// growWithStaleAck serves a, b, c; cuts short (b, or a, the coordinator)
// off from c for longer than the lease, so that it holds its lease on the
// third node's acknowledgements alone (two of three); heals the link just
// after one of its heartbeats to c; and has a grow the cluster to a, b, c,
// d at once, before short's next heartbeat. d is not up, so the joint
// step needs three of four: a, b and c, each holding a lease under it.
// With heal false the link stays cut. It returns the
// cluster, the configuration the change ended with and how long the
// change took.
func growWithStaleAck(t *testing.T, short string, heal bool) (*testCluster, Configuration, time.Duration) {
	t.Helper()
	names := []string{"a", "b", "c"}
	beat := make(chan struct{}, 1)
	net := newFakeNet()
	net.onSend = func(from, to string, m wire.Message) {
		if _, ok := m.(*wire.Heartbeat); ok && from == short && to == "c" {
			select {
			case beat <- struct{}{}:
			default:
			}
		}
	}
	c := startTestCluster(t, net, names, names, nil)
	for _, m := range c.ms {
		<-m.Served()
	}
	net.mu.Lock()
	net.cut[[2]string{short, "c"}] = true
	net.mu.Unlock()
	time.Sleep(2 * c.ms[short].cfg.Lease)
	if !c.ms[short].LeaseHeld() {
		t.Fatalf("%s, acknowledged by one peer, holds no lease", short)
	}
	for len(beat) > 0 {
		<-beat
	}
	<-beat
	if heal {
		net.mu.Lock()
		delete(net.cut, [2]string{short, "c"})
		net.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	conf, err := c.ms["a"].ChangeMembers(ctx, []string{"a", "b", "c", "d"})
	if err != nil {
		t.Fatal(err)
	}
	return c, conf, time.Since(start)
}

// A node whose lease holds under the old configuration but not yet under
// the joint one (an acknowledgement it needs for the larger quorum is
// stale) does not promise the joint view until a heartbeat round renewed
// it, and a coordinator in that state proposes it only then: the cluster
// grows and no lease is lost, so no lock held across the change is
// reported lost.
func TestGrowingKeepsTheLease(t *testing.T) {
	for _, short := range []string{"b", "a"} {
		t.Run(short, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, conf, took := growWithStaleAck(t, short, true)
				defer c.close()
				if want := []string{"a", "b", "c", "d"}; conf.Joint() || !slices.Equal(conf.Members, want) {
					t.Fatalf("the change ended with %v, want %v", conf, want)
				}
				for _, name := range c.names {
					h := c.hosts[name]
					h.mu.Lock()
					events := slices.Clone(h.events)
					h.mu.Unlock()
					for _, e := range events {
						if strings.HasPrefix(e, "lease lost") {
							t.Errorf("%s: %q while the cluster grew: %v", name, e, events)
						}
					}
				}
				m := c.ms[short]
				m.mu.Lock()
				waited := m.change.renew.version
				m.mu.Unlock()
				if waited != 1 {
					t.Errorf("%s waited to renew its lease under v%d, want v1 (the joint step)", short, waited)
				}
				if lease := m.cfg.Lease; took >= lease {
					t.Errorf("the change took %v, a lease (%v) or more: %s did not renew at once", took, lease, short)
				}
			})
		})
	}
}

// The wait is bounded: b, still cut off from c, cannot renew its lease
// under the joint configuration; it promises one Lease after it first
// refused, and the change completes (b's lease lost meanwhile, as it must
// be: c does not acknowledge it).
func TestGrowingWaitsForTheLeaseAtMostALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, conf, took := growWithStaleAck(t, "b", false)
		defer c.close()
		if conf.Joint() || len(conf.Members) != 4 {
			t.Fatalf("the change ended with %v", conf)
		}
		b := c.ms["b"]
		b.mu.Lock()
		w := b.change.renew
		b.mu.Unlock()
		if w.version != 1 {
			t.Fatalf("b waited to renew its lease under v%d, want v1", w.version)
		}
		if v := b.Configuration().Version; v != 2 {
			t.Fatalf("b runs v%d, want v2", v)
		}
		if lease := b.cfg.Lease; took < lease || took > 2*lease {
			t.Errorf("the change took %v, want between one lease (%v) and two", took, lease)
		}
	})
}
