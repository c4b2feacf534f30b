// Package leakcheck is the TestMain of packages whose tests run memberlist
// in real time: goleak's check that no goroutine outlives the tests, after
// memberlist has had time to finish what it does after Shutdown.
//
// memberlist's Shutdown returns while its prober may still wait for the ack
// of a probe sent just before: the scheduler goroutine that runs the probe
// ends only when that wait does, at most the probe interval scaled by the
// node's awareness (200 ms × 8 with transport/membership's defaults), and a
// TCP fallback ping ends at the same deadline. A test process that ends
// right after a Close would report them as leaks. Main waits up to Linger
// for the goroutines to be gone, then fails on any that remain, so a
// goroutine that never ends still fails the run.
package leakcheck

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Linger bounds the wait for goroutines that end by themselves.
const Linger = 3 * time.Second

// Main runs the tests and then goleak's check; use it as TestMain. after,
// if given, run once the tests are done (to remove what they built).
func Main(m *testing.M, after ...func()) { goleak.VerifyTestMain(settled{m, after}) }

type settled struct {
	m     *testing.M
	after []func()
}

// Run runs the tests and, if any goroutine is left, waits (polling) up to
// Linger for the leftovers to end; goleak then checks once more.
func (s settled) Run() int {
	code := s.m.Run()
	for _, f := range s.after {
		f()
	}
	for deadline := time.Now().Add(Linger); time.Now().Before(deadline) && goleak.Find() != nil; {
		time.Sleep(50 * time.Millisecond)
	}
	return code
}
