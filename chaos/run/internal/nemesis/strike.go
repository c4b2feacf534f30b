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

// Cluster is what the nemeses act on: processes by index, the agents
// first (0..Size()-1), then the worker processes that run the clients,
// and the network between them.
type Cluster interface {
	// Size is the number of agents; Procs the number of processes.
	Size() int
	Procs() int
	Name(i int) string
	Up(i int) bool
	// Kill sends SIGKILL and waits until the process is gone; Start
	// starts it again under the same name (a new boot) and waits until it
	// serves or a bound passes.
	Kill(i int) error
	Start(i int) error
	// Stop and Cont send SIGSTOP and SIGCONT, confirmed.
	Stop(i int) error
	Cont(i int) error
	// Voters is the number of members of the cluster (agents, members
	// in worker processes, members in the harness); Quorum how many of
	// them make a quorum.
	Voters() int
	Quorum() int
	// Network reports whether Apply works (netlab, as root); NetSize is
	// the number of nodes on the network (the agents, and the workers
	// if they are members).
	Network() bool
	NetSize() int
	Apply(f netlab.Faults) error
}

// Holder is a client that holds an EX lock now, and where it is.
type Holder struct {
	Client   int
	Resource string
	// Worker is the process the client runs in; Node is the process
	// whose cluster member holds the lock for it: the worker itself if
	// it is a member, else the agent it connects to. Node is also its
	// index on the network.
	Worker, Node int
}

// Targets are what the workload knows about who holds and masters what.
type Targets interface {
	// Holder picks a client that holds an EX lock now.
	Holder(rng *rand.Rand) (Holder, bool)
	// Master picks a hot resource and the agent that masters it.
	Master(rng *rand.Rand) (node int, resource string, ok bool)
	// Arm stops the holder at the point of writing under its token, to
	// write once its process was frozen and woken, without looking
	// whether the lock was lost: the late write of a paused holder,
	// which the fenced register must refuse. It reports whether the
	// holder got there (it may have let go already).
	Arm(h Holder) bool
	// Pin keeps the holder holding its lock for at least d more, unless
	// it loses it: a holder still at work while its node is cut off,
	// whose lock another client must not get while it trusts it.
	Pin(h Holder, d time.Duration) bool
	// Witness has a client that no nemesis reaches ask for resource in
	// EX, now, write the register under its token once granted, and let
	// go: the grant that shows when the struck holder's lock could be had
	// elsewhere. The channel closes when the witness is done.
	Witness(resource string) <-chan struct{}
}

// witnessLead is how long a witness's request has to reach the
// resource's master before the nemesis strikes; holderWait how long a
// nemesis aimed at a holder waits for one; pinPastHeal how long after a
// partition's heal its holder still holds.
const (
	witnessLead = 50 * time.Millisecond
	holderWait  = 3 * time.Second
	pinPastHeal = 500 * time.Millisecond
)

// Recorder is told what the nemeses do, for the history and the report.
type Recorder interface {
	// Fault marks a fault struck now and returns its time.
	Fault(kind Kind, node int, resource, text string) time.Duration
	// Crash tells the history that process died: calls in flight on it
	// are of unknown outcome from now on, and its clients' beliefs end.
	// Freeze tells it the process was frozen: for the checks the same as
	// a crash, until it wakes and acts again.
	Crash(proc int)
	Freeze(proc int)
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
		u := make([]bool, c.Procs())
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
	// A process's crash is recorded once it is gone: what it recorded
	// itself is all before that.
	kill := func(nodes []int) {
		for _, i := range nodes {
			if err := c.Kill(i); err != nil {
				errs = append(errs, err)
			}
			rec.Crash(i)
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
	// holder waits a little for a long holder: they let go and take
	// their lock again all the time.
	holder := func() (Holder, bool) {
		deadline := time.Now().Add(holderWait)
		for {
			h, ok := tg.Holder(rng)
			if ok || time.Now().After(deadline) || ctx.Err() != nil {
				return h, ok
			}
			hold(20 * time.Millisecond)
		}
	}
	net := func(f netlab.Faults, text string) {
		mark(-1, "", nil, text+": "+f.Describe(c.Name))
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
	for i := range c.Procs() {
		if !c.Up(i) {
			ev.Err = "skipped: not every process is up"
			return ev
		}
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
			var h Holder
			if h, ok = holder(); ok {
				node, res = h.Node, h.Resource
			}
		case KillMaster:
			node, res, ok = tg.Master(rng)
		}
		if !ok {
			node = pick()
		}
		if ok && s.Kind == KillHolder {
			tg.Witness(res)
			hold(witnessLead)
		}
		text := fmt.Sprintf("%s %s", s.Kind, c.Name(node))
		switch {
		case res != "":
			text += " (" + res + ")"
		case s.Kind == KillHolder || s.Kind == KillMaster:
			text += " (no target found: a random agent)"
		}
		mark(node, res, []int{node}, fmt.Sprintf("%s, down %v", text, s.Hold.Round(time.Millisecond)))
		kill([]int{node})
		hold(s.Hold)
		restart([]int{node})
	case PauseHolder:
		h, ok := holder()
		node, res := pick(), ""
		armed := false
		var witnessed <-chan struct{}
		if ok {
			node, res = h.Worker, h.Resource
			armed = tg.Arm(h)
			witnessed = tg.Witness(res)
			hold(witnessLead)
		}
		what := "pause"
		if armed {
			what = fmt.Sprintf("pause (holder of %s stopped at its write)", res)
		}
		mark(node, res, []int{node}, fmt.Sprintf("%s %s for %v", what, c.Name(node), s.Hold.Round(time.Millisecond)))
		if err := c.Stop(node); err != nil {
			errs = append(errs, err)
		} else {
			rec.Freeze(node)
		}
		hold(s.Hold)
		if armed {
			// The late write shows the fencing only once another
			// client wrote under a newer token: when the cluster is
			// slow to give the lock away (still recovering from the
			// fault before), the freeze lasts until the witness wrote,
			// at most another s.Hold.
			start := time.Now()
			select {
			case <-witnessed:
			case <-ctx.Done():
			case <-time.After(s.Hold):
			}
			if longer := time.Since(start); longer >= time.Millisecond {
				ev.Text += fmt.Sprintf(", %v more until the witness wrote", longer.Round(time.Millisecond))
			}
		}
		if err := c.Cont(node); err != nil {
			errs = append(errs, err)
		}
	case PartHolder:
		h, ok := holder()
		node, res := pick(), ""
		if ok {
			node, res = h.Node, h.Resource
			// Held through the cut and a little past the heal: a
			// holder that let go on its own while cut off would
			// leave no overlap to see, whatever the cluster did.
			tg.Pin(h, s.Hold+pinPastHeal)
			tg.Witness(res)
			hold(witnessLead)
		}
		net(netlab.IsolateAll(c.NetSize(), []int{node}), fmt.Sprintf("isolate %s, holding %s", c.Name(node), res))
		ev.Resource, ev.Nodes = res, []string{c.Name(node)}
	case QuorumLoss:
		k := min(n, c.Voters()-c.Quorum()+1)
		order := rng.Perm(n)
		victims := order[:k]
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
