package main

import (
	"fmt"
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
	since   time.Duration // start of the current majority window, if in one
	in      bool
	windows []check.Window
	changes []time.Duration
}

func newRecorder(h *check.History, names []string, members, embedded int) *recorder {
	return &recorder{h: h, names: names, nodes: make([][]string, len(names)), members: members, embedded: embedded, in: true}
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

// Changed notes whether a majority of the members is up and pairwise
// connected now. Embedded members sit on the harness's side of every cut:
// they count as connected to every agent.
func (r *recorder) Changed(up []bool, f netlab.Faults) {
	t := r.h.Elapsed()
	ok := majority(up[:r.members], f, r.embedded)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, t)
	switch {
	case ok && !r.in:
		r.in, r.since = true, t
	case !ok && r.in:
		r.in = false
		r.windows = append(r.windows, check.Window{From: r.since, To: t})
	}
}

func majority(up []bool, f netlab.Faults, embedded int) bool {
	n := len(up)
	need := (n+embedded)/2 + 1 - embedded
	if need <= 0 {
		return true
	}
	// Some set of need agents up and pairwise connected.
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
				if mask&(1<<b) != 0 && !f.Connected(a, b) {
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

// Windows returns the majority windows up to end, and the same windows
// less settle after every change (fault, heal, kill, restart).
func (r *recorder) Windows(end, settle time.Duration) (majority, settled []check.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	majority = append([]check.Window(nil), r.windows...)
	if r.in {
		majority = append(majority, check.Window{From: r.since, To: end})
	}
	for _, w := range majority {
		from := w.From
		for _, c := range r.changes {
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
	return majority, settled
}

func (r *recorder) String() string { return fmt.Sprintf("%d windows", len(r.windows)) }
