package check

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// A Window is a stretch [From, To) of a history's time.
type Window struct {
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
}

// Len is the window's length.
func (w Window) Len() time.Duration { return w.To - w.From }

// AvailabilityOptions say how MeasureAvailability probes the service.
type AvailabilityOptions struct {
	// Prefix selects the probes: Acquires of resources whose names start
	// with it. Probe clients loop: acquire with a deadline, release,
	// acquire again.
	Prefix string
	// Slot is the resolution: the windows are cut into slots this long
	// (default 100 ms), each judged available or not.
	Slot time.Duration
	// Within is how soon a probe must be granted to count as a success
	// (default 1 s): a lock that takes longer could not "be had".
	Within time.Duration
}

// Availability is the share of time a lock could be had.
type Availability struct {
	// Measured is the total length of the windows.
	Measured time.Duration `json:"measured_ns"`
	// Slots were judged: a probe called in the slot was granted within
	// Within (Available), or a probe in flight over the slot failed, timed
	// out or took too long.
	Slots     int `json:"slots"`
	Available int `json:"available"`
	// Unprobed slots had no probe called in them nor in flight over them;
	// they are left out of Share.
	Unprobed int `json:"unprobed"`
	// Share is Available / Slots (1 when no slot was judged).
	Share float64 `json:"share"`
	// Gaps are the longest stretches of consecutive unavailable slots,
	// longest first (at most 10).
	Gaps []Window `json:"gaps"`
	// PerResource is each probe resource judged by its own probes.
	PerResource ResourceAvailability `json:"per_resource"`
}

// ResourceAvailability sums up the probe resources' availability, each
// judged alone (slots in which none of its own probes was called nor in
// flight are left out of its share).
type ResourceAvailability struct {
	// Resources is how many probe resources had a slot judged.
	Resources int `json:"resources"`
	// Mean is the mean of their shares; Min the lowest, Worst its
	// resource.
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	Worst string  `json:"worst,omitempty"`
}

// MeasureAvailability judges, slot by slot over windows (the times the
// service should be available, say while a majority of nodes is up and
// connected), whether a lock could be had: a slot is available when some
// probe called in it, or waiting at its start, was granted within o.Within
// of its call; it is unavailable when a probe called in it or waiting over
// it was not (refused, timed out, slower than Within). Any probe
// counts, whichever node it went through, so a partitioned minority's
// probes failing does not count against a majority that served.
//
// Beside it, PerResource judges each probe resource by its own probes
// alone: what a program that needs that one resource sees, for which a
// failure of the resource's master costs the time to the next view even
// while every other resource is served.
func MeasureAvailability(h *History, windows []Window, o AvailabilityOptions) Availability {
	if o.Slot <= 0 {
		o.Slot = 100 * time.Millisecond
	}
	if o.Within <= 0 {
		o.Within = time.Second
	}
	var probes []*Record
	byRes := map[string][]*Record{}
	recs := h.Records()
	for i := range recs {
		r := &recs[i]
		if r.Kind == Acquire && strings.HasPrefix(r.Resource, o.Prefix) {
			probes = append(probes, r)
			byRes[r.Resource] = append(byRes[r.Resource], r)
		}
	}
	a := judgeSlots(probes, windows, o)
	pr := ResourceAvailability{Resources: len(byRes), Min: 1}
	var sum float64
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		ra := judgeSlots(byRes[res], windows, o)
		if ra.Slots == 0 {
			pr.Resources--
			continue
		}
		sum += ra.Share
		if ra.Share < pr.Min {
			pr.Min, pr.Worst = ra.Share, res
		}
	}
	pr.Mean = 1
	if pr.Resources > 0 {
		pr.Mean = sum / float64(pr.Resources)
	}
	a.PerResource = pr
	return a
}

// judgeSlots is MeasureAvailability's judgement over one set of probes.
func judgeSlots(probes []*Record, windows []Window, o AvailabilityOptions) Availability {
	slices.SortFunc(probes, func(a, b *Record) int { return cmp.Compare(a.Call, b.Call) })
	// busyUntil[i]: the latest end of a probe's flight among probes[:i+1],
	// a probe being in flight from its call until it returned, at most
	// Within.
	busyUntil := make([]time.Duration, len(probes))
	var latest time.Duration
	for i, p := range probes {
		end := p.Return
		if end == Infinity || end-p.Call > o.Within {
			end = p.Call + o.Within
		}
		latest = max(latest, end)
		busyUntil[i] = latest
	}
	var a Availability
	var gap *Window
	var gaps []Window
	closeGap := func() {
		if gap != nil {
			gaps = append(gaps, *gap)
			gap = nil
		}
	}
	for _, w := range windows {
		if w.To <= w.From {
			continue
		}
		a.Measured += w.Len()
		for s := w.From; s+o.Slot <= w.To; s += o.Slot {
			e := s + o.Slot
			lo, _ := slices.BinarySearchFunc(probes, s, func(p *Record, t time.Duration) int { return cmp.Compare(p.Call, t) })
			hi, _ := slices.BinarySearchFunc(probes, e, func(p *Record, t time.Duration) int { return cmp.Compare(p.Call, t) })
			ok, judged := false, hi > lo
			for _, p := range probes[lo:hi] {
				if p.Outcome == OK && p.Return != Infinity && p.Return-p.Call <= o.Within {
					ok = true
					break
				}
			}
			if !judged && lo > 0 && busyUntil[lo-1] > s {
				judged = true // a probe called earlier was still waiting
			}
			// A probe called earlier and still waiting at the slot's
			// start, granted within Within of its call: a lock asked
			// for in this slot would have been had by then, sooner
			// than Within.
			for i := lo - 1; !ok && i >= 0 && probes[i].Call >= s-o.Within; i-- {
				if p := probes[i]; p.Outcome == OK && p.Return != Infinity && p.Return > s && p.Return-p.Call <= o.Within {
					ok, judged = true, true
				}
			}
			switch {
			case !judged:
				a.Unprobed++
				closeGap()
			case ok:
				a.Slots++
				a.Available++
				closeGap()
			default:
				a.Slots++
				if gap == nil {
					gap = &Window{From: s}
				}
				gap.To = e
			}
		}
		closeGap()
	}
	a.Share = 1
	if a.Slots > 0 {
		a.Share = float64(a.Available) / float64(a.Slots)
	}
	slices.SortStableFunc(gaps, func(x, y Window) int { return cmp.Compare(y.Len(), x.Len()) })
	a.Gaps = gaps[:min(len(gaps), 10)]
	return a
}
