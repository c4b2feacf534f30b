package dlm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// edge makes a graph edge: owner w's request (lock wl, generation gen)
// waits on res for owner b's lock bl, held.
func edge(w, wl, gen, b, bl uint64, res string) graphEdge {
	return graphEdge{master: "m-" + res, e: wire.WaitEdge{
		Lockspace: "ls", Resource: res, Mode: modes.EX,
		WaiterNode: 1, WaiterLock: wl, WaiterOwner: w, WaiterGen: gen,
		Kind: wire.BlockHolder, BlockerNode: 1, BlockerLock: bl, BlockerOwner: b, Stamp: 1,
	}}
}

// cyclesText renders cycles as "owners (victim owner)" for comparison.
func cyclesText(cs []cycle) string {
	var out []string
	for _, c := range cs {
		var owners []string
		for _, g := range c.edges {
			owners = append(owners, fmt.Sprint(g.e.WaiterOwner))
		}
		out = append(out, fmt.Sprintf("%s (victim %d)", strings.Join(owners, ">"), c.edges[c.victim].e.WaiterOwner))
	}
	return strings.Join(out, "; ")
}

func TestFindCycles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []graphEdge
		want  string
	}{
		{"none", []graphEdge{edge(1, 10, 1, 2, 20, "a"), edge(2, 21, 2, 3, 30, "b")}, ""},
		{"two", []graphEdge{edge(1, 10, 1, 2, 20, "a"), edge(2, 21, 2, 1, 11, "b")}, "1>2 (victim 2)"},
		{"self", []graphEdge{edge(4, 40, 1, 4, 41, "a")}, "4 (victim 4)"},
		{"three", []graphEdge{edge(3, 30, 1, 1, 10, "c"), edge(1, 11, 2, 2, 20, "a"), edge(2, 21, 3, 3, 31, "b")}, "1>2>3 (victim 3)"},
		{"chain into a cycle", []graphEdge{edge(9, 90, 1, 1, 10, "z"), edge(1, 11, 2, 2, 20, "a"), edge(2, 21, 3, 1, 12, "b")}, "1>2 (victim 2)"},
		{"two disjoint", []graphEdge{
			edge(1, 10, 1, 2, 20, "a"), edge(2, 21, 2, 1, 11, "b"),
			edge(5, 50, 3, 6, 60, "c"), edge(6, 61, 4, 5, 51, "d"),
		}, "1>2 (victim 2); 5>6 (victim 6)"},
		// Owner 2 waits with one request for both 1 and 3, which both wait
		// for 2: failing that request breaks both cycles.
		{"two cycles, one victim", []graphEdge{
			edge(1, 10, 1, 2, 20, "a"), edge(3, 30, 2, 2, 20, "a"),
			edge(2, 21, 3, 1, 11, "b"), edge(2, 21, 3, 3, 31, "b"),
		}, "1>2 (victim 2)"},
		// The same with two requests of owner 2: two cycles, two victims.
		{"two cycles, two requests", []graphEdge{
			edge(1, 10, 1, 2, 20, "a"), edge(3, 30, 2, 2, 22, "c"),
			edge(2, 21, 3, 1, 11, "b"), edge(2, 23, 4, 3, 31, "d"),
		}, "1>2 (victim 2); 2>3 (victim 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if got := cyclesText(findCycles(tc.edges, 10)); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			// The same cycles and victims whatever order the edges come in.
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				es := slices.Clone(tc.edges)
				rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
				if got := cyclesText(findCycles(es, 10)); got != want {
					t.Fatalf("shuffled: got %q, want %q", got, want)
				}
			}
		})
	}
}

// A request queued behind the victim stops waiting for it when the victim
// fails: a cycle through that edge is not broken twice.
func TestFindCyclesDropsEdgesBehindVictim(t *testing.T) {
	behind := edge(1, 12, 9, 2, 21, "b") // 1 waits behind 2's request (lock 21, generation 3)
	behind.e.Kind, behind.e.Stamp = wire.BlockAhead, 3
	edges := []graphEdge{
		edge(1, 10, 1, 2, 20, "a"), edge(2, 21, 3, 1, 11, "b"), // 1 <-> 2; victim 2's request 21/3
		behind, edge(2, 22, 4, 1, 11, "c"), // 1 behind 21/3 -> 2, 2 (another request) -> 1
	}
	got := findCycles(edges, 10)
	if len(got) != 2 {
		t.Fatalf("got %s", cyclesText(got))
	}
	for _, g := range got[1].edges {
		if g.e == behind.e {
			t.Fatalf("second cycle %s goes through the edge behind the first victim", cyclesText(got[1:]))
		}
	}
	if d := got[0].describe(1000); d != `2 parties: owner 2 waits on "b" (EX) for owner 1, which waits on "a" (EX) for owner 2` {
		t.Fatalf("describe: %s", d)
	}
	if d := got[0].describe(30); len(d) > 30 || !strings.HasSuffix(d, "...") {
		t.Fatalf("describe(30): %q", d)
	}
}
