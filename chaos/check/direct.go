package check

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

// The direct checks scan the history for one property each and name the
// operations that break it, which a linearizability checker cannot do: it
// only says that no order works.

// checkOverlap reports every two belief intervals of different clients on
// one resource whose modes are incompatible and which overlap in time.
// Intervals are compared strictly: one that ends at t and one that starts at
// t do not overlap, and an interval of no length overlaps nothing.
func checkOverlap(intervals []Interval) []Violation {
	byRes := make(map[string][]Interval)
	var order []string
	for _, iv := range intervals {
		if iv.End <= iv.Start {
			continue
		}
		if _, ok := byRes[iv.Resource]; !ok {
			order = append(order, iv.Resource)
		}
		byRes[iv.Resource] = append(byRes[iv.Resource], iv)
	}
	slices.Sort(order)
	var out []Violation
	for _, res := range order {
		ivs := byRes[res]
		slices.SortStableFunc(ivs, func(a, b Interval) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.startOrd, b.startOrd))
		})
		var active []Interval
		for _, b := range ivs {
			active = slices.DeleteFunc(active, func(a Interval) bool { return a.End <= b.Start })
			for _, a := range active {
				if a.Client != b.Client && !modes.Compatible(a.Mode, b.Mode) {
					out = append(out, overlapViolation(a, b))
				}
			}
			active = append(active, b)
		}
	}
	return out
}

func overlapViolation(a, b Interval) Violation {
	from, to := max(a.Start, b.Start), min(a.End, b.End)
	msg := fmt.Sprintf("resource %q: clients %d and %d both believed they held it in incompatible modes %v and %v during [%s, %s]:\n"+
		"    %s\n    %s",
		a.Resource, a.Client, b.Client, a.Mode, b.Mode, fmtTime(from), fmtTime(to), a, b)
	return Violation{Check: CheckOverlap, Resource: a.Resource, Message: msg, Intervals: []Interval{a, b}}
}

// isGrant reports whether r handed out a new fencing token: a granted
// Acquire (not a share of its node's grant), or a granted up- or middle
// conversion (a down-conversion keeps its token). A granted Convert of a
// lock the client no longer believed it held (after a Lost or a freeze of
// its process, which end the belief but not the lock) is a grant unless
// it is a down-conversion from a mode the lock may have been in when the
// belief ended; one of a lock with no such past counts as a grant.
func isGrant(r *Record) bool {
	if r.Outcome != OK || r.Shared {
		return false
	}
	switch r.Kind {
	case Acquire:
		return true
	case Convert:
		if r.Held {
			return modes.IsUp(r.From, r.Granted)
		}
		for _, m := range r.endedIn {
			if !modes.IsUp(m, r.Granted) {
				return false
			}
		}
		return true
	}
	return false
}

// precedes reports whether x returned before y was called, so that x took
// effect first whatever the linearization. Equal times are concurrent.
func precedes(x, y *Record) bool { return x.Return < y.Call }

// priorHighest returns, for each of rs (operations that returned), the one
// with the highest token among those that precede it: in real time, or in
// its own client's program order. A client's operations are sequential even
// when they share a timestamp, as they often do under a fake clock, so
// there the order the history recorded them in counts.
func priorHighest(rs []*Record) (ys, prior []*Record) {
	ys = sortedBy(rs, callTime)
	prior = highestBefore(sortedBy(rs, returnTime), ys, precedes)
	at := make(map[*Record]int, len(ys))
	for j, y := range ys {
		at[y] = j
	}
	byClient := make(map[int][]*Record)
	for _, r := range rs {
		byClient[r.Client] = append(byClient[r.Client], r)
	}
	for _, own := range byClient {
		cys := sortedBy(own, func(r *Record) int64 { return int64(r.callOrd) })
		cprior := highestBefore(sortedBy(own, func(r *Record) int64 { return int64(r.retOrd) }), cys,
			func(x, y *Record) bool { return x.retOrd < y.callOrd })
		for k, y := range cys {
			if x := cprior[k]; x != nil && (prior[at[y]] == nil || x.Token > prior[at[y]].Token) {
				prior[at[y]] = x
			}
		}
	}
	return ys, prior
}

// byKey groups the records that pass keep by resource, in sorted key order.
func byKey(recs []Record, keep func(*Record) bool) (keys []string, groups map[string][]*Record) {
	groups = make(map[string][]*Record)
	for i := range recs {
		r := &recs[i]
		if !keep(r) {
			continue
		}
		if _, ok := groups[r.Resource]; !ok {
			keys = append(keys, r.Resource)
		}
		groups[r.Resource] = append(groups[r.Resource], r)
	}
	slices.Sort(keys)
	return keys, groups
}

// highestBefore returns, for each y in ys, the x in xs with the highest
// token among those for which before(x, y), or nil. xs must be sorted by
// the time before compares (ascending) and ys by the time it compares y by.
func highestBefore(xs, ys []*Record, before func(x, y *Record) bool) []*Record {
	out := make([]*Record, len(ys))
	var best *Record
	i := 0
	for j, y := range ys {
		for ; i < len(xs) && before(xs[i], y); i++ {
			if best == nil || xs[i].Token > best.Token {
				best = xs[i]
			}
		}
		out[j] = best
	}
	return out
}

func sortedBy(rs []*Record, key func(*Record) int64) []*Record {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b *Record) int { return cmp.Compare(key(a), key(b)) })
	return out
}

func callTime(r *Record) int64   { return int64(r.Call) }
func returnTime(r *Record) int64 { return int64(r.Return) }

// checkTokens reports, per resource, grants whose fencing token is not
// above the token of a grant that returned before they were called, and
// any two grants with the same token.
func checkTokens(recs []Record) []Violation {
	keys, groups := byKey(recs, isGrant)
	var out []Violation
	for _, res := range keys {
		gs := groups[res]
		first := make(map[uint64]*Record)
		for _, g := range gs {
			if f, ok := first[g.Token]; ok {
				out = append(out, Violation{Check: CheckTokens, Resource: res, Records: []Record{*f, *g},
					Message: fmt.Sprintf("resource %q: token %d was granted twice:\n    %s at %s\n    %s at %s",
						res, g.Token, f.describe(), fmtTime(f.Return), g.describe(), fmtTime(g.Return))})
				continue
			}
			first[g.Token] = g
		}
		ys, prior := priorHighest(gs)
		for j, y := range ys {
			if x := prior[j]; x != nil && x.Token > y.Token {
				out = append(out, Violation{Check: CheckTokens, Resource: res, Records: []Record{*x, *y},
					Message: fmt.Sprintf("resource %q: token went back from %d to %d:\n"+
						"    %s was granted token %d at %s,\n    then %s, called at %s, was granted token %d at %s",
						res, x.Token, y.Token, x.describe(), x.Token, fmtTime(x.Return),
						y.describe(), fmtTime(y.Call), y.Token, fmtTime(y.Return))})
			}
		}
	}
	return out
}

// checkStore reports, per key of the fenced store, accepted writes whose
// token is below that of a write accepted before they were called, and
// rejected writes that no write with a higher token (accepted, or possibly
// applied) could explain.
func checkStore(recs []Record) []Violation {
	isWrite := func(r *Record) bool { return r.Kind == Write }
	keys, groups := byKey(recs, isWrite)
	var out []Violation
	for _, key := range keys {
		var accepted, applied, rejected []*Record // applied: accepted or maybe
		for _, w := range groups[key] {
			switch w.Outcome {
			case OK:
				accepted = append(accepted, w)
				applied = append(applied, w)
			case Unknown, Pending:
				applied = append(applied, w)
			case Rejected:
				rejected = append(rejected, w)
			}
		}
		ys, prior := priorHighest(accepted)
		for j, y := range ys {
			if x := prior[j]; x != nil && x.Token > y.Token {
				out = append(out, Violation{Check: CheckStore, Resource: key, Records: []Record{*x, *y},
					Message: fmt.Sprintf("key %q: the store accepted a stale token %d after token %d:\n"+
						"    %s was accepted at %s,\n    then %s, called at %s, was accepted at %s",
						key, y.Token, x.Token, x.describe(), fmtTime(x.Return), y.describe(), fmtTime(y.Call), fmtTime(y.Return))})
			}
		}
		ys = sortedBy(rejected, returnTime)
		prior = highestBefore(sortedBy(applied, callTime), ys, func(x, y *Record) bool { return x.Call <= y.Return })
		for j, y := range ys {
			x := prior[j]
			if x != nil && x.Token > y.Token {
				continue
			}
			why := "no write had been accepted"
			recs := []Record{*y}
			if x != nil {
				why = fmt.Sprintf("the highest token that could have been accepted by then was %d (%s)", x.Token, x.describe())
				recs = []Record{*x, *y}
			}
			out = append(out, Violation{Check: CheckStore, Resource: key, Records: recs,
				Message: fmt.Sprintf("key %q: the store rejected token %d without cause:\n    %s was rejected at %s, but %s",
					key, y.Token, y.describe(), fmtTime(y.Return), why)})
		}
	}
	return out
}
