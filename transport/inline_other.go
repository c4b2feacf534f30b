//go:build !unix

package transport

import (
	"errors"
	"net"
	"syscall"
)

// inlineConn returns nil: this platform has no raw write (Windows sockets
// are handles written with WSASend, not write(2)), so every write goes
// through the writer goroutine, which costs a goroutine switch per idle
// write and nothing else.
func inlineConn(net.Conn) syscall.RawConn { return nil }

// errNoInline: writeInline never runs the raw write where inlineConn
// returns nil; the callback fails rather than write nothing if it did.
var errNoInline = errors.New("transport: no inline write on this platform")

// rawWriteFD is the raw write's callback; see inline_unix.go.
func (p *peer) rawWriteFD(uintptr) bool {
	p.werr = errNoInline
	return true
}
