package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
	"github.com/seed-a6839e30/dlm/dlm"
)

// cluster is what the nemeses strike: the agents (process indexes
// 0..agents-1), then the workers, and the lab's network. Its members are
// the agents, the workers and the harness's own members.
type cluster struct {
	a *agents
	w *workers
	// voters counts every member; quorum is a majority of them.
	voters int
	// oracle is a lockspace of a member in the harness, which knows the
	// view and so the master of every resource.
	oracle *dlm.Lockspace
	// hot are the resources kill-master aims at.
	hot []string
	// witness asks for a resource from a client in the harness.
	witness func(resource string) <-chan struct{}
}

var (
	_ nemesis.Cluster = (*cluster)(nil)
	_ nemesis.Targets = (*cluster)(nil)
)

func (c *cluster) Size() int  { return len(c.a.procs) }
func (c *cluster) Procs() int { return len(c.a.procs) + len(c.w.procs) }

func (c *cluster) Name(i int) string {
	if i < c.Size() {
		return c.a.names[i]
	}
	return c.w.procs[i-c.Size()].name
}

func (c *cluster) proc(i int) *proc.Proc {
	if i < c.Size() {
		return c.a.procs[i]
	}
	return c.w.procs[i-c.Size()].proc
}

func (c *cluster) Up(i int) bool    { return c.proc(i).State() != proc.Exited }
func (c *cluster) Stop(i int) error { return c.proc(i).Stop() }
func (c *cluster) Cont(i int) error { return c.proc(i).Cont() }

func (c *cluster) Kill(i int) error {
	if i < c.Size() {
		return c.a.procs[i].Kill()
	}
	return c.w.kill(i - c.Size())
}

func (c *cluster) Start(i int) error {
	if i < c.Size() {
		return c.a.start(i)
	}
	return c.w.start(i - c.Size())
}

func (c *cluster) Voters() int   { return c.voters }
func (c *cluster) Quorum() int   { return c.voters/2 + 1 }
func (c *cluster) Network() bool { return c.a.lab != nil }

// NetSize: the workers are on the network after the agents (they are
// members, each in its own namespace).
func (c *cluster) NetSize() int { return c.Procs() }

func (c *cluster) Apply(f netlab.Faults) error {
	if c.a.lab == nil {
		return errors.New("no network namespaces")
	}
	return c.a.lab.Apply(f)
}

// Holder picks a long holder; its node is its worker, if that is a
// member, or the agent its session is with.
func (c *cluster) Holder(rng *rand.Rand) (nemesis.Holder, bool) {
	return c.w.pick(rng)
}

func (c *cluster) Arm(h nemesis.Holder) bool { return c.w.arm(h) }

func (c *cluster) Pin(h nemesis.Holder, d time.Duration) bool { return c.w.pin(h, d) }

func (c *cluster) Witness(resource string) <-chan struct{} { return c.witness(resource) }

// Master picks a hot resource mastered by an agent.
func (c *cluster) Master(rng *rand.Rand) (int, string, bool) {
	if c.oracle == nil {
		return -1, "", false
	}
	hot := append([]string(nil), c.hot...)
	rng.Shuffle(len(hot), func(i, j int) { hot[i], hot[j] = hot[j], hot[i] })
	for _, res := range hot {
		m := c.oracle.MasterOf(res)
		for i, name := range c.a.names {
			if name == m {
				return i, res, true
			}
		}
	}
	return -1, "", false
}

// restartDown starts every process that is down (a restart the nemesis
// could not finish, a process that exited by itself), so that the next
// fault strikes a whole cluster. It returns the processes that had exited
// on their own, which is a bug: nothing in a run ends one but the
// harness.
func (c *cluster) restartDown() (died []string, err error) {
	var errs []error
	for i := range c.Procs() {
		if c.Up(i) {
			continue
		}
		p := c.proc(i)
		if exit, killed := p.ExitErr(); !killed {
			died = append(died, fmt.Sprintf("%s exited by itself (%v); see %s", c.Name(i), exit, p.Spec().Log))
		}
		if err := c.Start(i); err != nil {
			errs = append(errs, fmt.Errorf("restarting %s: %w", c.Name(i), err))
		}
	}
	return died, errors.Join(errs...)
}
