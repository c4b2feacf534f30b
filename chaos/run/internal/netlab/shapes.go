package netlab

import "time"

// The shapes of partition the nemeses use. Nodes are indexes into
// Lab.Nodes; n is the number of nodes.

// Partition cuts every pair of nodes in different groups, both ways. Nodes
// in no group are cut from everyone.
func Partition(n int, groups ...[]int) Faults {
	group := make([]int, n)
	for i := range group {
		group[i] = -1 - i // alone
	}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	f := Faults{Cut: make(map[Link]bool)}
	for a := range n {
		for b := range n {
			if a != b && group[a] != group[b] {
				f.Cut[Link{a, b}] = true
			}
		}
	}
	return f
}

// Isolate cuts the nodes in minority from the rest, both ways (the rest
// stay connected, and so do the nodes of minority among themselves).
func Isolate(n int, minority []int) Faults {
	return Partition(n, minority, others(n, minority))
}

// IsolateAll is Isolate with the nodes in minority cut from the hub too:
// cut off from every other member of the cluster, the harness's included.
func IsolateAll(n int, minority []int) Faults {
	f := Isolate(n, minority)
	f.Hub = make(map[int]bool, len(minority))
	for _, i := range minority {
		f.Hub[i] = true
	}
	return f
}

// Ring leaves each node connected to its two neighbours on a ring only:
// each sees a majority of three of five, and no two majorities agree
// (Jepsen's majorities ring). order gives the ring's order.
func Ring(order []int) Faults {
	n := len(order)
	f := Faults{Cut: make(map[Link]bool)}
	pos := make(map[int]int, n)
	for p, i := range order {
		pos[i] = p
	}
	for _, a := range order {
		for _, b := range order {
			d := (pos[a] - pos[b] + n) % n
			if a != b && d != 1 && d != n-1 {
				f.Cut[Link{a, b}] = true
			}
		}
	}
	return f
}

// OneWay makes every node of deaf drop what the nodes of from send it,
// while deaf's packets still reach from.
func OneWay(from, deaf []int) Faults {
	f := Faults{Cut: make(map[Link]bool)}
	for _, a := range from {
		for _, b := range deaf {
			if a != b {
				f.Cut[Link{a, b}] = true
			}
		}
	}
	return f
}

// Bridge cuts left from right, both ways, while bridge stays connected to
// both: the two sides each see the bridge, not each other.
func Bridge(left, right []int) Faults {
	f := Faults{Cut: make(map[Link]bool)}
	for _, a := range left {
		for _, b := range right {
			f.Cut[Link{a, b}] = true
			f.Cut[Link{b, a}] = true
		}
	}
	return f
}

// Lossy drops pct percent of the packets each of nodes receives from its
// peers.
func Lossy(nodes []int, pct int) Faults {
	f := Faults{Loss: make(map[int]int)}
	for _, i := range nodes {
		f.Loss[i] = pct
	}
	return f
}

// Slow holds every packet each of nodes sends its peers for d.
func Slow(nodes []int, d time.Duration) Faults {
	f := Faults{Delay: make(map[int]time.Duration)}
	for _, i := range nodes {
		f.Delay[i] = d
	}
	return f
}

// Connected reports whether a can reach b and b can reach a directly under
// f (loss and delay do not cut).
func (f Faults) Connected(a, b int) bool { return !f.Cut[Link{a, b}] && !f.Cut[Link{b, a}] }

// MajorityConnected reports whether some set of more than n/2 nodes among
// up are pairwise connected under f: a quorum that can agree.
func (f Faults) MajorityConnected(n int, up []bool) bool {
	// An exact search over the subsets up to 16 nodes; beyond, cliques
	// grown greedily from every node, which is exact for the shapes above.
	need := n/2 + 1
	if n <= 16 {
		for mask := 1; mask < 1<<n; mask++ {
			if popcount(mask) < need {
				continue
			}
			if f.clique(mask, n, up) {
				return true
			}
		}
		return false
	}
	for start := range n {
		if !up[start] {
			continue
		}
		set := []int{start}
		for c := range n {
			if c == start || !up[c] {
				continue
			}
			ok := true
			for _, s := range set {
				if !f.Connected(s, c) {
					ok = false
					break
				}
			}
			if ok {
				set = append(set, c)
			}
		}
		if len(set) >= need {
			return true
		}
	}
	return false
}

func (f Faults) clique(mask, n int, up []bool) bool {
	for a := range n {
		if mask&(1<<a) == 0 {
			continue
		}
		if !up[a] {
			return false
		}
		for b := a + 1; b < n; b++ {
			if mask&(1<<b) != 0 && !f.Connected(a, b) {
				return false
			}
		}
	}
	return true
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

func others(n int, except []int) []int {
	skip := make(map[int]bool, len(except))
	for _, i := range except {
		skip[i] = true
	}
	var out []int
	for i := range n {
		if !skip[i] {
			out = append(out, i)
		}
	}
	return out
}
