package dlm

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// The nemesis scenarios of a counting semaphore: clients on every node take
// one or two permits of a semaphore of three, hold them a while and give
// them back, while the nemesis kills or cuts off a node that holds
// permits. chaos/check then looks at the history: never more permits
// believed held than there are (CheckPermits, and SemaphoreModel with the
// unknown outcomes), tokens always increasing; and every surviving client
// must acquire again after the heal.

const (
	semaphoreNemesisName    = "pool"
	semaphoreNemesisPermits = 3
)

// semaphoreNemesis runs a third of the lock scenarios' seeds (four in CI):
// one resource, whose history is quicker to explore than three.
func semaphoreNemesis() nemesisOpts {
	o := defaultNemesis()
	o.permits = semaphoreNemesisPermits
	o.seeds = max(1, nemesisSeeds()/3)
	return o
}

// permitCycle is one client's round: acquire, hold, maybe freeze (a
// paused process), release.
func (n *nemesis) permitCycle(id int, name string, node int, ls *Lockspace, rng *rand.Rand, watch chan<- watched) {
	k := 1 + rng.IntN(2)
	s, err := ls.Semaphore(semaphoreNemesisName, n.permits)
	if err != nil {
		n.t.Error(err)
		return
	}
	op := n.h.AcquirePermits(id, name, semaphoreNemesisName, k, n.permits)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	p, err := s.Acquire(ctx, k)
	cancel()
	if err != nil {
		if n.isDead(node) {
			op.Unknown()
			return
		}
		op.Failed(err)
		time.Sleep(time.Duration(rng.IntN(50)+10) * time.Millisecond)
		return
	}
	op.GrantedPermits(p.Token())
	n.mu.Lock()
	n.progress[id] = time.Now()
	n.mu.Unlock()
	released := make(chan struct{})
	watch <- watched{p.Lost(), semaphoreNemesisName, released}
	time.Sleep(time.Duration(rng.IntN(40)+1) * time.Millisecond)
	if n.takePause(id) {
		time.Sleep(4 * time.Second) // frozen past its lease, still believing
	}
	rop := n.h.Release(id, name, semaphoreNemesisName)
	if err := p.Release(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoQuorum) {
		rop.Failed(err)
	} else {
		rop.Released()
	}
	close(released)
}

// permitHolderNode returns the index of a node that holds permits now, as
// the semaphore's master describes it; -1 if none.
func (n *nemesis) permitHolderNode() int {
	for i := range n.c.nodes {
		if n.node(i) == nil || n.isDead(i) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := n.c.ls[i].Describe(ctx, semaphoreNemesisName)
		cancel()
		if err != nil {
			continue
		}
		for _, g := range info.Granted {
			for j, name := range n.c.names {
				if name == g.Node {
					return j
				}
			}
		}
		return -1
	}
	return -1
}

// TestNemesisSemaphoreKillHolder: a node holding permits dies; its permits
// come back only after the lock-delay, and the others go on.
func TestNemesisSemaphoreKillHolder(t *testing.T) {
	nemesisTest(t, semaphoreNemesis(), func(n *nemesis, seed uint64) {
		i := n.holderNode()
		if i < 0 {
			i = int(seed % 5)
		}
		n.kill(i)
	})
}

// TestNemesisSemaphoreKillMaster: the semaphore's master dies; the new
// master rebuilds it from what the survivors hold and wait for.
func TestNemesisSemaphoreKillMaster(t *testing.T) {
	nemesisTest(t, semaphoreNemesis(), func(n *nemesis, seed uint64) {
		name := n.c.ls[0].MasterOf(semaphoreNemesisName)
		for i, nm := range n.c.names {
			if nm == name {
				n.kill(i)
			}
		}
	})
}

// TestNemesisSemaphorePauseHolder: a holder is frozen and cut off past its
// lease; its node tells it the permits are lost before anyone else gets
// them.
func TestNemesisSemaphorePauseHolder(t *testing.T) {
	nemesisTest(t, semaphoreNemesis(), func(n *nemesis, seed uint64) { n.pauseHolder(seed) })
}

// TestControlSemaphoreWithoutLockDelayIsCaught: with the lock-delay off, a
// cut-off holder's permits go to others while it still believes it holds
// them, and the permit checks must say so in some seed.
func TestControlSemaphoreWithoutLockDelayIsCaught(t *testing.T) { controlTest(t, semaphoreNemesis()) }
