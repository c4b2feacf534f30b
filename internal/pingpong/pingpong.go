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

// The variants below take apart what a link round trip adds to Bench, one
// design decision at a time, so the cost of each is measured rather than
// guessed: BenchTwoConns sends the echo back on a second connection (the
// links' first design: each node's traffic on the connection it dialled;
// since replaced by one connection per pair), and BenchHandoff adds a
// reader goroutine on that connection that hands each echo to the waiting
// caller (what the links did before a waiting caller read its own reply).

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

// listenPair returns both ends of a loopback TCP connection.
func listenPair(b *testing.B) (client, server net.Conn) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept() // nil on failure: Dial fails too
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	if server = <-accepted; server == nil {
		b.Fatal("accept failed")
	}
	return client, server
}

// echoPair starts an echo server reading requests from one connection and
// writing the echoes to a second one; it returns the client's ends and a
// stop function that closes everything and waits for the server.
func echoPair(b *testing.B) (req, rep net.Conn, stop func()) {
	c1, s1 := listenPair(b)
	c2, s2 := listenPair(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, Size)
		for {
			if _, err := io.ReadFull(s1, buf); err != nil {
				return
			}
			if _, err := s2.Write(buf); err != nil {
				return
			}
		}
	}()
	return c1, c2, func() {
		for _, c := range []net.Conn{c1, s1, c2, s2} {
			_ = c.Close()
		}
		<-done
	}
}

// BenchTwoConns is Bench with the echo coming back on a second connection,
// read by the caller itself.
func BenchTwoConns(b *testing.B) {
	req, rep, stop := echoPair(b)
	defer stop()
	msg, buf := make([]byte, Size), make([]byte, Size)
	for b.Loop() {
		if _, err := req.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rep, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchHandoff is BenchTwoConns with a reader goroutine on the second
// connection that hands each echo to the caller over a channel.
func BenchHandoff(b *testing.B) {
	req, rep, stop := echoPair(b)
	got := make(chan struct{}, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, Size)
		for {
			if _, err := io.ReadFull(rep, buf); err != nil {
				close(got)
				return
			}
			got <- struct{}{}
		}
	}()
	defer func() { stop(); <-readerDone }()
	msg := make([]byte, Size)
	for b.Loop() {
		if _, err := req.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, ok := <-got; !ok {
			b.Fatal("reader stopped")
		}
	}
}
