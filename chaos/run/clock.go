package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC, which every process on the machine shares
// (the harness makes no time namespace): the clock of every history of a
// run, so that the harness's and the workers' journals merge onto one
// timeline. Go's own monotonic readings are relative to each process's
// start and cannot be compared across processes.
func monoNow() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("chaos: CLOCK_MONOTONIC: " + err.Error()) // Linux always has it
	}
	return time.Unix(ts.Unix())
}
