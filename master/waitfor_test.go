package master

import (
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// EdgeHolds trusts a holder's unchanged token to mean that the holder only
// converted down since: that needs conflict to be monotone in the mode
// lattice (a mode stronger than another conflicts with everything the weaker
// one conflicts with), and the table to issue a new token for every
// conversion that is not down.
func TestConflictIsMonotone(t *testing.T) {
	for _, a := range modes.All() {
		for _, b := range modes.All() {
			if !modes.Stronger(a, b) {
				continue
			}
			for _, x := range modes.All() {
				if !modes.Compatible(b, x) && modes.Compatible(a, x) {
					t.Errorf("%v is stronger than %v, but only %v conflicts with %v", a, b, b, x)
				}
			}
		}
	}
	for _, from := range modes.All() {
		for _, to := range modes.All() {
			tbl := New(DefaultConfig())
			id := LockID{Node: 1, ID: 1}
			res, err := tbl.Request(Request{Resource: "r", Lock: id, Mode: from})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tbl.Convert(Convert{Lock: id, Mode: to})
			if err != nil {
				t.Fatal(err)
			}
			if same := got.Token == res.Token; same != (from == to || modes.IsDown(from, to)) {
				t.Errorf("%v->%v: token %d after %d", from, to, got.Token, res.Token)
			}
		}
	}
}

func TestPartyKeyCompare(t *testing.T) {
	keys := []PartyKey{
		{Lock: LockID{Node: 1, ID: 1}},
		{Lock: LockID{Node: 1, ID: 2}},
		{Lock: LockID{Node: 2, ID: 1}},
		{Owner: 1},
		{Owner: 2},
	}
	for i, a := range keys {
		for j, b := range keys {
			if got, want := a.Compare(b), cmpUint(uint64(i), uint64(j)); got != want {
				t.Errorf("%+v vs %+v: %d, want %d", a, b, got, want)
			}
		}
	}
}

// QueuedLocks yields every queued request and conversion, oldest first,
// with the tick it was queued at, and nothing granted.
func TestQueuedLocks(t *testing.T) {
	tbl := New(DefaultConfig())
	id := func(n uint64) LockID { return LockID{Node: 1, ID: n} }
	must := succeeds(t)
	tbl.Tick(10)
	must(tbl.Request(Request{Resource: "a", Lock: id(1), Mode: modes.PR}))
	must(tbl.Request(Request{Resource: "a", Lock: id(2), Mode: modes.PR}))
	tbl.Tick(20)
	must(tbl.Request(Request{Resource: "a", Lock: id(3), Mode: modes.EX}))
	tbl.Tick(30)
	must(tbl.Convert(Convert{Lock: id(1), Mode: modes.PW}))
	must(tbl.Request(Request{Resource: "b", Lock: id(4), Mode: modes.EX}))
	var got []LockState
	for ls := range tbl.QueuedLocks() {
		got = append(got, ls)
	}
	if len(got) != 2 {
		t.Fatalf("queued %v, want lock 3 waiting and lock 1 converting", got)
	}
	if got[0].Lock != id(3) || got[0].Queue != QueueWaiting || got[0].Requested != modes.EX || got[0].Since != 20 {
		t.Errorf("first queued %+v", got[0])
	}
	if got[1].Lock != id(1) || got[1].Queue != QueueConverting || got[1].Granted != modes.PR || got[1].Requested != modes.PW || got[1].Since != 30 {
		t.Errorf("second queued %+v", got[1])
	}
	if rs, _ := tbl.Resource("b"); rs.Locks[0].Since != 0 {
		t.Errorf("a granted lock has a queued tick: %+v", rs.Locks[0])
	}
}
