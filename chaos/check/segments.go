package check

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// A long run's history of one resource is too long for porcupine in one
// piece: its cache keeps, for every state it reaches, the set of the
// operations linearized so far, a bitset as long as the history, so its
// memory grows as the square of the history (an hour of a chaos run: more
// than 20 GB). The segmented check below cuts the history at the moments
// no operation with a known outcome is open (every one called before
// returned before), which in a lock history come every few operations,
// and carries across each cut the set of states the operations before it
// can leave, with the operations of unknown outcome that could still take
// effect. The check is exact: a resource's history is linearizable under
// the model iff some carried configuration survives its last segment.
//
// Real-time order gives the cut: every operation of a segment returned
// before any of the next segment's was called, so in any linearization
// they come first. An operation of unknown outcome (Return Infinity) may
// take effect at any moment after its call, in any later segment or never:
// it is carried as pending until it is linearized or cannot matter any
// more (deadOp).

// segModel is a model for the segmented check.
type segModel struct {
	nm porcupine.NondeterministicModel
	// dead reports whether a pending operation of unknown outcome can be
	// dropped in state s (taken as never having taken effect) without
	// losing a linearization: every order that applies it later is matched
	// by one that does not. others reports whether an operation other than
	// op, of the same client and lock, is still to come (called at or
	// after the cut, or pending itself).
	dead func(s any, op porcupine.Operation, others bool) bool
	// key groups the operations dead asks others about (a client and
	// lock); ok false for an operation that never goes dead.
	key func(op porcupine.Operation) (k [2]int, ok bool)
}

// lockSegModel: an operation of unknown outcome on a lock (by its id) can
// matter only while something of that lock is still to come or while it
// could free what the client holds. An Acquire that nothing later relies
// on only adds a holder, which never makes another operation legal; a
// Convert or Release of a lock the client no longer holds is a no-op, and
// stays one once nothing can create that lock again.
func lockSegModel(nm porcupine.NondeterministicModel, holds func(s any, client, lock int) bool) segModel {
	return segModel{nm: nm,
		key: func(op porcupine.Operation) ([2]int, bool) {
			in := op.Input.(LockInput)
			return [2]int{in.Client, in.Lock}, in.Lock != 0
		},
		dead: func(s any, op porcupine.Operation, others bool) bool {
			in := op.Input.(LockInput)
			if in.Lock == 0 || others {
				return false
			}
			return in.Kind == Acquire || !holds(s, in.Client, in.Lock)
		}}
}

func modesSegModel() segModel {
	return lockSegModel(modesNM(), func(s any, c, l int) bool { return s.(ModesState).holds(c, l) })
}

func semaphoreSegModel() segModel {
	return lockSegModel(semaphoreNM(), func(s any, c, l int) bool {
		st := s.(SemaphoreState)
		return st.Held[c] != 0 && st.Locks[c] == l
	})
}

// mutexSegModel: the mutex model ignores lock ids, so an operation goes
// dead only once nothing of its client is still to come.
func mutexSegModel() segModel {
	return segModel{nm: mutexNM(),
		key: func(op porcupine.Operation) ([2]int, bool) { return [2]int{op.Input.(LockInput).Client, 0}, true },
		dead: func(s any, op porcupine.Operation, others bool) bool {
			in := op.Input.(LockInput)
			if others {
				return false
			}
			return in.Kind == Acquire || s.(MutexState) != MutexState(in.Client)
		}}
}

// registerSegModel: a write of unknown outcome whose token is below the
// highest accepted can never be accepted any more (the highest only
// grows).
func registerSegModel() segModel {
	return segModel{nm: registerNM(),
		key: func(porcupine.Operation) ([2]int, bool) { return [2]int{}, false },
		dead: func(s any, op porcupine.Operation, _ bool) bool {
			in := op.Input.(RegisterInput)
			return in.Kind == Read || in.Token < s.(RegisterState).Max
		}}
}

// segLimits bound a segmented check.
type segLimits struct {
	maxSteps int64     // model steps over the whole resource
	deadline time.Time // wall clock
	// maxConfigs bounds the configurations carried across a cut.
	maxConfigs int
}

// segOutcome is what the segmented check found.
type segOutcome struct {
	verdict porcupine.CheckResult
	reason  string // Unknown: why
	steps   int64
	// Segments, and the largest (in operations).
	segments, largest int
	// Illegal: the segment no configuration got through, the states it
	// started from and the pending operations carried into it.
	failed      []porcupine.Operation
	startStates []any
	from, to    time.Duration
}

// config is a state and the pending operations (indexes into the
// resource's operations) that may still take effect.
type config struct {
	state   any
	pending []int
}

func (c config) pendingKey() string {
	var b strings.Builder
	for _, p := range c.pending {
		b.WriteString(strconv.Itoa(p))
		b.WriteByte(',')
	}
	return b.String()
}

// checkSegmented decides whether ops is linearizable under m.
func checkSegmented(m segModel, ops []porcupine.Operation, lim segLimits) segOutcome {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	floating := func(i int) bool { return ops[i].Return == math.MaxInt64 }
	// The last call of each (client, lock) key, for dead's others.
	lastCall := make(map[[2]int]int64)
	for _, op := range ops {
		if k, ok := m.key(op); ok {
			lastCall[k] = max(lastCall[k], op.Call)
		}
	}
	var out segOutcome
	configs := []config{}
	for _, s := range m.nm.Init() {
		configs = append(configs, config{state: s})
	}
	var steps int64
	for start := 0; start < len(ops); {
		// The segment: up to the first call after every known return so
		// far.
		end, maxRet := start, int64(math.MinInt64)
		for end < len(ops) && (end == start || ops[end].Call <= maxRet) {
			if !floating(end) {
				maxRet = max(maxRet, ops[end].Return)
			}
			end++
		}
		out.segments++
		out.largest = max(out.largest, end-start)
		var next []config
		seen := make(map[configKey]bool)
		groups := groupByPending(configs)
		for _, g := range groups {
			ends, n, why := exploreSegment(m, ops, start, end, g, &steps, lim)
			if why != "" {
				out.verdict, out.reason, out.steps = porcupine.Unknown, why, n
				return out
			}
			for _, c := range ends {
				k := configKey{state: c.state, pending: c.pendingKey()}
				if !seen[k] {
					seen[k] = true
					next = append(next, c)
				}
			}
		}
		if len(next) == 0 {
			out.verdict, out.steps = porcupine.Illegal, steps
			pend := make(map[int]bool)
			for _, c := range configs {
				out.startStates = append(out.startStates, c.state)
				for _, p := range c.pending {
					pend[p] = true
				}
			}
			for _, p := range slices.Sorted(mapsKeys(pend)) {
				out.failed = append(out.failed, ops[p])
			}
			out.failed = append(out.failed, ops[start:end]...)
			out.from, out.to = time.Duration(ops[start].Call), time.Duration(maxRet)
			return out
		}
		// Drop the pending operations that can no longer matter.
		var cut int64 = math.MaxInt64
		if end < len(ops) {
			cut = ops[end].Call
		}
		seen = make(map[configKey]bool)
		configs = configs[:0]
		for _, c := range next {
			c.pending = prune(m, ops, c, cut, lastCall)
			k := configKey{state: c.state, pending: c.pendingKey()}
			if !seen[k] {
				seen[k] = true
				configs = append(configs, c)
			}
		}
		if len(configs) > lim.maxConfigs {
			out.verdict, out.steps = porcupine.Unknown, steps
			out.reason = fmt.Sprintf("more than %d states and pending operations to carry past %v", lim.maxConfigs, time.Duration(cut))
			return out
		}
		start = end
	}
	out.verdict, out.steps = porcupine.Ok, steps
	return out
}

type configKey struct {
	state   any
	pending string
}

func mapsKeys(m map[int]bool) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// groupByPending groups configurations that carry the same pending
// operations: one search serves all their states.
func groupByPending(cs []config) [][]config {
	idx := make(map[string]int)
	var out [][]config
	for _, c := range cs {
		k := c.pendingKey()
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}

// prune drops from c's pending operations those dead in its state.
func prune(m segModel, ops []porcupine.Operation, c config, cut int64, lastCall map[[2]int]int64) []int {
	var keep []int
	for _, p := range c.pending {
		op := ops[p]
		k, ok := m.key(op)
		others := false
		if ok {
			others = lastCall[k] >= cut
			for _, q := range c.pending {
				if q != p {
					if k2, ok2 := m.key(ops[q]); ok2 && k2 == k {
						others = true
					}
				}
			}
		}
		if !m.dead(c.state, op, others) {
			keep = append(keep, p)
		}
	}
	return keep
}

// exploreSegment finds every configuration the operations ops[start:end]
// (and the group's pending operations) can leave from the group's states:
// all the segment's operations of known outcome linearized, in an order
// real time allows, each operation of unknown outcome either linearized
// or left pending. It returns a reason if it ran out of budget.
func exploreSegment(m segModel, ops []porcupine.Operation, start, end int, group []config, steps *int64, lim segLimits) ([]config, int64, string) {
	// Local operations: the segment's, then the carried pending ones.
	local := make([]int, 0, end-start+len(group[0].pending))
	for i := start; i < end; i++ {
		local = append(local, i)
	}
	local = append(local, group[0].pending...)
	n := len(local)
	finite := 0
	for _, g := range local {
		if ops[g].Return != math.MaxInt64 {
			finite++
		}
	}
	words := (n + 63) / 64
	type memoKey struct {
		bits  string
		state any
	}
	memo := make(map[memoKey]bool)
	var ends []config
	endSeen := make(map[configKey]bool)
	bits := make([]uint64, words)
	key := func() string {
		b := make([]byte, 0, 8*words)
		for _, w := range bits {
			b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24), byte(w>>32), byte(w>>40), byte(w>>48), byte(w>>56))
		}
		return string(b)
	}
	var why string
	var dfs func(state any, done int)
	dfs = func(state any, done int) {
		if why != "" {
			return
		}
		if done == finite {
			var pend []int
			for j, g := range local {
				if bits[j/64]&(1<<(j%64)) == 0 {
					pend = append(pend, g)
				}
			}
			slices.Sort(pend)
			c := config{state: state, pending: pend}
			if k := (configKey{state: state, pending: c.pendingKey()}); !endSeen[k] {
				endSeen[k] = true
				ends = append(ends, c)
			}
			return
		}
		// Real time: an operation can come next only if no operation
		// still to place returned before its call.
		minRet := int64(math.MaxInt64)
		for j, g := range local {
			if bits[j/64]&(1<<(j%64)) == 0 && ops[g].Return < minRet {
				minRet = ops[g].Return
			}
		}
		for j, g := range local {
			if bits[j/64]&(1<<(j%64)) != 0 || ops[g].Call > minRet {
				continue
			}
			*steps++
			if *steps > lim.maxSteps {
				why = fmt.Sprintf("the model check took more than %d steps", lim.maxSteps)
				return
			}
			if *steps%4096 == 0 && !lim.deadline.IsZero() && time.Now().After(lim.deadline) {
				why = "timed out"
				return
			}
			nexts := m.nm.Step(state, ops[g].Input, ops[g].Output)
			if len(nexts) == 0 {
				continue
			}
			bits[j/64] |= 1 << (j % 64)
			k := key()
			d := done
			if ops[g].Return != math.MaxInt64 {
				d++
			}
			for _, ns := range nexts {
				mk := memoKey{bits: k, state: ns}
				if memo[mk] {
					continue
				}
				memo[mk] = true
				dfs(ns, d)
			}
			bits[j/64] &^= 1 << (j % 64)
			if why != "" {
				return
			}
		}
	}
	for _, c := range group {
		if mk := (memoKey{bits: key(), state: c.state}); !memo[mk] {
			memo[mk] = true
			dfs(c.state, 0)
		}
	}
	return ends, *steps, why
}
