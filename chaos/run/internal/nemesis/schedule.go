// Package nemesis is what a chaos run does to the cluster: the faults
// (Kinds), and the schedule that strikes them one after another, drawn
// from the run's seed.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind names a nemesis.
type Kind string

// The nemeses. The process ones run anywhere; the network ones need the
// namespaces of netlab (root).
const (
	KillHolder   Kind = "kill-holder"  // SIGKILL the agent of a client holding an EX lock; restart it after 0-2 s
	KillMaster   Kind = "kill-master"  // SIGKILL the master of a hot resource; restart after 0-2 s
	KillRandom   Kind = "kill-random"  // SIGKILL a random agent; restart after 0-2 s
	Restart      Kind = "restart"      // SIGKILL an agent and start it again at once: a new boot under the same name
	PauseHolder  Kind = "pause-holder" // SIGSTOP a holder's process, stopped at its write, for 2-3 leases (until the witness wrote, at most twice that); then SIGCONT
	QuorumLoss   Kind = "quorum-loss"  // SIGKILL a majority, then restart it
	PartMinority Kind = "partition-minority"
	PartRing     Kind = "partition-ring"   // each node hears only its two ring neighbours
	PartOneWay   Kind = "partition-oneway" // one node hears nobody while everyone hears it
	PartBridge   Kind = "partition-bridge" // two sides that only a bridge node connects
	PartHolder   Kind = "partition-holder" // cut off the member that holds a long holder's lock, from every node and the harness, while the holder writes on
	Loss         Kind = "loss"             // 20-40 % packet loss between nodes
	Delay        Kind = "delay"            // 50-250 ms delay on some nodes' packets
)

// ProcessKinds need only processes; NetworkKinds need netlab.
var (
	ProcessKinds = []Kind{KillHolder, KillMaster, KillRandom, Restart, PauseHolder, QuorumLoss}
	NetworkKinds = []Kind{PartMinority, PartRing, PartOneWay, PartBridge, PartHolder, Loss, Delay}
)

// All returns every kind, process ones first.
func All() []Kind { return append(slices.Clone(ProcessKinds), NetworkKinds...) }

// Network reports whether k needs the namespaces.
func (k Kind) Network() bool { return slices.Contains(NetworkKinds, k) }

// ParseKinds parses a comma-separated list of kinds; "all", "process" and
// "network" stand for those sets.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	add := func(ks ...Kind) {
		for _, k := range ks {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "":
		case "all":
			add(All()...)
		case "process":
			add(ProcessKinds...)
		case "network":
			add(NetworkKinds...)
		default:
			if !slices.Contains(All(), Kind(f)) {
				return nil, fmt.Errorf("unknown nemesis %q (want all, process, network, or some of %s)", f, kindList())
			}
			add(Kind(f))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nemesis named (want all, process, network, or some of %s)", kindList())
	}
	return out, nil
}

func kindList() string {
	var s []string
	for _, k := range All() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Step is one fault of a schedule.
type Step struct {
	Kind Kind
	// Hold is how long the fault lasts before it is healed (for a kill,
	// how long the agent stays down).
	Hold time.Duration
	// Quiet is how long the cluster is left alone after the heal.
	Quiet time.Duration
	// Seed draws the step's targets when it strikes.
	Seed uint64
}

// Timing is what the schedule's durations are made from.
type Timing struct {
	// Lease is the agents' quorum lease: a pause lasts 2-3 leases.
	Lease time.Duration
	// Quiet is the range of the pause after each heal.
	QuietMin, QuietMax time.Duration
	// Partition is the range of a partition's, loss's or delay's length.
	PartitionMin, PartitionMax time.Duration
}

// DefaultTiming fits the agents' default timing (1.5 s lease): faults
// every 5-15 s, so a run of an hour strikes several hundred of them.
func DefaultTiming() Timing {
	return Timing{Lease: 1500 * time.Millisecond, QuietMin: 2 * time.Second, QuietMax: 4 * time.Second,
		PartitionMin: 4 * time.Second, PartitionMax: 10 * time.Second}
}

// Schedule returns the steps of a run: rounds in which every kind strikes
// once, in an order shuffled by the seed, until the steps' total reaches
// total and at least rounds rounds (at least one: every kind strikes).
func Schedule(seed uint64, kinds []Kind, total time.Duration, rounds int, t Timing) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	var steps []Step
	var sum time.Duration
	for round := 0; round < max(rounds, 1) || sum < total; round++ {
		order := slices.Clone(kinds)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			s := Step{Kind: k, Quiet: between(t.QuietMin, t.QuietMax), Seed: rng.Uint64()}
			switch k {
			case KillHolder, KillMaster, KillRandom:
				s.Hold = between(0, 2*time.Second)
			case Restart:
				s.Hold = between(0, 300*time.Millisecond)
			case PauseHolder:
				s.Hold = between(2*t.Lease, 3*t.Lease)
			case QuorumLoss:
				s.Hold = between(2*time.Second, 5*time.Second)
			default:
				s.Hold = between(t.PartitionMin, t.PartitionMax)
			}
			steps = append(steps, s)
			sum += s.Hold + s.Quiet
		}
	}
	return steps
}
