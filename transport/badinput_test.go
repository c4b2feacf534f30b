package transport_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/memnet"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func frameOf(t testing.TB, h wire.Header, m wire.Message) []byte {
	t.Helper()
	l := wire.DefaultLimits()
	b, err := wire.AppendFrame(nil, h, m, &l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawFrame builds a frame from raw header bytes and a body.
func rawFrame(version, typ byte, id uint64, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(wire.HeaderSize+len(body)))
	b = append(b, version, typ)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

func blockingFrame(t testing.TB) []byte {
	return frameOf(t, wire.Header{}, &wire.Blocking{Epoch: 1, Lockspace: "ls", Lock: 1, Mode: modes.EX})
}

// rawConn dials addr from a memnet node and, if hello is set, does the
// dialer's half of the handshake by hand.
func rawConn(t *testing.T, from *memnet.Node, addr string, hello *wire.Hello) net.Conn {
	t.Helper()
	c, err := from.StreamLayer().Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if hello == nil {
		return c
	}
	if _, err := c.Write(frameOf(t, wire.Header{}, hello)); err != nil {
		t.Fatal(err)
	}
	var prefix [4]byte
	if _, err := io.ReadFull(c, prefix[:]); err != nil {
		t.Fatalf("no Hello back: %v", err)
	}
	if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(prefix[:]))); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitClosed reads until the other end closes the connection.
func waitClosed(c net.Conn) {
	_, _ = io.Copy(io.Discard, c)
	_ = c.Close()
}

func evilHello() *wire.Hello {
	return &wire.Hello{Version: wire.LinkVersion, ClusterID: cluster, Node: "evil", BootID: 666, Session: 1}
}

// Each malformed frame closes only its own connection, is counted under its
// reason, reaches no handler, and the node keeps serving its other peers.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	bomb := []byte{0x94, 1, 0xa2, 'l', 's', 0, 0xdd, 0x01, 0x31, 0x2d, 0x00} // Renew, array32 of 20,000,000
	cases := []struct {
		reason string
		bytes  func(t testing.TB) []byte
		hangUp bool // the bad frame is only complete once the sender closes
	}{
		{"too_large", func(testing.TB) []byte { return []byte{0xff, 0xff, 0xff, 0xff} }, false},
		{"truncated", func(t testing.TB) []byte { return blockingFrame(t)[:12] }, true},
		{"version", func(t testing.TB) []byte {
			f := blockingFrame(t)
			f[4] = 9
			return f
		}, false},
		{"unknown_type", func(testing.TB) []byte { return rawFrame(wire.Version, 0x7e, 0, []byte{0x90}) }, false},
		{"declared_length", func(testing.TB) []byte { return rawFrame(wire.Version, byte(wire.TypeRenew), 0, bomb) }, false},
		{"invalid", func(t testing.TB) []byte {
			f := blockingFrame(t)
			f[15] = 0 // epoch 0
			return f
		}, false},
		{"trailing_bytes", func(t testing.TB) []byte {
			f := append(blockingFrame(t), 0xc0)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			return f
		}, false},
		{"malformed", func(testing.TB) []byte {
			return rawFrame(wire.Version, byte(wire.TypeBlocking), 0, []byte{0x94, 0xa1, 'x', 0xa2, 'l', 's', 1, 1})
		}, false},
		{"unexpected_hello", func(t testing.TB) []byte { return frameOf(t, wire.Header{}, evilHello()) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := newNet(t)
				nodes := memCluster(t, net, nil, "a", "b")
				defer closeAll(nodes)
				a, b := nodes["a"], nodes["b"]
				callOK(t, a, "b", 1)
				evil, err := net.AddNode("evil")
				if err != nil {
					t.Fatal(err)
				}
				c := rawConn(t, evil, b.addr, evilHello())
				before := allocated()
				_, _ = c.Write(tc.bytes(t))
				if tc.hangUp {
					_ = c.Close()
					synctest.Wait()
				} else {
					waitClosed(c)
				}
				synctest.Wait()
				if got := allocated() - before; got > 4<<20 {
					t.Errorf("refusing the frame allocated %d bytes", got)
				}
				if got := counter(t, b.reg, "dlm_transport_frames_rejected_total", "reason", tc.reason); got != 1 {
					t.Errorf("frames_rejected_total{reason=%q} = %v, want 1", tc.reason, got)
				}
				for _, m := range b.rec.messages() {
					if m.from == "evil" {
						t.Errorf("handler got %+v from the bad connection", m)
					}
				}
				callOK(t, a, "b", 2)
				callOK(t, b, "a", 3)
			})
		})
	}
}

func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// Connections from another cluster, another protocol version, or that do
// not start with a Hello are refused at the handshake.
func TestHandshakeRefusals(t *testing.T) {
	cases := []struct {
		reason string
		first  func(t testing.TB) []byte
	}{
		{"cluster", func(t testing.TB) []byte {
			h := evilHello()
			h.ClusterID = "other-cluster"
			return frameOf(t, wire.Header{}, h)
		}},
		{"version", func(t testing.TB) []byte {
			h := evilHello()
			h.Version = wire.LinkVersion + 1
			return frameOf(t, wire.Header{}, h)
		}},
		{"no_hello", blockingFrame},
		{"same_name", func(t testing.TB) []byte {
			h := evilHello()
			h.Node = "b"
			return frameOf(t, wire.Header{}, h)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := newNet(t)
				nodes := memCluster(t, net, nil, "a", "b")
				defer closeAll(nodes)
				b := nodes["b"]
				evil, err := net.AddNode("evil")
				if err != nil {
					t.Fatal(err)
				}
				c := rawConn(t, evil, b.addr, nil)
				_, _ = c.Write(tc.first(t))
				waitClosed(c)
				synctest.Wait()
				if got := counter(t, b.reg, "dlm_transport_handshakes_rejected_total", "reason", tc.reason); got != 1 {
					t.Errorf("handshakes_rejected_total{reason=%q} = %v", tc.reason, got)
				}
				if got := b.rec.messages(); len(got) != 0 {
					t.Errorf("handler got %v", got)
				}
				callOK(t, nodes["a"], "b", 1)
			})
		})
	}
}
