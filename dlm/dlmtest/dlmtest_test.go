package dlmtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

func TestMain(m *testing.M) { dlmtest.VerifyTestMain(m) }

// exclusive takes EX on one resource from every node in turn and checks
// that a second holder waits until the first unlocks.
func exclusive(t *testing.T, c *dlmtest.Cluster) {
	t.Helper()
	lss, err := c.Lockspaces("app")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := lss[0].Lock(ctx, "r", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lss[len(lss)-1].TryLock(ctx, "r", modes.EX); !errors.Is(err, dlm.ErrNotQueued) {
		t.Fatalf("TryLock of a held EX lock from another node: %v, want ErrNotQueued", err)
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	for _, ls := range lss {
		lk, err := ls.Lock(ctx, "r", modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartMemnetInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := dlmtest.Start(t, 3)
		if got := len(c.Nodes()); got != 3 || c.Network() == nil {
			t.Fatalf("%d nodes, network %v", got, c.Network())
		}
		for _, nd := range c.Nodes() {
			if got := len(nd.Members()); got != 3 {
				t.Errorf("%s sees a view of %d members, want 3", nd.Name(), got)
			}
		}
		exclusive(t, c)
	})
}

// A crashed holder's lock goes to another node after failure detection and
// the lock-delay, on fake time.
func TestCrashOnMemnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := dlmtest.Start(t, 3)
		lss, err := c.Lockspaces("app")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		lk, err := lss[2].Lock(ctx, "r", modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		crashed := time.Now()
		c.Crash(2)
		select {
		case <-lk.Lost():
		default:
			t.Error("the crashed node's lock is not lost")
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lk2, err := lss[0].Lock(ctx, "r", modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(crashed); d < time.Second {
			t.Errorf("re-granted %v after the crash: before the lock-delay", d)
		}
		_ = lk2.Unlock()
	})
}

func TestStartTCP(t *testing.T) {
	c := dlmtest.Start(t, 3, dlmtest.TCP())
	if c.Network() != nil {
		t.Fatal("a TCP cluster has an in-process network")
	}
	for _, nd := range c.Nodes() {
		if !strings.HasPrefix(nd.GossipAddr(), "127.0.0.1:") {
			t.Errorf("%s gossips at %s, not on loopback", nd.Name(), nd.GossipAddr())
		}
	}
	exclusive(t, c)
}

func TestConfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := dlmtest.Start(t, 2, dlmtest.Configure(func(i int, cfg *dlm.Config) {
			cfg.DefaultLockspace.MaxNameLen = 8
		}))
		ls, err := c.Node(1).Lockspace("app")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ls.Lock(context.Background(), "longer-than-8", modes.EX); !errors.Is(err, dlm.ErrInvalidName) {
			t.Fatalf("a name over the configured limit: %v, want ErrInvalidName", err)
		}
	})
}

func TestNewRejectsBadInput(t *testing.T) {
	if _, err := dlmtest.New(context.Background(), 0); err == nil {
		t.Error("a 0-node cluster started")
	}
	// A configuration error is reported at once, not retried.
	_, err := dlmtest.New(context.Background(), 1, dlmtest.TCP(), dlmtest.Configure(func(_ int, cfg *dlm.Config) {
		cfg.Shards = 3
	}))
	if !errors.Is(err, dlm.ErrInvalidConfig) {
		t.Fatalf("bad Shards: %v, want ErrInvalidConfig", err)
	}
	if strings.Contains(err.Error(), "attempts") || strings.Count(err.Error(), "Shards") != 1 {
		t.Errorf("a configuration error was retried: %v", err)
	}
}

// A start that cannot finish in time reports why, and leaves no node
// running (VerifyTestMain checks the goroutines).
func TestStartTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two members that cannot reach each other: neither has a quorum.
		_, err := dlmtest.New(context.Background(), 2, dlmtest.StartTimeout(5*time.Second), dlmtest.Configure(func(_ int, cfg *dlm.Config) {
			cfg.Seeds = nil
			cfg.Members = []string{"node1", "node2", "node3"}
		}))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want a deadline error", err)
		}
	})
}
