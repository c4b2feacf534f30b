package client

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/pingpong"
	"github.com/seed-a6839e30/dlm/modes"
)

// BenchmarkTCPPingPong is the floor BenchmarkClientLockUnlock is measured
// against (docs/BENCHMARKS.md): run both in one invocation.
func BenchmarkTCPPingPong(b *testing.B) { pingpong.Bench(b) }

// BenchmarkClientLockUnlock: one client, one connection, lock and unlock
// of an uncontended resource its agent masters (a one-node cluster).
func BenchmarkClientLockUnlock(b *testing.B) {
	a := startAgents(b, 1, nil, nil)
	c := dial(b, a.addrs[0])
	ls := c.Lockspace("bench")
	b.ReportAllocs()
	for b.Loop() {
		lk, err := ls.Lock(bg, "r", modes.EX)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientLockUnlockRatio interleaves the two: blocks of 64
// lock+unlock cycles and 64 ping-pong round trips, in turn, on the same
// machine state, and reports their ratio (the target is ≤ 2): a shared
// machine's slow phases then slow both alike.
func BenchmarkClientLockUnlockRatio(b *testing.B) {
	a := startAgents(b, 1, nil, nil)
	ls := dial(b, a.addrs[0]).Lockspace("bench")
	echo, stop := echoConn(b)
	defer stop()
	msg, buf := make([]byte, pingpong.Size), make([]byte, pingpong.Size)
	const block = 64
	var lockTime, pingTime time.Duration
	for b.Loop() {
		start := time.Now()
		for range block {
			lk, err := ls.Lock(bg, "r", modes.EX)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
		mid := time.Now()
		for range block {
			if _, err := echo.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(echo, buf); err != nil {
				b.Fatal(err)
			}
		}
		lockTime += mid.Sub(start)
		pingTime += time.Since(mid)
	}
	b.ReportMetric(float64(lockTime)/float64(b.N*block), "lock-ns/op")
	b.ReportMetric(float64(pingTime)/float64(b.N*block), "ping-ns/op")
	b.ReportMetric(float64(lockTime)/float64(pingTime), "ratio")
}

// echoConn is a connection to an echo server on loopback (the ping-pong
// of internal/pingpong, driven by hand).
func echoConn(b *testing.B) (net.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, pingpong.Size)
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
	return c, func() { _ = c.Close(); _ = ln.Close(); <-done }
}
