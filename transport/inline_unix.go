//go:build unix

package transport

import (
	"net"
	"syscall"
)

// inlineConn returns the socket of a plain TCP connection for writeInline's
// raw write, or nil (TLS, pipes): then every write goes through the writer
// goroutine.
func inlineConn(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// rawWriteFD is the syscall.RawConn callback of writeInline: it writes as
// much of p.wbuf as the socket takes now, and never waits for it to become
// writable. Only the goroutine that set p.writing runs it. (A method value
// made once, so the callback does not allocate per write.)
func (p *peer) rawWriteFD(fd uintptr) bool {
	for p.wn < len(p.wbuf) {
		m, e := syscall.Write(int(fd), p.wbuf[p.wn:])
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return true
		case e != nil:
			p.werr = e
			return true
		}
		p.wn += m
	}
	return true
}
