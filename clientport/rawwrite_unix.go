//go:build unix

package clientport

import "syscall"

// writeNow writes as much of b as the socket takes now, without waiting
// for it to become writable.
func writeNow(raw syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true
			case e != nil:
				werr = e
				return true
			}
			n += m
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return n, err
}
