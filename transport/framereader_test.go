package transport

import (
	"errors"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// pipeReader is a frameReader over one end of a net.Pipe, and a way to send
// it a frame from the other end.
func pipeReader(t *testing.T, idle time.Duration) (fr *frameReader, send func(), far net.Conn) {
	t.Helper()
	near, far := net.Pipe()
	t.Cleanup(func() { _ = near.Close(); _ = far.Close() })
	limits := wire.DefaultLimits()
	fr = newFrameReader(near, idle, &limits)
	frame, err := wire.AppendFrame(nil, wire.Header{}, &wire.Ping{}, &limits)
	if err != nil {
		t.Fatal(err)
	}
	send = func() {
		if _, err := far.Write(frame); err != nil {
			t.Error(err)
		}
	}
	return fr, send, far
}

// TestIdleCutOff: frames every quarter of the idle timeout keep a
// connection; after the last, silence ends it between IdleTimeout and 9/8
// of it, with the deadline error.
func TestIdleCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle, frames = 8 * time.Second, 20
		fr, send, _ := pipeReader(t, idle)
		go func() {
			for range frames {
				time.Sleep(idle / 4)
				send()
			}
		}()
		for i := range frames {
			if _, err := fr.next(); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
		last := time.Now()
		_, err := fr.next()
		quiet := time.Since(last)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("silent peer: %v, want the deadline error", err)
		}
		if quiet < idle || quiet > idle*9/8 {
			t.Fatalf("cut off after %v of silence, want between %v and %v", quiet, idle, idle*9/8)
		}
	})
}

// TestInterruptedRead: a deadline set in the past by an interrupter ends a
// helper's read with errInterrupted, but neither ends nor shortens the
// reading of the connection's reader, which keeps its idle period.
func TestInterruptedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 8 * time.Second
		fr, send, _ := pipeReader(t, idle)
		intr := &interrupter{conn: fr.dc.Conn}
		fr.dc.intr = intr
		go func() {
			time.Sleep(time.Second)
			intr.interrupt() // nobody helping: only the deadline moves
			time.Sleep(time.Second)
			send()
		}()
		start := time.Now()
		if _, err := fr.next(); err != nil {
			t.Fatalf("reader after an interrupt: %v", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Fatalf("frame read after %v, want 2s", got)
		}

		intr.pending.Store(false)
		fr.dc.helping = true
		go func() {
			time.Sleep(time.Second)
			intr.interrupt()
		}()
		start = time.Now()
		if _, err := fr.next(); !errors.Is(err, errInterrupted) {
			t.Fatalf("interrupted helper: %v, want errInterrupted", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("helper interrupted after %v, want 1s", got)
		}
		if _, err := fr.next(); !errors.Is(err, errInterrupted) {
			t.Fatalf("helper still interrupted: %v, want errInterrupted at once", err)
		}

		// The interrupt did not shorten the idle timeout.
		intr.pending.Store(false)
		fr.dc.helping = false
		go send()
		if _, err := fr.next(); err != nil {
			t.Fatal(err)
		}
		last := time.Now()
		_, err := fr.next()
		if quiet := time.Since(last); !errors.Is(err, os.ErrDeadlineExceeded) || quiet < idle {
			t.Fatalf("after interrupts: %v after %v of silence, want the deadline error after %v or more", err, quiet, idle)
		}
	})
}

// TestResetReader: a reader reset onto another connection drops what it
// had buffered of the first, reads the second's frames, and cuts the
// second off at its own idle timeout; its deadline state starts afresh.
func TestResetReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 8 * time.Second
		fr, _, far := pipeReader(t, 0)
		limits := wire.DefaultLimits()
		frame, _ := wire.AppendFrame(nil, wire.Header{ID: 7}, &wire.Ping{}, &limits)
		// A frame and half a prefix in one read: the half stays buffered.
		go func() { _, _ = far.Write(append(append([]byte{}, frame...), 0, 0)) }()
		if _, err := fr.next(); err != nil {
			t.Fatal(err)
		}
		if fr.br.Buffered()-fr.discard != 2 {
			t.Fatalf("%d bytes buffered, want the 2 of half a prefix", fr.br.Buffered()-fr.discard)
		}
		near2, far2 := net.Pipe()
		t.Cleanup(func() { _ = near2.Close(); _ = far2.Close() })
		fr.reset(near2, idle)
		go func() { _, _ = far2.Write(frame) }()
		payload, err := fr.next()
		if err != nil || len(payload) != len(frame)-wire.PrefixSize {
			t.Fatalf("after reset: %d bytes, %v; want the new connection's frame", len(payload), err)
		}
		start := time.Now()
		if _, err := fr.next(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("silent new connection: %v, want the deadline error", err)
		}
		if quiet := time.Since(start); quiet < idle || quiet > idle*9/8 {
			t.Fatalf("cut off after %v, want between %v and %v", quiet, idle, idle*9/8)
		}
	})
}
