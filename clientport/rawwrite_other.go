//go:build !unix

package clientport

import (
	"errors"
	"syscall"
)

// writeNow is not available here: every write goes through the writer's
// goroutine.
func writeNow(syscall.RawConn, []byte) (int, error) { return 0, errNoRawWrite }

var errNoRawWrite = errors.New("no non-blocking write on this platform")
