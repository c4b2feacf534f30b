package dlm

import (
	"math/bits"
	"slices"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// What moves in a recovery. Each member tells every other, before anything
// moves, which buckets its tables hold in full, which views its lock state
// went through and which it prepared without going through (wire.Mastery,
// in Prepare). From the same messages every member computes the same plan:
// a bucket keeps its table if its master in the new view holds it in full,
// is no zombie and went through every view the others did; every other
// bucket is rebuilt at its new master from its holders' reports, and held
// back, on every node, until the recovery is done. See
// docs/design/recovery.md for why this is safe.

// bucketSet is a set of buckets.
type bucketSet [numBuckets / 64]uint64

func (s *bucketSet) add(b int)      { s[b>>6] |= 1 << (b & 63) }
func (s *bucketSet) has(b int) bool { return s[b>>6]&(1<<(b&63)) != 0 }

func (s *bucketSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

func (s *bucketSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// minus returns s \ o.
func (s bucketSet) minus(o bucketSet) bucketSet {
	for i := range s {
		s[i] &^= o[i]
	}
	return s
}

// bitmap encodes s as wire.Mastery.Tables: bucket b is bit b%8 of byte
// b/8. The empty set is encoded as no bitmap at all.
func (s *bucketSet) bitmap() []byte {
	if s.empty() {
		return nil
	}
	out := make([]byte, wire.MasteryBitmap)
	for b := range numBuckets {
		if s.has(b) {
			out[b/8] |= 1 << (b % 8)
		}
	}
	return out
}

// bucketsOf decodes a Tables bitmap (validated: empty or full length).
func bucketsOf(bitmap []byte) bucketSet {
	var s bucketSet
	if len(bitmap) != wire.MasteryBitmap {
		return s
	}
	for b := range numBuckets {
		if bitmap[b/8]&(1<<(b%8)) != 0 {
			s.add(b)
		}
	}
	return s
}

// holdings is this node's lock state as a Mastery describes it.
type holdings struct {
	// live are the buckets whose tables this node holds in full. Outside
	// them the tables hold nothing.
	live bucketSet
	// views are the views suspended since the tables were last rebuilt
	// (that view first), or since the lock state began: empty for a node
	// that holds nothing (just started, evicted, or a zombie that dropped
	// everything) until its next Suspend.
	views []wire.ViewRef
	// base is the view of the last rebuild: the nodes whose locks the
	// tables may hold are its members (the tables hold none of a node
	// that joined later, which had no recovery completed to take them).
	base *view
	// aborted are the views since the first of views that this node sent
	// its Mastery for and did not suspend, its recovery aborted first
	// (wire.Mastery.Aborted). prepared is the view whose Mastery it sent
	// last, until it suspends it (zero: none); settle moves it to aborted.
	aborted  []wire.ViewRef
	prepared wire.ViewRef
}

func (h *holdings) mastery(epoch uint64, none bool) *wire.Mastery {
	m := &wire.Mastery{Epoch: epoch, Views: slices.Clone(h.views), Aborted: slices.Clone(h.aborted)}
	if !none {
		m.Tables = h.live.bitmap()
	}
	return m
}

// plan is what a recovery moves, the same on every member.
type plan struct {
	epoch uint64
	// gated are the buckets rebuilt in this view, at their new masters:
	// every node holds back its operations on them until Resume.
	gated bucketSet
	// here are the gated buckets this node masters: rebuilt here from the
	// reports. keep are the buckets whose tables this node keeps; drop,
	// those it held and gives up (their snapshots go to their new masters).
	here, keep, drop bucketSet
	// fresh are the members with no lock state to keep (just started,
	// evicted, or zombies, which drop theirs): other masters purge any
	// lock of theirs, and they serve nothing until Resume. selfFresh says
	// this node is one of them.
	fresh     map[string]bool
	selfFresh bool
	// zombie: this node missed a view the others went through, with lock
	// state of its own: it drops all of it at Suspend.
	zombie  bool
	resumed chan struct{} // closed at Resume
}

// heldBack reports whether operations on the resource with hash h wait
// for the end of the recovery under way (p may be nil: none).
func (p *plan) heldBack(h uint64) bool { return p != nil && p.gated.has(bucketOf(h)) }

// rebuildsHere reports whether this node rebuilds h's bucket in p.
func (p *plan) rebuildsHere(h uint64) bool { return p != nil && p.here.has(bucketOf(h)) }

// makePlan computes the plan of view v from every member's Mastery (all,
// by name; complete) and this node's own holdings.
//
// A member is a zombie if another member went through a view (at or after
// the first of its own) that it did not, and did not even prepare (see
// settle): it was left out of a view while keeping its lock state, and
// what the others did in that view (reports to other masters, messages of
// its own they dropped as a non-member's, purges of its locks) its tables
// and locks do not reflect. It drops everything, and everybody treats it
// as a node that just started. A member that prepared such a view and did
// not suspend it keeps its locks; none of its tables is kept.
func makePlan(v *view, self *member, all map[string]*wire.Mastery, mine *holdings) *plan {
	p := &plan{epoch: v.epoch, fresh: map[string]bool{}, resumed: make(chan struct{})}
	keep := map[string]bucketSet{}
	for _, x := range v.members {
		mx := all[x.name]
		if len(mx.Views) == 0 {
			p.fresh[x.name] = true
			continue
		}
		if missedView(mx, all) {
			p.fresh[x.name] = true
			if x.name == self.name {
				p.zombie = true
			}
			continue
		}
		if tablesBehind(mx, all) {
			continue // it keeps its locks, and no table: each moves
		}
		keep[x.name] = bucketsOf(mx.Tables)
	}
	p.selfFresh = p.fresh[self.name]
	for b, o := range v.owner {
		if k, ok := keep[o.name]; !ok || !k.has(b) {
			p.gated.add(b)
			if o.name == self.name {
				p.here.add(b)
			}
		} else if o.name == self.name {
			p.keep.add(b)
		}
	}
	p.drop = mine.live.minus(p.keep)
	return p
}

// suspended updates the holdings as Suspend installs view v with plan p:
// the tables keep p.keep; the view joins the list (a zombie starts a new
// list with it, having dropped everything). It reports whether the list
// grew past what a Mastery carries: the tables are then to be forgotten
// (announced as none) at the next view, and the list restarts.
func (h *holdings) suspended(v *view, p *plan) (forget bool) {
	if p.zombie {
		*h = holdings{views: []wire.ViewRef{v.ref()}}
		return false
	}
	h.live, h.prepared = p.keep, wire.ViewRef{}
	h.views = append(h.views, v.ref())
	if len(h.views) > wire.MaxMasteryViews {
		h.views, h.aborted = h.views[len(h.views)-1:], nil
		return true
	}
	return false
}

// settle runs as this node prepares the view of epoch: the view it sent
// its Mastery for last and never suspended, its recovery aborted first,
// joins the aborted list. Another member may have suspended that view
// (it had every Mastery), and then lists it among its views: this node was
// a member of it and, as a holder, missed nothing (no view rebuilt or
// purged anything without it: the barrier waits for every member; it
// reports its locks where they moved), but its tables did not follow the
// buckets that moved in it, so they are not kept (makePlan). Without the
// list this node would be taken for a zombie, one left out of a view, and
// drop all of its locks. A node that holds nothing lists nothing.
func (h *holdings) settle(epoch uint64) {
	r := h.prepared
	if r.Epoch == 0 || r.Epoch >= epoch {
		return
	}
	h.prepared = wire.ViewRef{}
	if len(h.views) == 0 || h.views[len(h.views)-1].Epoch >= r.Epoch ||
		len(h.aborted) > 0 && h.aborted[len(h.aborted)-1].Epoch >= r.Epoch {
		return
	}
	h.aborted = append(h.aborted, r)
	if len(h.aborted) > wire.MaxMasteryViews {
		// The oldest goes: at worst this node is taken for a zombie.
		h.aborted = slices.Delete(h.aborted, 0, 1)
	}
}

// rebuilt updates the holdings as Rebuild completes view v at self: the
// tables hold everything self masters in v, rebuilt in v.
func (h *holdings) rebuilt(v *view, self *member) {
	*h = holdings{live: v.owned(self), views: []wire.ViewRef{v.ref()}, base: v}
}

// missedView reports whether another member went through a view, at or
// after the first of x's, that x neither went through nor prepared.
func missedView(x *wire.Mastery, all map[string]*wire.Mastery) bool {
	first := x.Views[0].Epoch
	for _, h := range all {
		for _, r := range h.Views {
			if r.Epoch >= first && !slices.Contains(x.Views, r) && !slices.Contains(x.Aborted, r) {
				return true
			}
		}
	}
	return false
}

// tablesBehind reports whether another member went through a view that x
// prepared and did not suspend: x's tables did not follow what moved in it.
func tablesBehind(x *wire.Mastery, all map[string]*wire.Mastery) bool {
	for _, r := range x.Aborted {
		for _, h := range all {
			if slices.Contains(h.Views, r) {
				return true
			}
		}
	}
	return false
}
