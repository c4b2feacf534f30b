package check

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/seed-a6839e30/dlm/modes"
	"pgregory.net/rapid"
)

func segLim() segLimits { return segLimits{maxSteps: 1 << 30, maxConfigs: maxCarried} }

// TestSegmentedAcrossCuts: what the segmented check carries over a cut
// (the states, the operations of unknown outcome) is what decides the
// operations after it.
func TestSegmentedAcrossCuts(t *testing.T) {
	cases := []struct {
		name string
		seg  segModel
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a stale read right after a cut", registerSegModel(), []porcupine.Operation{
			wr("k", 1, 10, OK, 0, 10),
			rd("k", 0, 20, 30), // nothing open at 15: a cut
		}, porcupine.Illegal},
		{"a fresh read right after a cut", registerSegModel(), []porcupine.Operation{
			wr("k", 1, 10, OK, 0, 10),
			rd("k", 10, 20, 30),
		}, porcupine.Ok},
		{"a write of unknown outcome read after the cut", registerSegModel(), []porcupine.Operation{
			wr("k", 1, 10, OK, 0, 10),
			wr("k", 2, 20, Unknown, 11, inf),
			rd("k", 10, 30, 40),
			rd("k", 20, 50, 60),
		}, porcupine.Ok},
		{"a write of unknown outcome does not go back", registerSegModel(), []porcupine.Operation{
			wr("k", 1, 10, OK, 0, 10),
			wr("k", 2, 20, Unknown, 11, inf),
			rd("k", 20, 30, 40),
			rd("k", 10, 50, 60),
		}, porcupine.Illegal},
		{"a write refused for its token below one of unknown outcome", registerSegModel(), []porcupine.Operation{
			wr("k", 5, 50, Unknown, 0, inf),
			wr("k", 3, 30, OK, 10, 20),
			rd("k", 50, 30, 40),
			wr("k", 4, 40, OK, 50, 60), // refused in the only order that explains the read
		}, porcupine.Illegal},
		{"a write of unknown outcome with the highest token so far may still land", registerSegModel(), []porcupine.Operation{
			wr("k", 2, 20, Unknown, 0, inf),
			wr("k", 2, 10, OK, 10, 20), // the same holder's token
			rd("k", 10, 30, 40),
			rd("k", 20, 50, 60),
		}, porcupine.Ok},
		{"a second holder after a cut", modesSegModel(), []porcupine.Operation{
			lk(0, Acquire, X, OK, 0, 10),
			lk(1, Acquire, X, OK, 20, 30),
		}, porcupine.Illegal},
		{"a release of unknown outcome lets the next holder in", modesSegModel(), []porcupine.Operation{
			lockOp(lk(0, Acquire, X, OK, 0, 10), 1),
			lockOp(lk(0, Release, X, Unknown, 11, inf), 1),
			lockOp(lk(1, Acquire, X, OK, 20, 30), 2),
			lockOp(lk(1, Release, X, OK, 40, 50), 2),
			lockOp(lk(2, Acquire, X, OK, 60, 70), 3),
		}, porcupine.Ok},
		{"a conversion of unknown outcome takes effect two cuts later", modesSegModel(), []porcupine.Operation{
			lockOp(lk(0, Acquire, modes.NL, OK, 0, 10), 1),
			lockOp(lk(0, Convert, X, Unknown, 11, inf), 1),
			lockOp(lk(1, Acquire, modes.PR, OK, 20, 30), 2),
			lockOp(lk(1, Release, X, OK, 40, 50), 2),
			// c0 in EX now explains why c2's PR fails...
			lockOp(lk(2, Acquire, modes.PR, Fail, 60, 70), 3),
			// ...but c0 cannot hold EX while c3 holds PR.
			lockOp(lk(3, Acquire, modes.PR, OK, 80, 90), 4),
			lockOp(lk(4, Acquire, X, OK, 100, 110), 5),
		}, porcupine.Illegal},
		{"a lost lock frees it for good", modesSegModel(), []porcupine.Operation{
			lockOp(lk(0, Acquire, X, OK, 0, 10), 1),
			lockOp(lk(0, Convert, modes.PR, Unknown, 11, inf), 1),
			lockOp(lk(0, Lost, X, OK, 15, 15), 1),
			lockOp(lk(1, Acquire, X, OK, 20, 30), 2),
			lockOp(lk(1, Release, X, OK, 40, 50), 2),
			lockOp(lk(2, Acquire, X, OK, 60, 70), 3),
		}, porcupine.Ok},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSegmented(tc.seg, tc.ops, segLim())
			if got.verdict != tc.want {
				t.Fatalf("segmented: %v (%s), want %v", got.verdict, got.reason, tc.want)
			}
			if got.segments < 2 {
				t.Fatalf("%d segments: the case has no cut", got.segments)
			}
			if p := porcupine.CheckOperations(tc.seg.nm.ToModel(), tc.ops); p != (tc.want == porcupine.Ok) {
				t.Fatalf("porcupine on the whole history: %v", p)
			}
		})
	}
}

// TestSegmentedAgreesWithPorcupine: on random histories of one resource,
// with many cuts and operations of unknown outcome, the segmented check and
// porcupine over the whole history give the same verdict.
func TestSegmentedAgreesWithPorcupine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ops []porcupine.Operation
		lock := 0
		clients := rapid.IntRange(1, 4).Draw(t, "clients")
		ms := []modes.Mode{modes.NL, modes.CR, modes.PR, modes.PW, modes.EX}
		for c := range clients {
			now := int64(rapid.IntRange(0, 20).Draw(t, "start"))
			held := 0
			for range rapid.IntRange(1, 8).Draw(t, "ops") {
				call := now + int64(rapid.IntRange(0, 15).Draw(t, "gap"))
				ret := call + int64(rapid.IntRange(0, 10).Draw(t, "took"))
				out := rapid.SampledFrom([]Outcome{OK, OK, OK, Fail, Unknown}).Draw(t, "out")
				if out == Unknown {
					ret = inf
				}
				var op porcupine.Operation
				m := rapid.SampledFrom(ms).Draw(t, "mode")
				switch {
				case held == 0:
					lock++
					op = lockOp(lk(c, Acquire, m, out, call, ret), lock)
					if out != Fail {
						held = lock
					}
				case rapid.Bool().Draw(t, "convert"):
					op = lockOp(lk(c, Convert, m, out, call, ret), held)
				default:
					kind := rapid.SampledFrom([]Kind{Release, Lost}).Draw(t, "release")
					if kind == Lost {
						out, ret = OK, call
					}
					op = lockOp(lk(c, kind, X, out, call, ret), held)
					held = 0
				}
				ops = append(ops, op)
				if ret == inf {
					if !rapid.Bool().Draw(t, "woke") {
						break // a crash: the client does nothing more
					}
					ret = call + 5
				}
				now = ret
			}
		}
		want := porcupine.CheckOperations(ModesModel(), ops)
		got := checkSegmented(modesSegModel(), ops, segLim())
		if (got.verdict == porcupine.Ok) != want || got.verdict == porcupine.Unknown {
			t.Fatalf("segmented %v (%s), porcupine %v on\n%v", got.verdict, got.reason, want, ops)
		}
	})
}

// TestSegmentedAgreesWithPorcupineOnRegisters: the same for the fenced
// register.
func TestSegmentedAgreesWithPorcupineOnRegisters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ops []porcupine.Operation
		for range rapid.IntRange(1, 3).Draw(t, "clients") {
			now := int64(rapid.IntRange(0, 20).Draw(t, "start"))
			for range rapid.IntRange(1, 6).Draw(t, "ops") {
				call := now + int64(rapid.IntRange(0, 15).Draw(t, "gap"))
				ret := call + int64(rapid.IntRange(0, 10).Draw(t, "took"))
				v := int64(rapid.IntRange(0, 4).Draw(t, "value"))
				if rapid.Bool().Draw(t, "read") {
					ops = append(ops, rd("k", v, call, ret))
				} else {
					out := rapid.SampledFrom([]Outcome{OK, Rejected, Fail, Unknown}).Draw(t, "out")
					if out == Unknown {
						ret = inf
					}
					ops = append(ops, wr("k", uint64(rapid.IntRange(1, 4).Draw(t, "token")), v, out, call, ret))
				}
				if ret == inf {
					ret = call + 5
				}
				now = ret
			}
		}
		want := porcupine.CheckOperations(RegisterModel(), ops)
		got := checkSegmented(registerSegModel(), ops, segLim())
		if (got.verdict == porcupine.Ok) != want || got.verdict == porcupine.Unknown {
			t.Fatalf("segmented %v (%s), porcupine %v on\n%v", got.verdict, got.reason, want, ops)
		}
	})
}

// TestSegmentedAgreesWithPorcupineOnSemaphores: the same for a semaphore
// of three permits.
func TestSegmentedAgreesWithPorcupineOnSemaphores(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ops []porcupine.Operation
		lock := 0
		for c := range rapid.IntRange(1, 4).Draw(t, "clients") {
			now := int64(rapid.IntRange(0, 20).Draw(t, "start"))
			held := 0
			for range rapid.IntRange(1, 8).Draw(t, "ops") {
				call := now + int64(rapid.IntRange(0, 15).Draw(t, "gap"))
				ret := call + int64(rapid.IntRange(0, 10).Draw(t, "took"))
				out := rapid.SampledFrom([]Outcome{OK, OK, OK, Fail, Unknown}).Draw(t, "out")
				if out == Unknown {
					ret = inf
				}
				in := LockInput{Resource: "s", Client: c, Limit: 3}
				if held == 0 {
					lock++
					in.Kind, in.Lock, in.Permits = Acquire, lock, rapid.IntRange(1, 2).Draw(t, "permits")
					if out != Fail {
						held = lock
					}
				} else {
					in.Kind, in.Lock = rapid.SampledFrom([]Kind{Release, Lost}).Draw(t, "release"), held
					if in.Kind == Lost {
						out, ret = OK, call
					}
					held = 0
				}
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Output: LockOutput{Outcome: out}, Call: call, Return: ret})
				if ret == inf {
					if !rapid.Bool().Draw(t, "woke") {
						break
					}
					ret = call + 5
				}
				now = ret
			}
		}
		want := porcupine.CheckOperations(SemaphoreModel(), ops)
		got := checkSegmented(semaphoreSegModel(), ops, segLim())
		if (got.verdict == porcupine.Ok) != want || got.verdict == porcupine.Unknown {
			t.Fatalf("segmented %v (%s), porcupine %v on\n%v", got.verdict, got.reason, want, ops)
		}
	})
}
