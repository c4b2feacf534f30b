package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Counting semaphores (History.AcquirePermits) are checked twice, as
// locks are: directly, on the belief intervals (CheckPermits: at no
// instant do the clients believe they hold more permits of a semaphore
// than it has), and against SemaphoreModel (CheckSemaphoreModel), which
// also places the operations of unknown outcome. Their tokens are checked
// with the locks' (CheckTokens): every grant's token is above those of
// the grants that returned before it was called.

// checkPermits reports, for each semaphore, the moments at which the
// permits its clients believed they held added up to more than it has.
// Intervals are compared strictly, as in checkOverlap.
func checkPermits(intervals []Interval) []Violation {
	byRes := make(map[string][]Interval)
	var order []string
	for _, iv := range intervals {
		if iv.Limit == 0 || iv.End <= iv.Start {
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
			active = append(active, b)
			held := 0
			for _, a := range active {
				held += a.Permits
			}
			if held > b.Limit {
				out = append(out, permitsViolation(b, held, slices.Clone(active)))
			}
		}
	}
	return out
}

func permitsViolation(b Interval, held int, active []Interval) Violation {
	var lines []string
	for _, a := range active {
		lines = append(lines, "    "+a.String())
	}
	msg := fmt.Sprintf("semaphore %q: from %s its clients believed they held %d permits, it has %d:\n%s",
		b.Resource, fmtTime(b.Start), held, b.Limit, strings.Join(lines, "\n"))
	return Violation{Check: CheckPermits, Resource: b.Resource, Message: msg, Intervals: active}
}

// SemaphoreState is the state of SemaphoreModel: the permits each client
// holds (0: none) and the id of the acquisition that gave them.
type SemaphoreState struct {
	Held  [MaxClients]uint32
	Locks [MaxClients]int
}

func (s SemaphoreState) total() int {
	n := 0
	for _, v := range s.Held {
		n += int(v)
	}
	return n
}

func (s SemaphoreState) String() string {
	var parts []string
	for c, v := range s.Held {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("c%d:%d", c, v))
		}
	}
	if len(parts) == 0 {
		return "none held"
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// SemaphoreModel is a counting semaphore whose operations may have
// indeterminate outcomes, in the manner of ModesModel:
//
//   - Acquire OK of n permits is legal iff the client holds none and the
//     permits held by all, plus n, are at most the semaphore's
//     (LockInput.Limit); the client then holds n. Fail has no effect.
//     Unknown, when it would be legal, leads to two states: unchanged, or
//     the client holding n; otherwise it has no effect.
//   - Release OK is illegal unless the client holds the permits, and
//     frees them. Unknown or Fail lead to held or free.
//   - Lost frees the client's permits if it holds them and is never
//     illegal.
//
// It partitions by resource (the semaphore's name).
func SemaphoreModel() porcupine.Model {
	nm := semaphoreNM()
	return nm.ToModel()
}

// semaphoreNM is SemaphoreModel before porcupine turns it into a model over sets of states.
func semaphoreNM() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init:           func() []any { return []any{SemaphoreState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(SemaphoreState), input.(LockInput), output.(LockOutput)
			c := in.Client
			if c < 0 || c >= MaxClients {
				return nil
			}
			mine := s.Held[c] != 0 && (in.Lock == 0 || s.Locks[c] == in.Lock)
			switch in.Kind {
			case Acquire:
				fits := s.Held[c] == 0 && in.Permits > 0 && s.total()+in.Permits <= in.Limit
				with := s
				with.Held[c], with.Locks[c] = uint32(in.Permits), in.Lock
				switch out.Outcome {
				case OK:
					if fits {
						return []any{with}
					}
					return nil
				case Fail:
					return []any{s}
				default:
					if fits {
						return []any{s, with}
					}
					return []any{s}
				}
			case Release, Lost:
				if !mine {
					if in.Kind == Release && out.Outcome == OK {
						return nil
					}
					return []any{s}
				}
				without := s
				without.Held[c], without.Locks[c] = 0, 0
				if out.Outcome == OK {
					return []any{without}
				}
				return []any{s, without}
			}
			return nil // a semaphore has no conversions
		},
		Hash: func(state any) uint64 {
			st := state.(SemaphoreState)
			h := uint64(14695981039346656037)
			for c, v := range st.Held {
				h = (h ^ uint64(v) ^ uint64(st.Locks[c])<<24) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(LockInput), output.(LockOutput)
			op := fmt.Sprintf("c%d %s", in.Client, in.Kind)
			if in.Kind == Acquire {
				op = fmt.Sprintf("c%d acquire %d of %d", in.Client, in.Permits, in.Limit)
			}
			if in.Kind == Lost && out.Outcome == OK {
				return op
			}
			return fmt.Sprintf("%s → %v", op, out.Outcome)
		},
		DescribeState:             func(state any) string { return state.(SemaphoreState).String() },
		DescribeOperationMetadata: describeMetadata,
	}
}

// semaphoreModels runs SemaphoreModel on the history of each semaphore.
func (c *checker) semaphoreModels(sems map[string]bool) {
	parts := make(map[string][]porcupine.Operation)
	clients := make(map[string]map[int]int)
	limit := make(map[string]int)
	var order []string
	for _, m := range lockHistory(c.snap.recs) {
		r := m.r
		if !sems[r.Resource] {
			continue
		}
		cl := clients[r.Resource]
		if cl == nil {
			cl = make(map[int]int)
			clients[r.Resource] = cl
			order = append(order, r.Resource)
		}
		idx, ok := cl[r.Client]
		if !ok {
			idx = len(cl)
			cl[r.Client] = idx
		}
		if r.Limit > 0 {
			limit[r.Resource] = max(limit[r.Resource], r.Limit)
		}
		if m.skip {
			continue
		}
		parts[r.Resource] = append(parts[r.Resource], porcupine.Operation{
			ClientId: idx,
			Input:    LockInput{Resource: r.Resource, Client: idx, Kind: m.kind, Lock: r.lock, Permits: r.Permits, Limit: r.Limit},
			Call:     int64(r.Call),
			Output:   LockOutput{Outcome: m.out},
			Return:   int64(m.ret),
			Metadata: opMeta{seq: r.Seq, text: r.summary()},
		})
	}
	slices.Sort(order)
	for _, res := range order {
		if n := len(clients[res]); n > MaxClients {
			c.res.Inconclusive = append(c.res.Inconclusive, Inconclusive{Check: CheckSemaphoreModel, Resource: res,
				Reason: fmt.Sprintf("%d clients; the semaphore model handles at most %d per semaphore", n, MaxClients)})
			continue
		}
		c.runModel(CheckSemaphoreModel, "semaphore", semaphoreSegModel(), res, parts[res])
	}
}

// semaphores names the resources of the history that are semaphores, and
// reports a resource used both ways, or with two permit counts, as a
// misuse: the checks of one would be wrong for the other.
func (c *checker) semaphores() map[string]bool {
	sems, locks := make(map[string]int), make(map[string]bool)
	for i := range c.snap.recs {
		r := &c.snap.recs[i]
		switch {
		case r.Kind != Acquire && r.Kind != Convert:
		case r.Limit > 0:
			if l, ok := sems[r.Resource]; ok && l != r.Limit {
				c.report(Violation{Check: CheckHistory, Resource: r.Resource,
					Message: fmt.Sprintf("%s: semaphore %q was acquired as one of %d permits before", r.describe(), r.Resource, l)})
			}
			sems[r.Resource] = r.Limit
		default:
			locks[r.Resource] = true
		}
	}
	out := make(map[string]bool, len(sems))
	for res := range sems {
		if locks[res] {
			c.report(Violation{Check: CheckHistory, Resource: res,
				Message: fmt.Sprintf("%q is acquired both as a semaphore and as a lock in a mode", res)})
		}
		out[res] = true
	}
	return out
}
