package dlm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A model of what recoveries move, over random histories of views: views
// of a majority of the nodes (as the view agreement requires), recoveries
// that stop at any step on any member (a missed commit, an abort before or
// after the reports, a rebuild on some members only), restarts and
// evictions. The plans and holdings are the ones the nodes compute
// (makePlan, holdings.settle, suspended, rebuilt). Ground truth is, per bucket and
// holder, the last view the holder reported its locks of the bucket in (it
// then drops older answers about them), and per bucket and master, the last
// view that master rebuilt it in. The invariants:
//
//   - every member computes the same plan from the same Masteries;
//   - a member is a zombie only if it was left out of a view that another
//     member suspended since its lock state began;
//   - every bucket is either kept by its new master or rebuilt by it;
//   - a master keeps a bucket only if it rebuilt it itself (in this boot)
//     and no member with lock state reported the bucket since: a table a
//     report made stale is never kept, since it would grant across locks
//     it does not know;
//   - after a recovery that completed everywhere, the members' tables
//     partition the buckets, each holding what it masters.

type modelNode struct {
	name string
	boot uint64
	h    holdings
}

type who struct {
	name string
	boot uint64
}

type mastersModel struct {
	nodes    []*modelNode
	views    []modelView // by epoch−1
	epoch    uint64
	boots    uint64
	reported map[who]*[numBuckets]uint64 // per holder: epoch of its last report of each bucket
	rebuilt  map[who]*[numBuckets]uint64 // per master: epoch of its last rebuild of each bucket
}

// modelView is one view of the history: its members, and whether any of
// them suspended it.
type modelView struct {
	members   map[who]bool
	suspended bool
}

// leftOut reports whether n (this boot) was left out of a view that a
// member suspended, since the first view its lock state lists: the only
// reason for it to be a zombie.
func (m *mastersModel) leftOut(n *modelNode) bool {
	if len(n.h.views) == 0 {
		return false
	}
	for e := n.h.views[0].Epoch; e < m.epoch; e++ {
		if mv := m.views[e-1]; mv.suspended && !mv.members[who{n.name, n.boot}] {
			return true
		}
	}
	return false
}

func (m *mastersModel) marks(tab map[who]*[numBuckets]uint64, w who) *[numBuckets]uint64 {
	if tab[w] == nil {
		tab[w] = new([numBuckets]uint64)
	}
	return tab[w]
}

func (m *mastersModel) member(n *modelNode) *member { return newMember(n.name, "", n.boot) }

func (m *mastersModel) newBoot() uint64 { m.boots++; return m.boots }

// step commits a view of the given members and runs its recovery as far as
// the draws let it.
func (m *mastersModel) step(t *rapid.T, members []*modelNode) {
	m.epoch++
	var ms []*member
	for _, n := range members {
		ms = append(ms, m.member(n))
	}
	v := newView(m.epoch, ms, ms[0])
	self := func(n *modelNode) *member { return v.byName[n.name] }
	m.views = append(m.views, modelView{members: map[who]bool{}})
	for _, n := range members {
		m.views[len(m.views)-1].members[who{n.name, n.boot}] = true
	}
	// Prepare: every member must announce, or nobody suspends; those that
	// committed the view announce all the same.
	allCommitted := rapid.Bool().Draw(t, "all committed")
	all := map[string]*wire.Mastery{}
	for _, n := range members {
		if !allCommitted && !rapid.Bool().Draw(t, "committed") {
			continue
		}
		n.h.settle(v.epoch)
		all[n.name] = n.h.mastery(v.epoch, false)
		n.h.prepared = v.ref()
	}
	if !allCommitted {
		return
	}
	var plans []*plan
	suspended := 0
	for _, n := range members {
		p := makePlan(v, self(n), all, &n.h)
		plans = append(plans, p)
		if p.zombie && !m.leftOut(n) {
			t.Fatalf("epoch %d: %s is a zombie, but it was a member of every view suspended since its lock state began", v.epoch, n.name)
		}
		if p.gated != plans[0].gated {
			t.Fatalf("epoch %d: %s and %s plan different moves", v.epoch, members[0].name, n.name)
		}
		// Every bucket either kept by its master or rebuilt there.
		for b, o := range v.owner {
			if o.name == n.name && p.keep.has(b) == p.here.has(b) {
				t.Fatalf("epoch %d: %s's bucket %d is kept %v and rebuilt %v", v.epoch, n.name, b, p.keep.has(b), p.here.has(b))
			}
		}
		built := m.marks(m.rebuilt, who{n.name, n.boot})
		for b := range numBuckets {
			if !p.keep.has(b) {
				continue
			}
			if built[b] == 0 {
				t.Fatalf("epoch %d: %s keeps bucket %d, which it never rebuilt", v.epoch, n.name, b)
			}
			for _, h := range members {
				if p.fresh[h.name] {
					continue // its locks are purged; it holds none
				}
				if e := m.marks(m.reported, who{h.name, h.boot})[b]; e > built[b] {
					t.Fatalf("epoch %d: %s keeps bucket %d rebuilt in epoch %d, but %s reported it in epoch %d", v.epoch, n.name, b, built[b], h.name, e)
				}
			}
		}
	}
	for i, n := range members {
		if !rapid.Bool().Draw(t, "suspends") {
			continue
		}
		suspended++
		m.views[len(m.views)-1].suspended = true
		n.h.suspended(v, plans[i])
		if plans[i].zombie {
			delete(m.reported, who{n.name, n.boot}) // it dropped its locks: nothing to report
			continue
		}
		// Its reports (of locks it may hold on any moving bucket) go to
		// their new masters.
		rep := m.marks(m.reported, who{n.name, n.boot})
		for b := range numBuckets {
			if plans[i].gated.has(b) {
				rep[b] = v.epoch
			}
		}
	}
	if suspended < len(members) || !rapid.Bool().Draw(t, "barrier") {
		return
	}
	rebuilt := 0
	for _, n := range members {
		if !rapid.Bool().Draw(t, "rebuilds") {
			continue
		}
		rebuilt++
		n.h.rebuilt(v, self(n))
		built := m.marks(m.rebuilt, who{n.name, n.boot})
		for b, o := range v.owner {
			if o.name == n.name {
				built[b] = v.epoch
			}
		}
	}
	if rebuilt == len(members) {
		var cover bucketSet
		for _, n := range members {
			for b := range numBuckets {
				if n.h.live.has(b) {
					if cover.has(b) {
						t.Fatalf("epoch %d: bucket %d live at two members", v.epoch, b)
					}
					cover.add(b)
				}
			}
		}
		if cover.count() != numBuckets {
			t.Fatalf("epoch %d: the members' tables hold %d of %d buckets", v.epoch, cover.count(), numBuckets)
		}
	}
}

func TestMasteryModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &mastersModel{reported: map[who]*[numBuckets]uint64{}, rebuilt: map[who]*[numBuckets]uint64{}}
		for i := range rapid.IntRange(2, 5).Draw(t, "nodes") {
			m.nodes = append(m.nodes, &modelNode{name: fmt.Sprintf("n%d", i+1), boot: m.newBoot()})
		}
		for range rapid.IntRange(1, 12).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "action") {
			case 0: // a node restarts: a new boot, no lock state
				n := rapid.SampledFrom(m.nodes).Draw(t, "restart")
				n.boot, n.h = m.newBoot(), holdings{}
			case 1: // a node is evicted: it drops its lock state
				n := rapid.SampledFrom(m.nodes).Draw(t, "evict")
				n.h = holdings{}
				delete(m.reported, who{n.name, n.boot})
			default: // a view of some members
				var members, out []*modelNode
				for _, n := range m.nodes {
					if rapid.IntRange(0, 3).Draw(t, "in") > 0 {
						members = append(members, n)
					} else {
						out = append(out, n)
					}
				}
				for len(members) < len(m.nodes)/2+1 { // a view needs a majority
					members, out = append(members, out[0]), out[1:]
				}
				slices.SortFunc(members, func(a, b *modelNode) int { return strings.Compare(a.name, b.name) })
				m.step(t, members)
			}
		}
	})
}

// TestPlanOfAMemberWithAnAbortedView: a member that prepared a view and
// did not suspend it (its recovery was aborted) is no zombie in the next
// view, whether or not the others suspended that view, and it keeps its
// locks; its tables are kept only if no member suspended the view (one
// that did moved, and may have reported elsewhere, buckets they did not
// follow). A member that did not even prepare a view another suspended is
// a zombie.
func TestPlanOfAMemberWithAnAbortedView(t *testing.T) {
	x, y := newMember("x", "", 1), newMember("y", "", 2)
	v1, v2, v3 := newView(1, []*member{x, y}, x), newView(2, []*member{x, y}, x), newView(3, []*member{x, y}, x)
	mine := holdings{live: v1.owned(x), views: []wire.ViewRef{v1.ref()}}
	mine.prepared = v2.ref()
	mine.settle(v3.epoch)
	if !slices.Equal(mine.aborted, []wire.ViewRef{v2.ref()}) || mine.prepared != (wire.ViewRef{}) {
		t.Fatalf("after settle: aborted %v, prepared %v", mine.aborted, mine.prepared)
	}
	ownX, ownY := v3.owned(x), v1.owned(y)
	for _, tc := range []struct {
		name       string
		yViews     []wire.ViewRef
		xAborted   []wire.ViewRef
		zombie     bool
		keepsTable bool
	}{
		{"y suspended it", []wire.ViewRef{v1.ref(), v2.ref()}, mine.aborted, false, false},
		{"nobody suspended it", []wire.ViewRef{v1.ref()}, mine.aborted, false, true},
		{"x never prepared what y suspended", []wire.ViewRef{v1.ref(), v2.ref()}, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xm := &wire.Mastery{Epoch: 3, Tables: mine.live.bitmap(), Views: slices.Clone(mine.views), Aborted: tc.xAborted}
			ym := &wire.Mastery{Epoch: 3, Tables: ownY.bitmap(), Views: tc.yViews}
			all := map[string]*wire.Mastery{"x": xm, "y": ym}
			px := makePlan(v3, x, all, &holdings{live: mine.live})
			py := makePlan(v3, y, all, &holdings{live: ownY})
			if px.gated != py.gated || px.fresh["x"] != py.fresh["x"] {
				t.Fatal("x and y plan differently")
			}
			if px.zombie != tc.zombie || px.fresh["x"] != tc.zombie {
				t.Fatalf("x zombie %v fresh %v, want %v", px.zombie, px.fresh["x"], tc.zombie)
			}
			kept := px.keep == ownX
			if tc.keepsTable && !kept {
				t.Fatalf("x keeps %d of its %d buckets, want all", px.keep.count(), ownX.count())
			}
			if !tc.keepsTable && (!px.keep.empty() || px.here != ownX || px.drop != mine.live) {
				t.Fatalf("x keeps %d buckets, rebuilds %d of its %d, drops %d of %d; want none kept, all rebuilt and dropped", px.keep.count(), px.here.count(), ownX.count(), px.drop.count(), mine.live.count())
			}
		})
	}
}
