package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
)

// recorder writes the nemeses' doings into the history and follows the
// windows in which a majority of the members is up and connected.
type recorder struct {
	h *check.History
	// names of the processes, by index: the first members of them are
	// cluster members; embedded more members live in the harness, always
	// up and connected. nodes are the history's nodes of each process (a
	// worker of the client protocol has one per session; else its name).
	names             []string
	nodes             [][]string
	members, embedded int

	mu      sync.Mutex
	states  []memberState
	changes []time.Duration
}

func newRecorder(h *check.History, names []string, members, embedded int) *recorder {
	return &recorder{h: h, names: names, nodes: make([][]string, len(names)), members: members, embedded: embedded}
}

func (r *recorder) Fault(k nemesis.Kind, node int, res, text string) time.Duration {
	t := r.h.Mark("nemesis", text)
	r.mu.Lock()
	r.changes = append(r.changes, t)
	r.mu.Unlock()
	return t
}

// sessions names the history's nodes of process i, other than its name:
// a client worker's sessions.
func (r *recorder) sessions(i int, nodes []string) { r.nodes[i] = nodes }

func (r *recorder) nodesOf(proc int) []string {
	if len(r.nodes[proc]) > 0 {
		return r.nodes[proc]
	}
	return []string{r.names[proc]}
}

func (r *recorder) Crash(proc int) {
	for _, n := range r.nodesOf(proc) {
		r.h.Crash(n)
	}
}

func (r *recorder) Freeze(proc int) {
	for _, n := range r.nodesOf(proc) {
		r.h.Freeze(n)
	}
}

func (r *recorder) Healed(k nemesis.Kind, text string) time.Duration {
	t := r.h.Mark("nemesis", "healed: "+text)
	r.mu.Lock()
	r.changes = append(r.changes, t)
	r.mu.Unlock()
	return t
}

// Changed notes which processes are up and which pairs of members are cut
// apart now.
func (r *recorder) Changed(up []bool, f netlab.Faults) {
	t := r.h.Elapsed()
	s := memberState{At: t, Up: slices.Clone(up), Cut: cutPairs(r.members, f)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, t)
	r.states = append(r.states, s)
}

// cutPairs are the pairs of the first n nodes that f does not leave
// connected both ways.
func cutPairs(n int, f netlab.Faults) [][2]int {
	var out [][2]int
	for a := range n {
		for b := a + 1; b < n; b++ {
			if !f.Connected(a, b) {
				out = append(out, [2]int{a, b})
			}
		}
	}
	return out
}

// majority reports whether some majority of all the members (up and
// cut among the first ones, embedded more always up and connected to
// every one) is up and pairwise connected.
func majority(up []bool, cut [][2]int, embedded int) bool {
	n := len(up)
	need := (n+embedded)/2 + 1 - embedded
	if need <= 0 {
		return true
	}
	apart := make(map[[2]int]bool, len(cut))
	for _, c := range cut {
		apart[c] = true
	}
	// Some set of need members up and pairwise connected.
	for mask := 1; mask < 1<<n; mask++ {
		c, ok := 0, true
		for a := range n {
			if mask&(1<<a) == 0 {
				continue
			}
			c++
			if !up[a] {
				ok = false
				break
			}
			for b := a + 1; b < n && ok; b++ {
				if mask&(1<<b) != 0 && apart[[2]int{a, b}] {
					ok = false
				}
			}
		}
		if ok && c >= need {
			return true
		}
	}
	return false
}

// snapshot returns the states and changes recorded so far.
func (r *recorder) snapshot() ([]memberState, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.states), slices.Clone(r.changes)
}

// Windows returns the majority windows up to end, and the same windows
// less settle after every change (fault, heal, kill, restart).
func (r *recorder) Windows(end, settle time.Duration) (majority, settled []check.Window) {
	states, changes := r.snapshot()
	return windows(states, changes, r.members, r.embedded, end, settle)
}

// windows are the windows in which a majority of the members was up and
// connected, by the member states, up to end; and the same windows less
// settle after every change.
func windows(states []memberState, changes []time.Duration, members, embedded int, end, settle time.Duration) (maj, settled []check.Window) {
	in, since := true, time.Duration(0)
	for _, s := range states {
		ok := majority(s.Up[:members], s.Cut, embedded)
		switch {
		case ok && !in:
			in, since = true, s.At
		case !ok && in:
			in = false
			maj = append(maj, check.Window{From: since, To: s.At})
		}
	}
	if in {
		maj = append(maj, check.Window{From: since, To: end})
	}
	for _, w := range maj {
		from := w.From
		for _, c := range changes {
			if c+settle <= from || c >= w.To {
				continue
			}
			if c > from {
				settled = append(settled, check.Window{From: from, To: c})
			}
			from = max(from, c+settle)
		}
		if from < w.To {
			settled = append(settled, check.Window{From: from, To: w.To})
		}
	}
	return maj, settled
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d states", len(r.states))
}
