package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// An Increment is one step of a value-block counter: under an EX lock, a
// client read the counter from the lock's value block and wrote it back
// one higher, acknowledged when the write-back was (a down-conversion the
// master answered).
type Increment struct {
	Client int    `json:"client"`
	Node   string `json:"node"`
	// Granted is when the EX grant returned: EX grants of a safe lock are
	// ordered, and so are the increments.
	Granted time.Duration `json:"granted_ns"`
	// Read is the value read, Valid the value block's valid flag: false
	// when the lock manager lost a writer and says the value may be stale.
	// Empty says the value block was empty: never written since the
	// resource was created (the lock manager starts a resource created
	// anew, once every lock on it went, with an empty, valid value).
	Read  int64 `json:"read"`
	Valid bool  `json:"valid"`
	Empty bool  `json:"empty,omitempty"`
	// Outcome of the write-back: OK (acknowledged), Fail (definitely not
	// written: the lock was gone first), Unknown (the answer never came),
	// Pending (not known yet: an increment is recorded as Pending before
	// its write-back, and again with its outcome, which replaces it; one
	// left Pending counts as Unknown).
	Outcome Outcome `json:"outcome"`
	// Called is when the up-conversion to EX was called (zero: not
	// recorded). Frozen says its process was frozen between Called and
	// Granted (MarkFrozen): the grant may have come before the freeze and
	// been seen only at the thaw, so Granted does not date its read.
	Called time.Duration `json:"called_ns,omitempty"`
	Frozen bool          `json:"frozen,omitempty"`
}

// MarkFrozen sets Frozen on the increments whose node was frozen between
// their Called and Granted; freezes are each node's freeze instants, in
// order (History.Freezes).
func MarkFrozen(incs []Increment, freezes map[string][]time.Duration) []Increment {
	out := slices.Clone(incs)
	for i := range out {
		in := &out[i]
		ts := freezes[in.Node]
		if in.Called == 0 || len(ts) == 0 {
			continue
		}
		j, _ := slices.BinarySearch(ts, in.Called)
		in.Frozen = j < len(ts) && ts[j] <= in.Granted
	}
	return out
}

// CounterRead is a read of the counter when the run is over.
type CounterRead struct {
	Value int64 `json:"value"`
	Valid bool  `json:"valid"`
	Empty bool  `json:"empty,omitempty"`
	// At is when the read's grant returned (zero: not known, and an empty
	// final read is then judged like any valid one).
	At time.Duration `json:"at_ns,omitempty"`
}

// CounterResult is what CheckCounter found.
type CounterResult struct {
	Acked, Unknown, Failed int
	// Final is the value read at the end, if any.
	Final *CounterRead
	// Invalidated counts the reads that found the value block not valid,
	// and Flagged the acknowledged increments those reads had lost: the
	// lock manager said so (the valid flag), which is its contract, so
	// they are no violation.
	Invalidated int
	Flagged     int64
	// Paused counts the increments whose process was frozen between the
	// up-conversion's call and its grant's return and whose value was not
	// written back for sure (Frozen, and not OK): when their grant came,
	// and so what they should have read, is not known, and their reads
	// are not judged.
	Paused int
	// Recreated counts the reads that found the value block empty after a
	// moment when no client believed it held a lock on the counter: the
	// resource, and its value, may have gone with its last lock, as the
	// lock manager's rule says, so they are no violation either; Lost
	// counts the acknowledged increments they lost.
	Recreated  int
	Lost       int64
	Violations []string
}

// OK reports whether no violation was found.
func (r CounterResult) OK() bool { return len(r.Violations) == 0 }

// CheckCounter is CheckCounterHeld without the belief intervals: an empty
// read is judged like any other valid one.
func CheckCounter(incs []Increment, final *CounterRead) CounterResult {
	return CheckCounterHeld(incs, final, nil)
}

// CheckCounterHeld checks a value-block counter: every valid read, and the
// final read, must count exactly the acknowledged increments before it,
// plus any of the unknown ones (which may or may not have been written).
// A read that finds the value block not valid starts the count again from
// what it read. Two increments reading the same valid value, or a valid
// value below the acknowledged count, is a lost update; a value above what
// the increments could have written came from nowhere.
//
// held are the belief intervals of the counter's resource (History.Held).
// The value lives as long as some lock is on the resource: a read that
// finds it empty starts the count again from zero, and is no violation,
// if at some moment since the read before it no client believed it held
// a lock on the resource (every lock may have gone, and the resource with
// it). With locks believed held all along, an empty read is a lost update.
// An increment recorded more than once (Pending, then its outcome)
// counts once, as its last record says.
func CheckCounterHeld(incs []Increment, final *CounterRead, held []Interval) CounterResult {
	incs = latest(incs)
	slices.SortStableFunc(incs, func(a, b Increment) int { return cmp.Compare(a.Granted, b.Granted) })
	var res CounterResult
	res.Final = final
	// lo and hi bound the value the counter holds: lo counts the
	// acknowledged increments, hi adds the unknown ones.
	var lo, hi int64
	var last string         // the latest increment, for messages
	var since time.Duration // when the value was last read
	judge := func(what string, at time.Duration, v int64, valid, empty bool) {
		gap := empty && valid && uncovered(held, since, at)
		since = at
		switch {
		case gap:
			res.Recreated++
			if v < lo {
				res.Lost += lo - v
			}
		case !valid:
			res.Invalidated++
			if v < lo {
				res.Flagged += lo - v
			}
		case v < lo:
			res.Violations = append(res.Violations, fmt.Sprintf(
				"%s read %d, but %d acknowledged increments came before it (after %s): an update was lost", what, v, lo, last))
		case v > hi:
			res.Violations = append(res.Violations, fmt.Sprintf(
				"%s read %d, but the increments before it could have written at most %d (after %s)", what, v, hi, last))
		}
		lo, hi = v, v
	}
	for _, in := range incs {
		if in.Frozen && in.Outcome != OK {
			// Granted at some moment from its call to its return,
			// across a freeze: its read is of that moment. A write
			// it may have made counts as unknown; an acknowledged
			// one (a stale read written back) is judged below like
			// any other.
			res.Paused++
			if in.Outcome == Fail {
				res.Failed++
			} else {
				res.Unknown++
				hi++
			}
			continue
		}
		what := fmt.Sprintf("the increment by client %d on %s granted at %s", in.Client, in.Node, fmtTime(in.Granted))
		judge(what, in.Granted, in.Read, in.Valid, in.Empty)
		switch in.Outcome {
		case OK:
			res.Acked++
			lo, hi = lo+1, hi+1
		case Fail:
			res.Failed++
		default:
			res.Unknown++
			hi++
		}
		last = fmt.Sprintf("%s, which read %d and ended %v", what, in.Read, in.Outcome)
	}
	if final != nil {
		at := final.At
		if at == 0 {
			at = since
		}
		judge("the final read", at, final.Value, final.Valid, final.Empty)
	}
	return res
}

// uncovered reports whether some moment in (from, to) is in none of the
// intervals.
func uncovered(intervals []Interval, from, to time.Duration) bool {
	if len(intervals) == 0 || from >= to {
		return false
	}
	ivs := slices.Clone(intervals)
	slices.SortFunc(ivs, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	covered := from // every moment in (from, covered] is in some interval
	for _, iv := range ivs {
		if iv.End <= covered {
			continue
		}
		if iv.Start > covered {
			return covered < to
		}
		covered = iv.End
		if covered >= to {
			return false
		}
	}
	return covered < to
}

// latest returns incs with each increment (a client, node and grant time)
// once: its last record, which replaces a Pending one.
func latest(incs []Increment) []Increment {
	type key struct {
		client  int
		node    string
		granted time.Duration
	}
	at := make(map[key]int, len(incs))
	out := make([]Increment, 0, len(incs))
	for _, in := range incs {
		k := key{in.Client, in.Node, in.Granted}
		if i, ok := at[k]; ok {
			out[i] = in
			continue
		}
		at[k] = len(out)
		out = append(out, in)
	}
	return out
}
