package check

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/seed-a6839e30/dlm/modes"
)

const inf = math.MaxInt64

// lk builds a lock operation on resource "r" for the model tests.
func lk(client int, kind Kind, mode modes.Mode, out Outcome, call, ret int64) porcupine.Operation {
	return lkOn("r", client, kind, mode, out, call, ret)
}

func lkOn(res string, client int, kind Kind, mode modes.Mode, out Outcome, call, ret int64) porcupine.Operation {
	return porcupine.Operation{
		ClientId: client,
		Input:    LockInput{Resource: res, Client: client, Kind: kind, Mode: mode},
		Output:   LockOutput{Outcome: out, Mode: mode},
		Call:     call,
		Return:   ret,
	}
}

// lockOp names the lock an operation is about.
func lockOp(op porcupine.Operation, lock int) porcupine.Operation {
	in := op.Input.(LockInput)
	in.Lock = lock
	op.Input = in
	return op
}

// fromOp sets the mode a conversion starts from.
func fromOp(op porcupine.Operation, from modes.Mode) porcupine.Operation {
	in := op.Input.(LockInput)
	in.From, in.CheckFrom = from, true
	op.Input = in
	return op
}

func wr(key string, token uint64, value int64, out Outcome, call, ret int64) porcupine.Operation {
	return porcupine.Operation{
		Input:  RegisterInput{Key: key, Kind: Write, Token: token, Value: value},
		Output: RegisterOutput{Outcome: out},
		Call:   call, Return: ret,
	}
}

func rd(key string, value int64, call, ret int64) porcupine.Operation {
	return porcupine.Operation{
		Input:  RegisterInput{Key: key, Kind: Read},
		Output: RegisterOutput{Outcome: OK, Value: value},
		Call:   call, Return: ret,
	}
}

type modelCase struct {
	name string
	ops  []porcupine.Operation
	want porcupine.CheckResult
}

// runModelCases checks each case with porcupine and with the segmented
// check of the same model: both must give the verdict the case wants.
func runModelCases(t *testing.T, model porcupine.Model, seg segModel, cases []modelCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := porcupine.CheckOperationsVerbose(model, tc.ops, 0)
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if s := segmentedAll(seg, tc.ops); s != tc.want {
				t.Fatalf("segmented: got %v, want %v", s, tc.want)
			}
		})
	}
}

// segmentedAll runs the segmented check on each partition of ops, as
// Check does per resource.
func segmentedAll(seg segModel, ops []porcupine.Operation) porcupine.CheckResult {
	res := porcupine.Ok
	for _, part := range seg.nm.Partition(ops) {
		switch s := checkSegmented(seg, part, segLimits{maxSteps: 1 << 30, maxConfigs: maxCarried}); s.verdict {
		case porcupine.Illegal:
			return porcupine.Illegal
		case porcupine.Unknown:
			res = porcupine.Unknown
		}
	}
	return res
}

const (
	X = modes.EX
)

func TestMutexModel(t *testing.T) {
	runModelCases(t, MutexModel(), mutexSegModel(), []modelCase{
		// verification.md, model 1: the three verified behaviours.
		{"normal handoff", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(0, Release, X, OK, 20, 30),
			lk(1, Acquire, X, OK, 25, 40), // may be granted while the release is in flight
		}, porcupine.Ok},
		{"second grant before release is split brain", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Acquire, X, OK, 20, 30),
			lk(0, Release, X, OK, 40, 50),
		}, porcupine.Illegal},
		{"later grant after an unknown acquire", []porcupine.Operation{
			lk(0, Acquire, X, Unknown, 0, inf),
			lk(1, Acquire, X, OK, 20, 30),
			lk(1, Release, X, OK, 40, 50),
		}, porcupine.Ok},

		{"unknown acquire then its release: it was granted", []porcupine.Operation{
			lk(0, Acquire, X, Unknown, 0, inf),
			lk(0, Release, X, OK, 10, 20),
		}, porcupine.Ok},
		{"unknown acquire while held has no effect", []porcupine.Operation{
			lk(1, Acquire, X, OK, 0, 5),
			lk(0, Acquire, X, Unknown, 6, inf),
			lk(0, Release, X, OK, 10, 20),
		}, porcupine.Illegal},
		{"release by a non-holder", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Release, X, OK, 20, 30),
		}, porcupine.Illegal},
		{"failed acquire has no effect", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Acquire, X, Fail, 11, 12),
			lk(0, Release, X, OK, 20, 30),
			lk(1, Release, X, Fail, 31, 32),
		}, porcupine.Ok},
		{"failed release may have found the lock lost", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(0, Release, X, Fail, 20, 30),
			lk(1, Acquire, X, OK, 40, 50),
		}, porcupine.Ok},
		{"unknown release may have freed it", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(0, Release, X, Unknown, 20, inf),
			lk(1, Acquire, X, OK, 40, 50),
		}, porcupine.Ok},
		{"grant after a lost", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(0, Lost, X, OK, 20, 20),
			lk(1, Acquire, X, OK, 20, 30),
		}, porcupine.Ok},
		{"grant returned before the lost", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Acquire, X, OK, 11, 19),
			lk(0, Lost, X, OK, 20, 20),
		}, porcupine.Illegal},
		{"equal timestamps are concurrent", []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Acquire, X, OK, 10, 10),
			lk(0, Release, X, OK, 10, 10),
		}, porcupine.Ok},
		{"lost of a lock not held is no violation", []porcupine.Operation{
			lk(0, Lost, X, OK, 0, 0),
			lk(1, Acquire, X, OK, 1, 2),
		}, porcupine.Ok},
	})
}

func TestModesModel(t *testing.T) {
	runModelCases(t, ModesModel(), modesSegModel(), []modelCase{
		// verification.md, model 2: the two verified behaviours.
		{"PR+PR+CR then PW after both PR released", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.PR, OK, 2, 3),
			lk(2, Acquire, modes.CR, OK, 4, 5),
			lk(0, Release, 0, OK, 6, 7),
			lk(1, Release, 0, OK, 8, 9),
			lk(3, Acquire, modes.PW, OK, 10, 11),
		}, porcupine.Ok},
		{"PR overlapping EX", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.EX, OK, 2, 3),
		}, porcupine.Illegal},

		{"PW before the second PR is released", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.PR, OK, 2, 3),
			lk(0, Release, 0, OK, 6, 7),
			lk(3, Acquire, modes.PW, OK, 8, 9),
			lk(1, Release, 0, OK, 10, 11),
		}, porcupine.Illegal},
		{"NL is compatible with EX", []porcupine.Operation{
			lk(0, Acquire, modes.NL, OK, 0, 1),
			lk(1, Acquire, modes.EX, OK, 2, 3),
		}, porcupine.Ok},
		{"up-conversion against another PR", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.PR, OK, 2, 3),
			lk(0, Convert, modes.EX, OK, 4, 5),
		}, porcupine.Illegal},
		{"up-conversion after the other PR left", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.PR, OK, 2, 3),
			lk(0, Convert, modes.EX, OK, 4, 8),
			lk(1, Release, 0, OK, 5, 6),
		}, porcupine.Ok},
		{"down-conversion lets a reader in", []porcupine.Operation{
			lk(0, Acquire, modes.EX, OK, 0, 1),
			lk(0, Convert, modes.PR, OK, 2, 3),
			lk(1, Acquire, modes.PR, OK, 4, 5),
		}, porcupine.Ok},
		{"unknown EX is placed after the PR is released", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.EX, Unknown, 2, inf),
			lk(0, Release, 0, OK, 3, 4),
			lk(1, Release, 0, OK, 5, 6),
		}, porcupine.Ok},
		{"unknown EX cannot be granted while PR is held", []porcupine.Operation{
			lk(0, Acquire, modes.PR, OK, 0, 1),
			lk(1, Acquire, modes.EX, Unknown, 2, inf),
			lk(1, Release, 0, OK, 5, 6),
		}, porcupine.Illegal},
		{"release of nothing", []porcupine.Operation{
			lk(0, Release, 0, OK, 0, 1),
		}, porcupine.Illegal},
		{"lost ends a PW so EX may follow", []porcupine.Operation{
			lk(0, Acquire, modes.PW, OK, 0, 1),
			lk(0, Lost, 0, OK, 5, 5),
			lk(1, Acquire, modes.EX, OK, 5, 6),
		}, porcupine.Ok},
		{"acquire while holding", []porcupine.Operation{
			lk(0, Acquire, modes.CR, OK, 0, 1),
			lk(0, Acquire, modes.CR, OK, 2, 3),
		}, porcupine.Illegal},
		{"convert of nothing", []porcupine.Operation{
			lk(0, Convert, modes.CR, OK, 0, 1),
		}, porcupine.Illegal},
		{"a client's operations at one instant keep their order", []porcupine.Operation{
			// Without From, porcupine could place the convert to CR
			// first and leave client 0 in NL.
			lk(0, Acquire, modes.NL, OK, 0, 0),
			fromOp(lk(0, Convert, modes.NL, OK, 0, 0), modes.NL),
			fromOp(lk(0, Convert, modes.CR, OK, 0, 0), modes.NL),
			lk(1, Acquire, modes.EX, OK, 1, 1),
		}, porcupine.Illegal},
		{"without From the same history passes", []porcupine.Operation{
			lk(0, Acquire, modes.NL, OK, 0, 0),
			lk(0, Convert, modes.NL, OK, 0, 0),
			lk(0, Convert, modes.CR, OK, 0, 0),
			lk(1, Acquire, modes.EX, OK, 1, 1),
		}, porcupine.Ok},
		{"a late unknown release cannot end a later lock", []porcupine.Operation{
			lockOp(lk(0, Acquire, modes.EX, OK, 0, 0), 1),
			lockOp(lk(0, Release, 0, Unknown, 0, inf), 1),
			lockOp(lk(0, Lost, 0, OK, 0, 0), 1), // clean-up of lock 1
			lockOp(lk(0, Acquire, modes.EX, OK, 0, 0), 2),
			lk(1, Acquire, modes.EX, OK, 1, 1),
		}, porcupine.Illegal},
		{"without lock ids it could", []porcupine.Operation{
			lk(0, Acquire, modes.EX, OK, 0, 0),
			lk(0, Release, 0, Unknown, 0, inf),
			lk(0, Lost, 0, OK, 0, 0),
			lk(0, Acquire, modes.EX, OK, 0, 0),
			lk(1, Acquire, modes.EX, OK, 1, 1),
		}, porcupine.Ok},
		{"client out of range", []porcupine.Operation{
			lk(MaxClients, Acquire, modes.CR, OK, 0, 1),
		}, porcupine.Illegal},
	})
}

func TestRegisterModel(t *testing.T) {
	runModelCases(t, RegisterModel(), registerSegModel(), []modelCase{
		// verification.md, model 3: Kleppmann's example.
		{"store accepts 33 after 34", []porcupine.Operation{
			wr("k", 34, 1, OK, 0, 1),
			wr("k", 33, 2, OK, 2, 3),
		}, porcupine.Illegal},
		{"store rejects 33 after 34", []porcupine.Operation{
			wr("k", 34, 1, OK, 0, 1),
			wr("k", 33, 2, Rejected, 2, 3),
			rd("k", 1, 4, 5),
		}, porcupine.Ok},
		{"concurrent 33 may go first", []porcupine.Operation{
			wr("k", 34, 1, OK, 0, 5),
			wr("k", 33, 2, OK, 1, 2),
			rd("k", 1, 6, 7),
		}, porcupine.Ok},
		{"equal tokens", []porcupine.Operation{
			wr("k", 34, 1, OK, 0, 1),
			wr("k", 34, 2, OK, 2, 3),
			rd("k", 2, 4, 5),
		}, porcupine.Ok},
		{"rejected although fresh", []porcupine.Operation{
			wr("k", 5, 1, Rejected, 0, 1),
		}, porcupine.Illegal},
		{"unknown write may be seen", []porcupine.Operation{
			wr("k", 5, 7, Unknown, 0, inf),
			rd("k", 0, 1, 2),
			rd("k", 7, 3, 4),
		}, porcupine.Ok},
		{"read of a value never written", []porcupine.Operation{
			wr("k", 5, 7, OK, 0, 1),
			rd("k", 8, 3, 4),
		}, porcupine.Illegal},
		{"failed write is not seen", []porcupine.Operation{
			wr("k", 5, 7, Fail, 0, 1),
			rd("k", 7, 3, 4),
		}, porcupine.Illegal},
		{"keys are separate registers", []porcupine.Operation{
			wr("a", 34, 1, OK, 0, 1),
			wr("b", 33, 2, OK, 2, 3),
		}, porcupine.Ok},
	})
}

// TestModelsPartition checks that both partition functions split by
// resource, so that one bad resource makes the whole history illegal and
// good ones do not interfere.
func TestModelsPartition(t *testing.T) {
	good := []porcupine.Operation{
		lkOn("a", 0, Acquire, X, OK, 0, 10),
		lkOn("b", 1, Acquire, X, OK, 1, 11),
		lkOn("a", 0, Release, X, OK, 20, 30),
		lkOn("b", 1, Release, X, OK, 21, 31),
	}
	bad := append(append([]porcupine.Operation(nil), good...), lkOn("b", 2, Acquire, X, OK, 12, 13))
	for _, m := range []porcupine.Model{MutexModel(), ModesModel()} {
		if p := m.Partition(good); len(p) != 2 || len(p[0]) != 2 || len(p[1]) != 2 {
			t.Fatalf("Partition: %v", p)
		}
		if got := porcupine.CheckOperationsTimeout(m, good, 0); got != porcupine.Ok {
			t.Errorf("good: %v", got)
		}
		if got := porcupine.CheckOperationsTimeout(m, bad, 0); got != porcupine.Illegal {
			t.Errorf("bad: %v", got)
		}
		if got := porcupine.CheckEventsTimeout(m, toEvents(good), 0); got != porcupine.Ok {
			t.Errorf("good events: %v", got)
		}
		if got := porcupine.CheckEventsTimeout(m, toEvents(bad), 0); got != porcupine.Illegal {
			t.Errorf("bad events: %v", got)
		}
	}
}

// toEvents turns operations into events in time order, calls before
// returns at equal times.
func toEvents(ops []porcupine.Operation) []porcupine.Event {
	type point struct {
		t   int64
		ret bool
		id  int
		op  porcupine.Operation
	}
	var pts []point
	for i, op := range ops {
		pts = append(pts, point{t: op.Call, id: i, op: op}, point{t: op.Return, ret: true, id: i, op: op})
	}
	for i := 1; i < len(pts); i++ {
		for j := i; j > 0; j-- {
			a, b := pts[j-1], pts[j]
			if a.t > b.t || (a.t == b.t && a.ret && !b.ret) {
				pts[j-1], pts[j] = b, a
			}
		}
	}
	var out []porcupine.Event
	for _, p := range pts {
		if p.ret {
			out = append(out, porcupine.Event{ClientId: p.op.ClientId, Kind: porcupine.ReturnEvent, Value: p.op.Output, Id: p.id})
		} else {
			out = append(out, porcupine.Event{ClientId: p.op.ClientId, Kind: porcupine.CallEvent, Value: p.op.Input, Id: p.id})
		}
	}
	return out
}

func TestModesStateHashAgreesWithEqual(t *testing.T) {
	m := ModesModel()
	var a, b ModesState
	a = a.with(3, modes.PR, 7)
	b = b.with(3, modes.PR, 7)
	if m.Hash([]any{a}) != m.Hash([]any{b}) {
		t.Fatal("equal states hash differently")
	}
	b = b.with(31, modes.NL, 0)
	if m.Hash([]any{a}) == m.Hash([]any{b}) {
		t.Fatal("the last client does not count in the hash")
	}
	if got := a.String(); got != "{c3:PR}" {
		t.Fatalf("String: %q", got)
	}
}
