// Package pingpong holds the floor that network benchmarks are measured
// against: a plain Go TCP ping-pong over loopback. Packages whose targets are
// a ratio to it (transport's link round trip, dlm's remote lock) run it in
// the same invocation as the benchmark compared, so both see the same
// machine state.
package pingpong

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Size is the message size of the ping-pong, about a lock request's.
const Size = 64

// Bench runs b.N round trips of a Size-byte message and its echo over one
// loopback TCP connection: no framing, no goroutine hand-offs beyond the
// echo server's.
func Bench(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, Size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, buf := make([]byte, Size), make([]byte, Size)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}
