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
