package check

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/seed-a6839e30/dlm/modes"
)

// MaxClients is the most clients one resource may have in a history checked
// with ModesModel or MutexModel: the modes model's state is a fixed array so
// that states compare with ==.
const MaxClients = 32

// LockInput is the input of an operation of MutexModel and ModesModel.
type LockInput struct {
	Resource string     // partition key
	Client   int        // 0 <= Client < MaxClients
	Kind     Kind       // Acquire, Convert, Release or Lost
	Mode     modes.Mode // Acquire, Convert: the mode requested
	// From, if CheckFrom, is the mode the client held when it asked for a
	// Convert. It keeps a client's own operations in order when they
	// share a timestamp, which porcupine would otherwise treat as
	// concurrent.
	From      modes.Mode
	CheckFrom bool
	// Lock, if not 0, names the lock (in practice, the acquire that
	// created it) that a Convert, Release or Lost is about, or that an
	// Acquire creates. A late operation of unknown outcome then cannot
	// touch a later lock of the same client.
	Lock int
	// Permits and Limit, for SemaphoreModel: the permits an Acquire asks
	// for, of a semaphore of Limit.
	Permits, Limit int
}

// LockOutput is the output of an operation of MutexModel and ModesModel.
type LockOutput struct {
	Outcome Outcome    // OK, Fail or Unknown (Pending counts as Unknown)
	Mode    modes.Mode // Acquire, Convert with Outcome OK: the mode granted
}

// MutexState is the state of MutexModel: the holding client, or -1 when the
// lock is free.
type MutexState int

// MutexModel is verification.md's model 1: an exclusive lock whose
// operations may have indeterminate outcomes. It is nondeterministic:
//
//   - Acquire OK is legal only when the lock is free, and the client then
//     holds it. Acquire Fail has no effect. Acquire Unknown, when the lock
//     is free, leads to two states: still free, or held by the client;
//     when it is held it has no effect.
//   - Release OK by the holder frees the lock; by anyone else it is
//     illegal. Release Unknown or Fail by the holder leads to two states,
//     held or free: an unlock fails when the lock was already lost, which
//     the history may not show yet.
//   - Lost (a synthetic release: the lock ended for the client without a
//     checkable release) frees the lock if the client holds it, and is
//     never illegal.
//
// Convert and Mode are ignored: use it for histories of EX locks only.
// Record an Unknown operation with Return = math.MaxInt64 (Jepsen's :info),
// so that it may take effect at any moment after its call. The model
// partitions by resource.
func MutexModel() porcupine.Model {
	nm := mutexNM()
	return nm.ToModel()
}

// mutexNM is MutexModel before porcupine turns it into a model over sets of states.
func mutexNM() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init:           func() []any { return []any{MutexState(-1)} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(MutexState), input.(LockInput), output.(LockOutput)
			c := MutexState(in.Client)
			switch in.Kind {
			case Acquire:
				switch out.Outcome {
				case OK:
					if s == -1 {
						return []any{c}
					}
					return nil
				case Fail:
					return []any{s}
				default:
					if s == -1 {
						return []any{s, c}
					}
					return []any{s}
				}
			case Release, Lost:
				if s != c {
					if in.Kind == Release && out.Outcome == OK {
						return nil
					}
					return []any{s}
				}
				if out.Outcome == OK {
					return []any{MutexState(-1)}
				}
				return []any{s, MutexState(-1)}
			}
			return []any{s}
		},
		Hash:              func(state any) uint64 { return uint64(state.(MutexState) + 1) },
		DescribeOperation: describeLockOp,
		DescribeState: func(state any) string {
			if s := state.(MutexState); s >= 0 {
				return fmt.Sprintf("held by c%d", s)
			}
			return "free"
		},
		DescribeOperationMetadata: describeMetadata,
	}
}

// ModesState is the state of ModesModel: for each client, 0 when it holds
// nothing, or 1 + the mode it holds, and the id of the lock it holds.
type ModesState struct {
	Modes [MaxClients]uint8
	Locks [MaxClients]int
}

// Held returns the mode client holds, and whether it holds one.
func (s ModesState) Held(client int) (modes.Mode, bool) {
	if client < 0 || client >= MaxClients || s.Modes[client] == 0 {
		return 0, false
	}
	return modes.Mode(s.Modes[client] - 1), true
}

// admits reports whether client may hold m alongside every other client.
func (s ModesState) admits(client int, m modes.Mode) bool {
	if !m.Valid() {
		return false
	}
	for c, v := range s.Modes {
		if c != client && v != 0 && !modes.Compatible(modes.Mode(v-1), m) {
			return false
		}
	}
	return true
}

// holds reports whether client holds lock (any lock, if lock is 0).
func (s ModesState) holds(client, lock int) bool {
	return s.Modes[client] != 0 && (lock == 0 || s.Locks[client] == lock)
}

func (s ModesState) with(client int, m modes.Mode, lock int) ModesState {
	s.Modes[client], s.Locks[client] = uint8(m)+1, lock
	return s
}

func (s ModesState) without(client int) ModesState {
	s.Modes[client], s.Locks[client] = 0, 0
	return s
}

func (s ModesState) String() string {
	var parts []string
	for c := range s.Modes {
		if m, ok := s.Held(c); ok {
			parts = append(parts, fmt.Sprintf("c%d:%v", c, m))
		}
	}
	if len(parts) == 0 {
		return "free"
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// ModesModel is verification.md's model 2: the six-mode VMS lock on one
// resource, extended with model 1's handling of indeterminate outcomes.
//
//   - Acquire or Convert OK is legal iff the granted mode is compatible
//     with the mode of every other client that holds the resource, and
//     the client holds nothing (Acquire) or holds the lock, in From if
//     CheckFrom is set (Convert); the client then holds the granted mode.
//     Fail has no effect. Unknown, when the same conditions hold for the
//     requested mode, leads to two states: unchanged, or the client
//     holding the requested mode; otherwise it has no effect.
//   - Release OK is illegal unless the client holds the lock, and ends
//     it. Unknown or Fail lead to held or free (an unlock fails when the
//     lock was already lost).
//   - Lost (synthetic release) ends the client's lock if it holds it and
//     is never illegal.
//
// "The lock" is the one LockInput.Lock names, or whatever the client holds
// if Lock is 0. Naming the lock and checking From keep a client's own
// operations in their real order when porcupine cannot tell it from the
// timestamps: equal timestamps are concurrent, and an Unknown operation
// may take effect at any later point.
//
// A Client outside 0..MaxClients-1 makes the operation illegal. The model
// partitions by resource.
func ModesModel() porcupine.Model {
	nm := modesNM()
	return nm.ToModel()
}

// modesNM is ModesModel before porcupine turns it into a model over sets of states.
func modesNM() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init:           func() []any { return []any{ModesState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(ModesState), input.(LockInput), output.(LockOutput)
			c := in.Client
			if c < 0 || c >= MaxClients {
				return nil
			}
			cur, held := s.Held(c)
			mine := s.holds(c, in.Lock)
			switch in.Kind {
			case Acquire, Convert:
				// Whether the client is in a state to make this call:
				// a new lock needs none held, a conversion needs it.
				fits := !held
				lock := in.Lock
				if in.Kind == Convert {
					fits = mine && (!in.CheckFrom || cur == in.From)
					lock = s.Locks[c]
				}
				switch out.Outcome {
				case OK:
					if fits && s.admits(c, out.Mode) {
						return []any{s.with(c, out.Mode, lock)}
					}
					return nil
				case Fail:
					return []any{s}
				default:
					if fits && s.admits(c, in.Mode) {
						return []any{s, s.with(c, in.Mode, lock)}
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
				if out.Outcome == OK {
					return []any{s.without(c)}
				}
				return []any{s, s.without(c)}
			}
			return []any{s}
		},
		Hash: func(state any) uint64 {
			// The modes as base-8 digits and the lock ids, folded
			// FNV-style so that all MaxClients of them count.
			st := state.(ModesState)
			h := uint64(14695981039346656037)
			for c, v := range st.Modes {
				h = (h ^ uint64(v) ^ uint64(st.Locks[c])<<3) * 1099511628211
			}
			return h
		},
		DescribeOperation:         describeLockOp,
		DescribeState:             func(state any) string { return state.(ModesState).String() },
		DescribeOperationMetadata: describeMetadata,
	}
}

func describeLockOp(input, output any) string {
	in, out := input.(LockInput), output.(LockOutput)
	var op string
	switch in.Kind {
	case Acquire, Convert:
		op = fmt.Sprintf("c%d %s %v", in.Client, in.Kind, in.Mode)
	default:
		op = fmt.Sprintf("c%d %s", in.Client, in.Kind)
	}
	switch {
	case in.Kind == Lost && out.Outcome == OK:
		return op
	case out.Outcome == OK && (in.Kind == Acquire || in.Kind == Convert):
		return fmt.Sprintf("%s → granted %v", op, out.Mode)
	}
	return fmt.Sprintf("%s → %v", op, out.Outcome)
}

// RegisterInput is the input of an operation of RegisterModel.
type RegisterInput struct {
	Key   string // partition key
	Kind  Kind   // Write or Read
	Token uint64 // Write: the fencing token
	Value int64  // Write: the value
}

// RegisterOutput is the output of an operation of RegisterModel.
type RegisterOutput struct {
	// Outcome of a Write: OK (accepted), Rejected, Fail (never reached the
	// store) or Unknown. Of a Read: OK, or anything else for no value.
	Outcome Outcome
	Value   int64 // Read with Outcome OK: the value read
}

// RegisterState is the state of RegisterModel: the highest token accepted
// and the value of the latest accepted write (0, 0 initially).
type RegisterState struct {
	Max   uint64
	Value int64
}

// RegisterModel is verification.md's model 3: a register protected by
// fencing tokens.
//
//   - Write OK (accepted) is legal iff its token is >= the highest token
//     accepted so far (equal tokens let one holder write repeatedly); it
//     then sets the token and the value. Write Rejected is legal iff its
//     token is < that maximum. Fail has no effect. Unknown leads to two
//     states when the write would be accepted, unchanged or written.
//   - Read OK must return the current value; a read with another outcome
//     has no effect.
//
// The model partitions by key.
func RegisterModel() porcupine.Model {
	nm := registerNM()
	return nm.ToModel()
}

// registerNM is RegisterModel before porcupine turns it into a model over sets of states.
func registerNM() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init:           func() []any { return []any{RegisterState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(RegisterState), input.(RegisterInput), output.(RegisterOutput)
			if in.Kind == Read {
				if out.Outcome == OK && out.Value != s.Value {
					return nil
				}
				return []any{s}
			}
			fresh := in.Token >= s.Max
			written := RegisterState{Max: in.Token, Value: in.Value}
			switch out.Outcome {
			case OK:
				if fresh {
					return []any{written}
				}
				return nil
			case Rejected:
				if fresh {
					return nil
				}
				return []any{s}
			case Fail:
				return []any{s}
			default:
				if fresh {
					return []any{s, written}
				}
				return []any{s}
			}
		},
		Hash: func(state any) uint64 {
			s := state.(RegisterState)
			return s.Max*1099511628211 ^ uint64(s.Value)
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(RegisterInput), output.(RegisterOutput)
			if in.Kind == Read {
				if out.Outcome == OK {
					return fmt.Sprintf("read → %d", out.Value)
				}
				return fmt.Sprintf("read → %v", out.Outcome)
			}
			res := out.Outcome.String()
			if out.Outcome == OK {
				res = "accepted"
			}
			return fmt.Sprintf("write %d token %d → %s", in.Value, in.Token, res)
		},
		DescribeState: func(state any) string {
			s := state.(RegisterState)
			return fmt.Sprintf("max token %d, value %d", s.Max, s.Value)
		},
		DescribeOperationMetadata: describeMetadata,
	}
}

func describeMetadata(m any) string {
	if m == nil {
		return ""
	}
	return fmt.Sprint(m)
}

// partitionKey returns the resource or key an operation's input names.
func partitionKey(input any) string {
	switch in := input.(type) {
	case LockInput:
		return in.Resource
	case RegisterInput:
		return in.Key
	}
	return ""
}

// partitionOps splits a history by resource (or key), keeping the order of
// first appearance so that results are deterministic.
func partitionOps(history []porcupine.Operation) [][]porcupine.Operation {
	idx := make(map[string]int)
	var out [][]porcupine.Operation
	for _, op := range history {
		k := partitionKey(op.Input)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// partitionEvents is partitionOps for events: a return goes with its call.
func partitionEvents(history []porcupine.Event) [][]porcupine.Event {
	idx := make(map[string]int)
	byID := make(map[int]int)
	var out [][]porcupine.Event
	for _, ev := range history {
		var i int
		if ev.Kind == porcupine.CallEvent {
			k := partitionKey(ev.Value)
			var ok bool
			if i, ok = idx[k]; !ok {
				i = len(out)
				idx[k] = i
				out = append(out, nil)
			}
			byID[ev.Id] = i
		} else {
			var ok bool
			if i, ok = byID[ev.Id]; !ok {
				continue // a return without a call: not a history
			}
		}
		out[i] = append(out[i], ev)
	}
	return out
}
