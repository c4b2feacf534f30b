package transport

import (
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestNewConnectionDropsAnOlderOneNotYetRead: a new connection from a peer
// waits for the reading of its older ones to end, so that the count of
// what was handled is final, but an older one offered to its peer and not
// taken yet has handled nothing: it is dropped at once. Waiting for it
// (up to HandshakeTimeout, the dialler's own deadline) made every new
// handshake of a peer outlive the dialler's patience while its older
// connection waited, and a restarted member could not join a view for a
// minute ("an older connection from the peer is still being read", in
// every goroutine dump of the chaos runs that showed it).
func TestNewConnectionDropsAnOlderOneNotYetRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Links{cfg: Config{HandshakeTimeout: 2 * time.Second}, log: slog.New(slog.DiscardHandler),
			inbound: map[*inConn]struct{}{}}
		conn := func() *inConn {
			near, far := net.Pipe()
			t.Cleanup(func() { _ = near.Close(); _ = far.Close() })
			ic := newInConn(near)
			ic.from = "a"
			l.inbound[ic] = struct{}{}
			return ic
		}
		hello := &wire.Hello{Node: "a", BootID: 1, Session: 1}

		// Offered, not yet read.
		queued := conn()
		start := time.Now()
		l.resumeIn(conn(), hello)
		if took := time.Since(start); took != 0 {
			t.Fatalf("the new connection waited %v for an older one nobody had read", took)
		}
		if !queued.isDropped() || queued.startReading() {
			t.Fatal("the older connection was not dropped: its reading could still start")
		}

		// Being read: its reading must end first.
		reading := conn()
		if !reading.startReading() {
			t.Fatal("a connection nobody dropped may not be read")
		}
		go func() {
			time.Sleep(300 * time.Millisecond) // the reader sees the close and ends
			close(reading.readDone)
		}()
		start = time.Now()
		l.resumeIn(conn(), hello)
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Fatalf("the new connection waited %v for the older one being read, want its 300ms", took)
		}
		if reading.isDropped() {
			t.Fatal("a connection being read was dropped")
		}
	})
}
