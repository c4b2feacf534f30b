package check

import (
	"sort"
	"time"
)

// A Fault is a nemesis event at a time of the history, for TimeToGrant.
type Fault struct {
	At   time.Duration `json:"at_ns"`
	Kind string        `json:"kind"`
	// Node is the node it struck, if one.
	Node string `json:"node,omitempty"`
	// Resource is the resource it aimed at (the lock a killed or paused
	// holder held), if one.
	Resource string `json:"resource,omitempty"`
}

// GrantAfter is how long after a fault the service granted again.
type GrantAfter struct {
	Fault
	// Took is the time from the fault to the first grant that returned
	// after it, of Resource to a client of another node when the fault
	// names a resource, else of any resource; Infinity if none did.
	Took time.Duration `json:"took_ns"`
	// Grant is the Seq of that grant, or -1.
	Grant int `json:"grant"`
}

// TimeToGrant returns, for each fault, how long it took until a lock was
// granted again: for a fault aimed at a resource (a killed holder's lock),
// until that resource was granted to a client on another node; otherwise
// until anything was granted.
func TimeToGrant(h *History, faults []Fault) []GrantAfter {
	recs := h.Records()
	var grants []*Record
	for i := range recs {
		if isGrant(&recs[i]) && recs[i].Return != Infinity {
			grants = append(grants, &recs[i])
		}
	}
	grants = sortedBy(grants, returnTime)
	out := make([]GrantAfter, 0, len(faults))
	for _, f := range faults {
		g := GrantAfter{Fault: f, Took: Infinity, Grant: -1}
		first := sort.Search(len(grants), func(i int) bool { return grants[i].Return > f.At })
		for _, r := range grants[first:] {
			if f.Resource != "" && (r.Resource != f.Resource || r.Node == f.Node) {
				continue
			}
			g.Took, g.Grant = r.Return-f.At, r.Seq
			break
		}
		out = append(out, g)
	}
	return out
}

// Mark records a note, like Note, and returns its time in the history: a
// Fault's At.
func (h *History) Mark(tag, text string) time.Duration {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.instant(Record{Kind: Note, Client: -1, Node: tag, Err: text})
	h.logCall("note", i)
	return h.recs[i].Call
}

// Elapsed returns the history's current time without recording anything:
// the offset of now from its first record (0 before any).
func (h *History) Elapsed() time.Duration {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		return 0
	}
	return max(h.now().Sub(h.start), h.last)
}
