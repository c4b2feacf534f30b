package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestDescribe: a resource with a holder, a conversion and waiters,
// described from every node (its master answers, locally or by message):
// modes, nodes, owners, tokens and how long each request waited.
func TestDescribe(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "desc")
		owner := c.ls[0].NewOwner()
		r1 := mustLock(t, c.ls[0], res, modes.PR, WithOwner(owner), WithTTL(time.Minute))
		keep, kcancel := context.WithCancel(bg)
		defer kcancel()
		go func() { _ = r1.KeepAlive(keep) }()
		r2 := mustLock(t, c.ls[2], res, modes.PR)
		conv := make(chan error, 1)
		go func() { conv <- r2.Convert(bg, modes.EX) }()
		c.settle(c.queued(res, 1))
		time.Sleep(time.Second)
		got := make(chan *Lock, 1)
		go func() { got <- mustLock(t, c.ls[1], res, modes.CR) }()
		c.settle(c.queued(res, 2))
		time.Sleep(500 * time.Millisecond)

		for i := range 3 {
			info, err := c.ls[i].Describe(bg, res)
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != res || info.Lockspace != "test" || info.Master != c.nodes[1].Name() || info.Permits != 0 || info.Omitted != 0 ||
				!info.Value.Valid || info.Epoch == 0 {
				t.Fatalf("from %d: %+v", i, info)
			}
			if len(info.Granted) != 1 || len(info.Converting) != 1 || len(info.Waiting) != 1 {
				t.Fatalf("from %d: queues %+v", i, info)
			}
			g, cv, w := info.Granted[0], info.Converting[0], info.Waiting[0]
			if g.Node != c.nodes[0].Name() || g.Mode != modes.PR || g.Requested != modes.PR || g.Owner != owner.ID() ||
				g.Token != r1.Token() || g.Wait != 0 || g.ID != r1.ID() || g.TTL <= 0 || g.TTL > time.Minute {
				t.Errorf("granted: %+v", g)
			}
			if cv.Node != c.nodes[2].Name() || cv.Mode != modes.PR || cv.Requested != modes.EX || cv.Token != r2.Token() ||
				cv.Wait < 1500*time.Millisecond || cv.Wait > 2*time.Second {
				t.Errorf("converting: %+v", cv)
			}
			if w.Node != c.nodes[1].Name() || w.Mode != modes.NL || w.Requested != modes.CR || w.Token != 0 ||
				w.Wait < 500*time.Millisecond || w.Wait > time.Second {
				t.Errorf("waiting: %+v", w)
			}
		}
		kcancel()
		mustUnlock(t, r1)
		if err := <-conv; err != nil {
			t.Fatal(err)
		}
		mustUnlock(t, r2)
		mustUnlock(t, <-got)
		c.settle(c.free(res))

		info, err := c.ls[0].Describe(bg, res)
		if err != nil || len(info.Granted)+len(info.Converting)+len(info.Waiting) != 0 {
			t.Fatalf("a free resource: %+v %v", info, err)
		}
		if _, err := c.ls[0].Describe(bg, ""); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("Describe of no name: %v", err)
		}
		// A lockspace the master has never seen.
		other, err := c.nodes[0].Lockspace("never-used")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r := c.resourceOn(i, "nobody")
			if info, err := other.Describe(bg, r); err != nil || len(info.Granted) != 0 {
				t.Fatalf("a lockspace nobody used: %+v %v", info, err)
			}
		}
	})
}

// TestDescribeLongQueue: a resource with more locks than one reply
// carries: the first wire.Limits.MaxReport come back, in queue order, and
// the rest are counted.
func TestDescribeLongQueue(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) { cfg.MaxLocks = 0 })
		defer c.close()
		res := c.resourceOn(1, "long")
		const n = 4100
		var locks []*Lock
		for range n {
			locks = append(locks, mustLock(t, c.ls[1], res, modes.NL))
		}
		for _, i := range []int{0, 1} { // locally and from another node
			info, err := c.ls[i].Describe(bg, res)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Granted) != 4096 || info.Omitted != n-4096 {
				t.Fatalf("from %d: %d locks described, %d omitted", i, len(info.Granted), info.Omitted)
			}
		}
		for _, lk := range locks {
			mustUnlock(t, lk)
		}
	})
}
