package netlab

import (
	"strings"
	"testing"
	"time"
)

func connectedPairs(f Faults, n int) int {
	c := 0
	for a := range n {
		for b := a + 1; b < n; b++ {
			if f.Connected(a, b) {
				c++
			}
		}
	}
	return c
}

func allUp(n int) []bool {
	up := make([]bool, n)
	for i := range up {
		up[i] = true
	}
	return up
}

func TestShapes(t *testing.T) {
	const n = 5
	up := allUp(n)
	cases := []struct {
		name     string
		f        Faults
		pairs    int  // pairs connected both ways
		majority bool // some majority is fully connected
	}{
		{"healthy", Faults{}, 10, true},
		{"minority of two", Isolate(n, []int{0, 1}), 1 + 3, true},
		{"majority isolated from nobody", Partition(n, []int{0, 1, 2, 3, 4}), 10, true},
		{"ring", Ring([]int{0, 1, 2, 3, 4}), 5, false},
		{"bridge", Bridge([]int{0, 1}, []int{3, 4}), 10 - 4, true},
		{"one way", OneWay([]int{0}, []int{1, 2, 3, 4}), 6, true},
		{"everyone alone", Partition(n), 0, false},
	}
	for _, c := range cases {
		if got := connectedPairs(c.f, n); got != c.pairs {
			t.Errorf("%s: %d pairs connected, want %d (%v)", c.name, got, c.pairs, c.f)
		}
		if got := c.f.MajorityConnected(n, up); got != c.majority {
			t.Errorf("%s: majority connected %v, want %v", c.name, got, c.majority)
		}
	}
	r := Ring([]int{0, 2, 4, 1, 3})
	for a := range n {
		peers := 0
		for b := range n {
			if a != b && r.Connected(a, b) {
				peers++
			}
		}
		if peers != 2 {
			t.Errorf("ring: node %d has %d neighbours, want 2", a, peers)
		}
	}
	if !r.Connected(0, 2) || r.Connected(0, 1) {
		t.Errorf("ring in order 0 2 4 1 3: %v", r)
	}
	down := allUp(n)
	down[0], down[1], down[2] = false, false, false
	if (Faults{}).MajorityConnected(n, down) {
		t.Error("a majority is connected with three of five nodes down")
	}
	ow := OneWay([]int{0}, []int{1})
	if !ow.Cut[Link{0, 1}] || ow.Cut[Link{1, 0}] {
		t.Errorf("one way: %v", ow)
	}
}

func TestFaultsString(t *testing.T) {
	f := Isolate(3, []int{0})
	f.Loss = map[int]int{2: 30}
	f.Delay = map[int]time.Duration{1: 50 * time.Millisecond}
	want := "cut n1->n2 n1->n3 n2->n1 n3->n1; loss n3 30%; delay n2 50ms"
	if got := f.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if !(Faults{Loss: map[int]int{1: 0}}).Empty() || f.Empty() {
		t.Error("Empty is wrong")
	}
}

// TestNftScript: a node's script replaces its whole ruleset and drops what
// its cut peers send and its share of loss.
func TestNftScript(t *testing.T) {
	l := &Lab{}
	for i, ip := range []string{"10.99.0.11", "10.99.0.12", "10.99.0.13"} {
		l.nodes = append(l.nodes, Node{Name: "n" + string(rune('1'+i)), IP: ip})
	}
	f := Isolate(3, []int{0})
	f.Loss = map[int]int{1: 25}
	s := l.nftScript(1, f)
	for _, want := range []string{"flush ruleset\n", "ip saddr { 10.99.0.11 } drop",
		"ip saddr { 10.99.0.11, 10.99.0.13 } numgen random mod 100 < 25 drop"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if s := l.nftScript(2, Faults{}); s != "flush ruleset\n" {
		t.Errorf("healthy node's script: %q", s)
	}
}
