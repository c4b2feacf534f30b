package dlm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The wait-for graph the deadlock detector searches: parties (owners, or
// locks without one) joined by the edges the masters reported. This file
// is pure: the protocol around it is in deadlock.go.

// graphEdge is a reported edge and the node that reported it (the master
// of its resource, which confirms it and fails its waiter).
type graphEdge struct {
	master string
	e      wire.WaitEdge
}

func (g *graphEdge) waiter() master.PartyKey {
	return partyKey(g.e.WaiterOwner, g.e.WaiterNode, g.e.WaiterLock)
}

func (g *graphEdge) blocker() master.PartyKey {
	return partyKey(g.e.BlockerOwner, g.e.BlockerNode, g.e.BlockerLock)
}

func partyKey(owner uint64, node uint32, lock uint64) master.PartyKey {
	return master.Party{Owner: master.OwnerID(owner), Lock: master.LockID{Node: master.NodeID(node), ID: lock}}.Key()
}

// request names one queued request: a lock and the generation of its
// queued request or conversion.
type request struct {
	node uint32
	lock uint64
	gen  uint64
}

func (g *graphEdge) waitingRequest() request {
	return request{g.e.WaiterNode, g.e.WaiterLock, g.e.WaiterGen}
}

// involves reports whether the edge exists only while r is queued: r is its
// waiter, or is queued ahead of its waiter.
func (g *graphEdge) involves(r request) bool {
	return g.waitingRequest() == r ||
		(g.e.Kind == wire.BlockAhead && request{g.e.BlockerNode, g.e.BlockerLock, g.e.Stamp} == r)
}

// cycle is a cycle of the graph: edges[i]'s blocker is edges[i+1]'s waiter,
// and the last edge's blocker is the first's waiter. victim is the index of
// the edge whose waiting request is to be failed.
type cycle struct {
	edges  []graphEdge
	victim int
}

// findCycles returns up to limit cycles of the graph, found deterministically
// (the same edges give the same cycles, whatever order they come in). Each
// cycle's victim is the waiting request of the party with the largest
// PartyKey on it. Once a cycle is found its victim's request is taken out
// of the graph (the edges it waits on and those of requests queued behind
// it), as failing it will, and the search goes on: the cycles returned are
// ones that would remain after every earlier victim was failed, so none of
// them is broken twice.
func findCycles(edges []graphEdge, limit int) []cycle {
	edges = slices.Clone(edges)
	slices.SortFunc(edges, compareEdges)
	var out []cycle
	for len(out) < limit {
		c, ok := oneCycle(edges)
		if !ok {
			break
		}
		out = append(out, c)
		v := c.edges[c.victim].waitingRequest()
		edges = slices.DeleteFunc(edges, func(g graphEdge) bool { return g.involves(v) })
	}
	return out
}

// oneCycle finds a cycle by depth-first search from each party in key
// order, following each party's edges in order.
func oneCycle(edges []graphEdge) (cycle, bool) {
	out := map[master.PartyKey][]int{} // edges by waiter, in order
	var parties []master.PartyKey
	for i := range edges {
		w := edges[i].waiter()
		if _, ok := out[w]; !ok {
			parties = append(parties, w)
		}
		out[w] = append(out[w], i)
	}
	const (
		white = iota
		grey
		black
	)
	color := map[master.PartyKey]int{}
	var path []int // edge indices from the root to the party being searched
	var found []int
	var visit func(p master.PartyKey) bool
	visit = func(p master.PartyKey) bool {
		color[p] = grey
		for _, i := range out[p] {
			b := edges[i].blocker()
			switch color[b] {
			case grey: // a cycle: from b's edge on the path to this one
				if b == p {
					found = []int{i} // a party waiting for itself
					return true
				}
				j := len(path) - 1
				for edges[path[j]].waiter() != b {
					j--
				}
				found = append(slices.Clone(path[j:]), i)
				return true
			case white:
				path = append(path, i)
				if visit(b) {
					return true
				}
				path = path[:len(path)-1]
			}
		}
		color[p] = black
		return false
	}
	for _, p := range parties {
		if color[p] == white && visit(p) {
			break
		}
	}
	if found == nil {
		return cycle{}, false
	}
	c := cycle{edges: make([]graphEdge, len(found))}
	for j, i := range found {
		c.edges[j] = edges[i]
		if c.edges[j].waiter().Compare(c.edges[c.victim].waiter()) > 0 {
			c.victim = j
		}
	}
	return c, true
}

// compareEdges orders edges by waiter, blocker, then everything else, so
// that the search does not depend on the order reports came in.
func compareEdges(a, b graphEdge) int {
	if c := a.waiter().Compare(b.waiter()); c != 0 {
		return c
	}
	if c := a.blocker().Compare(b.blocker()); c != 0 {
		return c
	}
	x, y := a.e, b.e
	return cmp.Or(
		cmp.Compare(x.WaiterNode, y.WaiterNode), cmp.Compare(x.WaiterLock, y.WaiterLock), cmp.Compare(x.WaiterGen, y.WaiterGen),
		cmp.Compare(x.BlockerNode, y.BlockerNode), cmp.Compare(x.BlockerLock, y.BlockerLock),
		cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Stamp, y.Stamp), cmp.Compare(x.Mode, y.Mode),
		cmp.Compare(x.Lockspace, y.Lockspace), cmp.Compare(x.Resource, y.Resource), cmp.Compare(a.master, b.master),
	)
}

// describe renders a cycle on one line of at most n bytes, from the victim
// round to it: "2 parties: owner a waits on "x" (EX) for owner b, which
// waits on "y" (EX) for owner a".
func (c cycle) describe(n int) string {
	var b strings.Builder
	if len(c.edges) == 1 {
		b.WriteString("1 party: ")
	} else {
		fmt.Fprintf(&b, "%d parties: ", len(c.edges))
	}
	for j := range c.edges {
		g := &c.edges[(c.victim+j)%len(c.edges)]
		if j > 0 {
			b.WriteString(", which")
		} else {
			b.WriteString(partyName(g.waiter()))
		}
		fmt.Fprintf(&b, " waits on %q (%v) for %s", g.e.Resource, g.e.Mode, partyName(g.blocker()))
		if b.Len() > n {
			break
		}
	}
	if s := b.String(); len(s) > n {
		return s[:n-3] + "..."
	}
	return b.String()
}

func partyName(k master.PartyKey) string {
	if k.Owner != 0 {
		return fmt.Sprintf("owner %x", uint64(k.Owner))
	}
	return fmt.Sprintf("lock %x/%x", uint32(k.Lock.Node), k.Lock.ID)
}
