package dlmtest

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestBubble(t *testing.T) {
	if b := bubble(); b != "" {
		t.Fatalf("outside a bubble: %q", b)
	}
	synctest.Test(t, func(t *testing.T) {
		b := bubble()
		if b == "" {
			t.Fatal("inside a bubble: no marker")
		}
		// A goroutine of this bubble sleeping in a function of its own is
		// found; once it ended, waitGone returns before its limit.
		done := make(chan struct{})
		go func() { defer close(done); time.Sleep(time.Second) }()
		synctest.Wait()
		start := time.Now()
		waitGone(b, "dlmtest.TestBubble.func1.1", time.Minute)
		if d := time.Since(start); d < time.Second || d > 2*time.Second {
			t.Errorf("waitGone returned after %v, want when the sleeper ended (1 s)", d)
		}
		<-done
	})
}

func TestHasGoroutine(t *testing.T) {
	stacks := "goroutine 1 [running, synctest bubble 3]:\nmain.f()\n\n" +
		"goroutine 7 [select (durable), synctest bubble 2]:\ngithub.com/hashicorp/memberlist.(*Memberlist).probeNode(...)\n\n" +
		"goroutine 9 [select]:\ngithub.com/hashicorp/memberlist.(*Memberlist).probeNode(...)\n"
	for _, tc := range []struct {
		bubble string
		want   bool
	}{
		{"synctest bubble 2]", true},
		{"synctest bubble 3]", false}, // its only goroutine runs main.f
		{"synctest bubble 12]", false},
	} {
		if got := hasGoroutine(stacks, tc.bubble, memberlistFrame); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.bubble, got, tc.want)
		}
	}
}
