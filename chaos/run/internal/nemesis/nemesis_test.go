package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
)

func TestScheduleIsSeededAndStrikesEveryKind(t *testing.T) {
	tm := DefaultTiming()
	a := Schedule(7, All(), 0, 1, tm)
	if len(a) != len(All()) {
		t.Fatalf("a zero-length run has %d steps, want one round of %d", len(a), len(All()))
	}
	for _, k := range All() {
		if !slices.ContainsFunc(a, func(s Step) bool { return s.Kind == k }) {
			t.Errorf("%s missing from the round", k)
		}
	}
	if b := Schedule(7, All(), 0, 1, tm); !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	if c := Schedule(8, All(), 0, 1, tm); reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same schedule")
	}
	long := Schedule(1, All(), time.Hour, 1, tm)
	var sum time.Duration
	for _, s := range long {
		sum += s.Hold + s.Quiet
		if s.Kind == PauseHolder && (s.Hold < 2*tm.Lease || s.Hold > 3*tm.Lease) {
			t.Errorf("pause of %v, want 2-3 leases", s.Hold)
		}
	}
	if sum < time.Hour || len(long) < 300 {
		t.Fatalf("an hour's schedule: %d steps over %v", len(long), sum)
	}
	if r := Schedule(7, []Kind{PartHolder}, 0, 5, tm); len(r) != 5 {
		t.Fatalf("five rounds of one kind: %d steps", len(r))
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("process,loss,kill-master")
	if err != nil || len(ks) != len(ProcessKinds)+1 || ks[len(ks)-1] != Loss {
		t.Fatalf("%v %v", ks, err)
	}
	for _, bad := range []string{"", "kill-everything", "all,nope"} {
		if _, err := ParseKinds(bad); err == nil {
			t.Errorf("ParseKinds(%q) succeeded", bad)
		}
	}
}

// fakeCluster logs what the nemeses do to it: five agents and two workers.
type fakeCluster struct {
	n       int
	up      []bool
	network bool
	log     []string
}

func newFake(network bool) *fakeCluster {
	return &fakeCluster{n: 5, up: []bool{true, true, true, true, true, true, true}, network: network}
}

func (f *fakeCluster) Size() int  { return f.n }
func (f *fakeCluster) Procs() int { return len(f.up) }
func (f *fakeCluster) Name(i int) string {
	if i >= f.n {
		return fmt.Sprintf("w%d", i-f.n+1)
	}
	return fmt.Sprintf("n%d", i+1)
}
func (f *fakeCluster) Up(i int) bool { return f.up[i] }
func (f *fakeCluster) Kill(i int) error {
	f.up[i] = false
	f.log = append(f.log, "kill "+f.Name(i))
	return nil
}
func (f *fakeCluster) Start(i int) error {
	f.up[i] = true
	f.log = append(f.log, "start "+f.Name(i))
	return nil
}
func (f *fakeCluster) Stop(i int) error { f.log = append(f.log, "stop "+f.Name(i)); return nil }
func (f *fakeCluster) Cont(i int) error { f.log = append(f.log, "cont "+f.Name(i)); return nil }
func (f *fakeCluster) Voters() int      { return 8 } // five agents, two member workers, one in the harness
func (f *fakeCluster) Quorum() int      { return 5 }
func (f *fakeCluster) Network() bool    { return f.network }
func (f *fakeCluster) NetSize() int     { return len(f.up) }
func (f *fakeCluster) Apply(x netlab.Faults) error {
	f.log = append(f.log, "apply "+x.String())
	return nil
}

// fakeTargets: client 9 on w1 (process 5, a member) holds reg/1.
type fakeTargets struct {
	armed, pinned, witnessed []string
	// slowWitness, if set, is what Witness returns; otherwise the
	// witness is done at once.
	slowWitness chan struct{}
}

func (fakeTargets) Holder(*rand.Rand) (Holder, bool) {
	return Holder{Client: 9, Resource: "reg/1", Worker: 5, Node: 5}, true
}
func (fakeTargets) Master(*rand.Rand) (int, string, bool) { return 4, "hot/0", true }
func (f *fakeTargets) Witness(res string) <-chan struct{} {
	f.witnessed = append(f.witnessed, res)
	if f.slowWitness != nil {
		return f.slowWitness
	}
	done := make(chan struct{})
	close(done)
	return done
}
func (f *fakeTargets) Arm(h Holder) bool {
	f.armed = append(f.armed, fmt.Sprintf("client %d %s", h.Client, h.Resource))
	return true
}
func (f *fakeTargets) Pin(h Holder, d time.Duration) bool {
	f.pinned = append(f.pinned, fmt.Sprintf("client %d %s for %v", h.Client, h.Resource, d))
	return true
}

type fakeRecorder struct {
	t       time.Duration
	faults  []string
	crashes []int
	frozen  []int
	healed  int
	changes int
}

func (r *fakeRecorder) Fault(k Kind, node int, res, text string) time.Duration {
	r.t += time.Second
	r.faults = append(r.faults, fmt.Sprintf("%s %d %s", k, node, res))
	return r.t
}
func (r *fakeRecorder) Crash(node int)  { r.crashes = append(r.crashes, node) }
func (r *fakeRecorder) Freeze(node int) { r.frozen = append(r.frozen, node) }
func (r *fakeRecorder) Healed(Kind, string) time.Duration {
	r.healed++
	r.t += time.Second
	return r.t
}
func (r *fakeRecorder) Changed([]bool, netlab.Faults) { r.changes++ }

func TestStrikeDoesAndUndoesEachKind(t *testing.T) {
	for _, k := range All() {
		c := newFake(true)
		tg, rec := &fakeTargets{}, &fakeRecorder{}
		ev := Strike(context.Background(), Step{Kind: k, Hold: time.Millisecond, Seed: 3}, c, tg, rec)
		if ev.Err != "" || ev.At == 0 || ev.Healed <= ev.At || rec.healed != 1 {
			t.Errorf("%s: %+v (healed %d)", k, ev, rec.healed)
		}
		log := strings.Join(c.log, "; ")
		if aimed := k == KillHolder || k == PauseHolder || k == PartHolder; aimed != (len(tg.witnessed) == 1) || aimed && tg.witnessed[0] != "reg/1" {
			t.Errorf("%s: witnessed %v", k, tg.witnessed)
		}
		for i, u := range c.up {
			if !u {
				t.Errorf("%s: %s left down: %s", k, c.Name(i), log)
			}
		}
		switch k {
		case KillHolder, KillMaster:
			want := map[Kind]string{KillHolder: "kill w1; start w1", KillMaster: "kill n5; start n5"}[k]
			if log != want || len(rec.crashes) != 1 {
				t.Errorf("%s: %s, want %s", k, log, want)
			}
		case QuorumLoss:
			// Eight voters, a quorum of five: four agents must go.
			if strings.Count(log, "kill n") != 4 || strings.Count(log, "start n") != 4 || len(rec.crashes) != 4 {
				t.Errorf("%s: %s", k, log)
			}
		case PauseHolder:
			if log != "stop w1; cont w1" || strings.Contains(ev.Text, "witness") || len(tg.pinned) != 0 || len(tg.armed) != 1 || tg.armed[0] != "client 9 reg/1" ||
				len(rec.frozen) != 1 || rec.frozen[0] != 5 {
				t.Errorf("%s: %s, armed %v, frozen %v", k, log, tg.armed, rec.frozen)
			}
		case PartHolder:
			want := "apply cut n1->n6 n2->n6 n3->n6 n4->n6 n5->n6 n6->n1 n6->n2 n6->n3 n6->n4 n6->n5 n6->n7 n7->n6 n6<->hub; apply healthy"
			if log != want || ev.Resource != "reg/1" || !strings.Contains(ev.Text, "w1->n1") {
				t.Errorf("%s: %s, want %s (resource %q, %s)", k, log, want, ev.Resource, ev.Text)
			}
			// The holder is kept holding through the cut and past the heal.
			if want := []string{"client 9 reg/1 for 501ms"}; !slices.Equal(tg.pinned, want) {
				t.Errorf("%s: pinned %v, want %v", k, tg.pinned, want)
			}
		case KillRandom, Restart:
			if strings.Count(log, "kill") != 1 || strings.Count(log, "start") != 1 {
				t.Errorf("%s: %s", k, log)
			}
		default:
			if len(c.log) != 2 || !strings.HasPrefix(c.log[0], "apply ") || c.log[0] == "apply healthy" || c.log[1] != "apply healthy" {
				t.Errorf("%s: %s", k, log)
			}
		}
	}
}

// TestPauseLastsUntilTheWitnessWrote: a frozen holder's late write shows
// the fencing only after another client wrote, so a pause whose witness
// is not done by its end goes on, at most as long again, and says so.
func TestPauseLastsUntilTheWitnessWrote(t *testing.T) {
	c := newFake(true)
	tg := &fakeTargets{slowWitness: make(chan struct{})}
	ev := Strike(context.Background(), Step{Kind: PauseHolder, Hold: 20 * time.Millisecond, Seed: 3}, c, tg, &fakeRecorder{})
	log := strings.Join(c.log, "; ")
	if ev.Err != "" || log != "stop w1; cont w1" || !strings.Contains(ev.Text, "more until the witness wrote") {
		t.Fatalf("%+v: %s", ev, log)
	}
}

func TestStrikeSkipsNetworkKindsWithoutNamespaces(t *testing.T) {
	c := newFake(false)
	ev := Strike(context.Background(), Step{Kind: PartRing}, c, &fakeTargets{}, &fakeRecorder{})
	if !strings.Contains(ev.Err, "skipped") || len(c.log) != 0 {
		t.Fatalf("%+v %v", ev, c.log)
	}
}
