package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		in   []time.Duration
		want summary
	}{
		{nil, summary{}},
		{ms(5), summary{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}},
		{ms(40, 10, 30, 20), summary{20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), summary{5 * time.Millisecond, 9 * time.Millisecond, 10 * time.Millisecond}},
	} {
		if got := summarize(c.in); got != c.want {
			t.Errorf("summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestGrantsAround(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Grants before the window, in it, after it; restart at +2000 ms.
	ts := []time.Time{at(-500), at(100), at(200), at(2300), at(2400), at(9000)}
	first, stretch := grantsAround(ts, at(0), at(2000), at(5000))
	if first != 300*time.Millisecond {
		t.Errorf("first grant after the restart: %v, want 300ms", first)
	}
	if stretch != 2600*time.Millisecond { // 2400 to the window's end at 5000
		t.Errorf("longest stretch: %v, want 2.6s", stretch)
	}
	if first, stretch := grantsAround(nil, at(0), at(1), at(10)); first != 0 || stretch != 10*time.Millisecond {
		t.Errorf("no grants: %v, %v", first, stretch)
	}
}

func TestOptionsRefused(t *testing.T) {
	ok := options{dlmnode: "/bin/true", rounds: 1, kill: 4, downMin: time.Second, downMax: 2 * time.Second, agents: make([]string, 5)}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*options){
		"no binary":      func(o *options) { o.dlmnode = "" },
		"no rounds":      func(o *options) { o.rounds = 0 },
		"kill none":      func(o *options) { o.kill = 0 },
		"kill too many":  func(o *options) { o.kill = 6 },
		"down max < min": func(o *options) { o.downMax = 0 },
		"down negative":  func(o *options) { o.downMin = -1 },
	} {
		o := ok
		mut(&o)
		if o.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
