package memnet

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Node is one running node: a memberlist transport and a links listener on
// its own IP.
type Node struct {
	net       *Network
	name, ip  string
	gossip    *endpoint
	links     *endpoint
	transport *Transport
	listener  *Listener
}

// Name returns the node's name.
func (nd *Node) Name() string { return nd.name }

// GossipAddr returns the "ip:port" of the node's memberlist transport.
func (nd *Node) GossipAddr() string { return nd.gossip.addr }

// LinkAddr returns the "ip:port" of the node's links listener.
func (nd *Node) LinkAddr() string { return nd.links.addr }

// Transport returns the node's memberlist transport.
func (nd *Node) Transport() *Transport { return nd.transport }

// StreamLayer returns the node's listener for the links, which also dials.
func (nd *Node) StreamLayer() *Listener { return nd.listener }

// endpoint is one listening address. packets is nil for a stream-only
// endpoint. closed is guarded by Network.mu; done is closed with it.
type endpoint struct {
	node    string
	addr    string
	packets chan *packet
	accept  chan *pipeConn
	done    chan struct{}
	closed  bool

	acceptOnce sync.Once
	streamCh   chan net.Conn // memberlist's view of accept, see acceptCh
}

type packet = memberlist.Packet

// Addr is a memnet address, "ip:port".
type Addr string

// Network implements net.Addr.
func (Addr) Network() string { return "memnet" }

// String implements net.Addr.
func (a Addr) String() string { return string(a) }

// sendPacket delivers a copy of b from node `from` to the gossip endpoint
// named toName (or at toAddr), unless the network loses it. It never blocks.
func (n *Network) sendPacket(from *endpoint, toName, toAddr string, b []byte) {
	n.mu.Lock()
	dst := n.routeLocked(toName, toAddr, GossipPort)
	lost := dst == nil || dst.closed || dst.packets == nil || from.closed ||
		n.blocked[link{from.node, dst.node}] || (n.drop > 0 && n.rng.Float64() < n.drop)
	delay := n.delay
	n.mu.Unlock()
	if lost {
		return
	}
	n.traffic(from.node).GossipPackets.Add(uint64(len(b)))
	p := &packet{Buf: append([]byte(nil), b...), From: Addr(from.addr), Timestamp: time.Now()}
	if delay == 0 {
		n.deliver(from, dst, p)
		return
	}
	time.AfterFunc(delay, func() { n.deliver(from, dst, p) })
}

// deliver queues p unless the receiver closed or the link was cut meanwhile,
// or its queue is full.
func (n *Network) deliver(from, dst *endpoint, p *packet) {
	n.mu.Lock()
	ok := !dst.closed && !n.blocked[link{from.node, dst.node}]
	n.mu.Unlock()
	if !ok {
		return
	}
	select {
	case dst.packets <- p:
	default: // full: dropped, like a UDP receive buffer
	}
}

// dial connects from's node to the endpoint at addr (or named toName). On a
// cut link it waits until ctx ends, as a dial whose SYNs are dropped.
func (n *Network) dial(ctx context.Context, from *endpoint, toName, toAddr string, port int) (net.Conn, error) {
	n.mu.Lock()
	delay := n.delay
	n.mu.Unlock()
	if delay > 0 {
		if err := wait(ctx, from, delay); err != nil {
			return nil, err
		}
	}
	n.mu.Lock()
	if from.closed {
		n.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(toAddr), Err: net.ErrClosed}
	}
	dst := n.routeLocked(toName, toAddr, port)
	if dst == nil || dst.closed {
		n.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(toAddr), Err: ErrRefused}
	}
	if n.cutLocked(from.node, dst.node) {
		n.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-from.done:
		}
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(toAddr), Err: dialTimeout(ctx)}
	}
	pair := newPipePair(n, from, dst, port)
	select {
	case dst.accept <- pair.server:
		n.streams[pair] = struct{}{}
		n.mu.Unlock()
		return pair.client, nil
	default:
		n.mu.Unlock()
		pair.breakBoth()
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(toAddr), Err: ErrAcceptQueueFull}
	}
}

func dialTimeout(ctx context.Context) error {
	if ctx.Err() == context.Canceled {
		return ctx.Err()
	}
	return os.ErrDeadlineExceeded
}

func wait(ctx context.Context, from *endpoint, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-from.done:
		return net.ErrClosed
	}
}

// closeEndpoint closes one endpoint of a running node.
func (n *Network) closeEndpoint(ep *endpoint) {
	n.mu.Lock()
	n.closeEndpointLocked(ep)
	n.mu.Unlock()
}

// Transport is a memberlist.NodeAwareTransport on a memnet node.
type Transport struct {
	node *Node
	ep   *endpoint
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// FinalAdvertiseAddr implements memberlist.Transport: the node's own IP and
// gossip port, whatever was asked.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.ParseIP(t.node.ip), GossipPort, nil
}

// WriteTo implements memberlist.Transport. It never blocks.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.node.net.sendPacket(t.ep, "", addr, b)
	return time.Now(), nil
}

// WriteToAddress implements memberlist.NodeAwareTransport, routing by name
// when one is given.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.node.net.sendPacket(t.ep, a.Name, a.Addr, b)
	return time.Now(), nil
}

// PacketCh implements memberlist.Transport.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.ep.packets }

// DialTimeout implements memberlist.Transport.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.node.net.dial(ctx, t.ep, a.Name, a.Addr, GossipPort)
}

// StreamCh implements memberlist.Transport.
func (t *Transport) StreamCh() <-chan net.Conn { return acceptCh(t.ep) }

// Shutdown implements memberlist.Transport: the gossip endpoint closes.
func (t *Transport) Shutdown() error {
	t.node.net.closeEndpoint(t.ep)
	return nil
}

// acceptCh adapts the endpoint's typed accept queue to the chan net.Conn
// memberlist wants. memberlist reads StreamCh once per loop, so the adapter
// is made once per endpoint.
func acceptCh(ep *endpoint) <-chan net.Conn {
	ep.acceptOnce.Do(func() {
		ep.streamCh = make(chan net.Conn)
		go func() {
			for {
				select {
				case c := <-ep.accept:
					select {
					case ep.streamCh <- c:
					case <-ep.done:
						_ = c.Close()
						return
					}
				case <-ep.done:
					return
				}
			}
		}()
	})
	return ep.streamCh
}

// Listener is the links' stream layer on a memnet node: it accepts streams
// dialed to the node's link address and dials from the node.
type Listener struct {
	node *Node
	ep   *endpoint
}

// Accept implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ep.accept:
		return c, nil
	case <-l.ep.done:
		return nil, &net.OpError{Op: "accept", Net: "memnet", Addr: Addr(l.ep.addr), Err: net.ErrClosed}
	}
}

// Close implements net.Listener: the link endpoint closes; dials to it are
// refused and dials from it fail.
func (l *Listener) Close() error {
	l.node.net.closeEndpoint(l.ep)
	return nil
}

// Addr implements net.Listener.
func (l *Listener) Addr() net.Addr { return Addr(l.ep.addr) }

// Dial connects to the link listener at addr.
func (l *Listener) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return l.node.net.dial(ctx, l.ep, "", addr, LinkPort)
}

func (ep *endpoint) String() string { return fmt.Sprintf("%s(%s)", ep.node, ep.addr) }
