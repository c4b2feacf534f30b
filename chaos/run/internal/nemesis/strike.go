package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
)

// Cluster is what the nemeses act on: the agents (by index) and their
// network.
type Cluster interface {
	Size() int
	Name(i int) string
	Up(i int) bool
	// Kill sends SIGKILL and waits until the agent is gone; Start starts
	// it again under the same name (a new boot) and waits until it serves
	// or a bound passes.
	Kill(i int) error
	Start(i int) error
	// Stop and Cont send SIGSTOP and SIGCONT, confirmed.
	Stop(i int) error
	Cont(i int) error
	// Network reports whether Apply works (netlab, as root).
	Network() bool
	Apply(f netlab.Faults) error
}

// Targets are what the workload knows about who holds and masters what.
type Targets interface {
	// Holder picks a client that holds an EX lock now: its agent and the
	// resource.
	Holder(rng *rand.Rand) (node int, resource string, ok bool)
	// Master picks a hot resource and the agent that masters it.
	Master(rng *rand.Rand) (node int, resource string, ok bool)
	// Freeze makes the holding client of resource on node stop for d as
	// if its process were paused, then write once more with the token it
	// held, without looking whether the lock was lost: the late write of
	// a paused holder, which the fenced register must refuse.
	Freeze(node int, resource string, d time.Duration)
}

// Recorder is told what the nemeses do, for the history and the report.
type Recorder interface {
	// Fault marks a fault struck now and returns its time.
	Fault(kind Kind, node int, resource, text string) time.Duration
	// Crash tells the history that node's agent died: calls in flight on
	// it are of unknown outcome from now on.
	Crash(node int)
	// Healed marks the end of a fault and returns its time.
	Healed(kind Kind, text string) time.Duration
	// Changed says the agents' state or the network changed (for the
	// windows in which a majority is up and connected).
	Changed(up []bool, f netlab.Faults)
}

// Event is one fault as it happened.
type Event struct {
	Kind     Kind          `json:"kind"`
	Text     string        `json:"text"`
	Nodes    []string      `json:"nodes,omitempty"`
	Resource string        `json:"resource,omitempty"`
	At       time.Duration `json:"at_ns"` // in the history's time
	Healed   time.Duration `json:"healed_ns"`
	Err      string        `json:"err,omitempty"`
}

// Strike runs one step: strike the fault, hold it, heal it. It returns when
// the fault is healed (also when ctx ends: healing is never skipped).
func Strike(ctx context.Context, s Step, c Cluster, tg Targets, rec Recorder) Event {
	rng := rand.New(rand.NewPCG(s.Seed, uint64(len(s.Kind))))
	n := c.Size()
	ev := Event{Kind: s.Kind}
	up := func() []bool {
		u := make([]bool, n)
		for i := range u {
			u[i] = c.Up(i)
		}
		return u
	}
	hold := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	var errs []error
	mark := func(node int, resource string, nodes []int, text string) {
		ev.Resource = resource
		for _, i := range nodes {
			ev.Nodes = append(ev.Nodes, c.Name(i))
		}
		ev.Text = text
		ev.At = rec.Fault(s.Kind, node, resource, text)
	}
	kill := func(nodes []int) {
		for _, i := range nodes {
			rec.Crash(i)
			if err := c.Kill(i); err != nil {
				errs = append(errs, err)
			}
		}
		rec.Changed(up(), netlab.Faults{})
	}
	restart := func(nodes []int) {
		for _, i := range nodes {
			if err := c.Start(i); err != nil {
				errs = append(errs, err)
			}
		}
		rec.Changed(up(), netlab.Faults{})
	}
	alive := func() []int {
		var out []int
		for i := range n {
			if c.Up(i) {
				out = append(out, i)
			}
		}
		return out
	}
	pick := func() int { a := alive(); return a[rng.IntN(len(a))] }
	net := func(f netlab.Faults, text string) {
		mark(-1, "", nil, text+": "+f.String())
		if err := c.Apply(f); err != nil {
			errs = append(errs, err)
		}
		rec.Changed(up(), f)
		hold(s.Hold)
		if err := c.Apply(netlab.Faults{}); err != nil {
			errs = append(errs, err)
		}
		rec.Changed(up(), netlab.Faults{})
	}
	if len(alive()) < n {
		ev.Err = "skipped: not every agent is up"
		return ev
	}
	if s.Kind.Network() && !c.Network() {
		ev.Err = "skipped: needs the network namespaces (root)"
		return ev
	}
	switch s.Kind {
	case KillHolder, KillMaster, KillRandom, Restart:
		node, res, ok := -1, "", false
		switch s.Kind {
		case KillHolder:
			node, res, ok = tg.Holder(rng)
		case KillMaster:
			node, res, ok = tg.Master(rng)
		}
		if !ok {
			node = pick()
		}
		text := fmt.Sprintf("%s %s", s.Kind, c.Name(node))
		if res != "" {
			text += " (" + res + ")"
		}
		mark(node, res, []int{node}, fmt.Sprintf("%s, down %v", text, s.Hold.Round(time.Millisecond)))
		kill([]int{node})
		hold(s.Hold)
		restart([]int{node})
	case PauseHolder:
		node, res, ok := tg.Holder(rng)
		if !ok {
			node = pick()
		}
		mark(node, res, []int{node}, fmt.Sprintf("pause %s for %v", c.Name(node), s.Hold.Round(time.Millisecond)))
		if err := c.Stop(node); err != nil {
			errs = append(errs, err)
		}
		if ok {
			tg.Freeze(node, res, s.Hold)
		}
		hold(s.Hold)
		if err := c.Cont(node); err != nil {
			errs = append(errs, err)
		}
	case QuorumLoss:
		order := rng.Perm(n)
		victims := order[:n/2+1]
		slices.Sort(victims)
		mark(-1, "", victims, fmt.Sprintf("quorum loss: kill %s for %v", names(c, victims), s.Hold.Round(time.Millisecond)))
		kill(victims)
		hold(s.Hold)
		restart(victims)
	case PartMinority:
		k := 1 + rng.IntN(max(1, (n-1)/2))
		minority := rng.Perm(n)[:k]
		slices.Sort(minority)
		net(netlab.Isolate(n, minority), "isolate "+names(c, minority))
	case PartRing:
		net(netlab.Ring(rng.Perm(n)), "majorities ring")
	case PartOneWay:
		deaf := rng.IntN(n)
		net(netlab.OneWay(others(n, deaf), []int{deaf}), c.Name(deaf)+" hears nobody")
	case PartBridge:
		order := rng.Perm(n)
		bridge := order[0]
		left, right := order[1:1+(n-1)/2], order[1+(n-1)/2:]
		net(netlab.Bridge(left, right), fmt.Sprintf("bridge %s between %s and %s", c.Name(bridge), names(c, left), names(c, right)))
	case Loss:
		k := 1 + rng.IntN(n)
		nodes := rng.Perm(n)[:k]
		slices.Sort(nodes)
		net(netlab.Lossy(nodes, 20+rng.IntN(21)), "packet loss")
	case Delay:
		k := 1 + rng.IntN(n)
		nodes := rng.Perm(n)[:k]
		slices.Sort(nodes)
		net(netlab.Slow(nodes, time.Duration(50+rng.IntN(201))*time.Millisecond), "delay")
	default:
		errs = append(errs, fmt.Errorf("unknown nemesis %q", s.Kind))
	}
	ev.Healed = rec.Healed(s.Kind, ev.Text)
	if err := errors.Join(errs...); err != nil {
		ev.Err = err.Error()
	}
	return ev
}

func names(c Cluster, nodes []int) string {
	var s []string
	for _, i := range nodes {
		s = append(s, c.Name(i))
	}
	return strings.Join(s, ",")
}

func others(n, except int) []int {
	var out []int
	for i := range n {
		if i != except {
			out = append(out, i)
		}
	}
	return out
}
