package memnet

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// pipePair is one stream: two ends of a net.Pipe, with the names of the
// nodes at each end so that faults can find it. net.Pipe is synchronous (a
// write waits for the reader) and honours deadlines, which is all the links
// and memberlist need; it also blocks durably inside a synctest bubble.
type pipePair struct {
	a, b           string // dialing node, accepting node
	client, server *pipeConn
	net            *Network
}

func newPipePair(n *Network, from, to *endpoint, port int) *pipePair {
	c, s := net.Pipe()
	p := &pipePair{a: from.node, b: to.node, net: n}
	ta, tb := &n.trafficLocked(from.node).Links, &n.trafficLocked(to.node).Links
	if port == GossipPort {
		ta, tb = &n.trafficLocked(from.node).GossipStreams, &n.trafficLocked(to.node).GossipStreams
	}
	p.client = &pipeConn{Conn: c, pair: p, local: Addr(from.addr), remote: Addr(to.addr), sent: ta}
	p.server = &pipeConn{Conn: s, pair: p, local: Addr(to.addr), remote: Addr(from.addr), sent: tb}
	return p
}

// breakBoth closes both ends, as a fault does.
func (p *pipePair) breakBoth() {
	_ = p.client.Conn.Close()
	_ = p.server.Conn.Close()
}

// pipeConn is one end of a stream with memnet addresses.
type pipeConn struct {
	net.Conn
	pair          *pipePair
	local, remote Addr
	once          sync.Once
	sent          *atomic.Uint64 // the writing node's traffic of this kind
}

// Write implements net.Conn, after the network's stream delay.
func (c *pipeConn) Write(b []byte) (int, error) {
	if n := c.pair.net; n != nil {
		if d := n.streamDelay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
	}
	k, err := c.Conn.Write(b)
	if c.sent != nil {
		c.sent.Add(uint64(k))
	}
	return k, err
}

// LocalAddr implements net.Conn.
func (c *pipeConn) LocalAddr() net.Addr { return c.local }

// RemoteAddr implements net.Conn.
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

// Close implements net.Conn. The other end sees EOF, as after a FIN.
func (c *pipeConn) Close() error {
	c.once.Do(func() {
		if n := c.pair.net; n != nil {
			n.mu.Lock()
			delete(n.streams, c.pair)
			n.mu.Unlock()
		}
	})
	return c.Conn.Close()
}
