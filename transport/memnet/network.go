package memnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Ports of a node's two endpoints. Every node has its own loopback IP, so the
// ports can be fixed.
const (
	GossipPort = 7946 // memberlist's packets and streams (Node.Transport)
	LinkPort   = 7947 // the links' streams (Node.StreamLayer)
)

// Sentinel errors.
var (
	// ErrRefused: a dial reached no listening endpoint (unknown address,
	// crashed node, closed listener), as a TCP RST would say.
	ErrRefused = errors.New("memnet: connection refused")
	// ErrAcceptQueueFull: the listener's accept queue is full.
	ErrAcceptQueueFull = errors.New("memnet: accept queue full")
	// ErrNodeExists: AddNode for a name that is running (crash it first).
	ErrNodeExists = errors.New("memnet: node already running")
	// ErrUnknownNode: a fault names a node the network has never seen.
	ErrUnknownNode = errors.New("memnet: unknown node")
)

// Config configures a Network.
type Config struct {
	// Seed seeds the randomness of packet loss, so that a run can be replayed.
	Seed uint64
	// PacketQueue is how many packets a node buffers before it drops new
	// ones, like a full UDP receive buffer. Default 4096.
	PacketQueue int
	// AcceptQueue is how many dialed streams a listener buffers before dials
	// fail. Default 128.
	AcceptQueue int
}

// DefaultConfig returns the defaults described on each field, with seed 1.
func DefaultConfig() Config { return Config{Seed: 1, PacketQueue: 4096, AcceptQueue: 128} }

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	if c.PacketQueue < 1 || c.AcceptQueue < 1 {
		return fmt.Errorf("memnet: PacketQueue (%d) and AcceptQueue (%d) must be positive", c.PacketQueue, c.AcceptQueue)
	}
	return nil
}

// link is a directed pair of node names.
type link struct{ from, to string }

// Network is an in-process network of named nodes with injectable faults.
// All its methods are safe for concurrent use.
type Network struct {
	cfg Config

	mu      sync.Mutex
	rng     *rand.Rand
	ips     map[string]string    // node name → IP, stable across restarts
	nodes   map[string]*Node     // running nodes by name
	byAddr  map[string]*endpoint // open endpoints by "ip:port"
	blocked map[link]bool
	drop    float64
	delay   time.Duration
	streams map[*pipePair]struct{} // open streams, to break on faults
	// streamDelay delays every write on a stream (atomic: read per write).
	streamDelay atomic.Int64
	// sent counts the bytes each node sent, by kind (for measurements).
	sent map[string]*Traffic
}

// Traffic is what one node sent on the network: gossip packets, gossip
// streams (memberlist's push/pull) and link streams, in bytes.
type Traffic struct {
	GossipPackets, GossipStreams, Links atomic.Uint64
}

// Sent returns the bytes node name has sent since the network was made
// (across its restarts).
func (n *Network) Sent(name string) (gossipPackets, gossipStreams, links uint64) {
	t := n.traffic(name)
	return t.GossipPackets.Load(), t.GossipStreams.Load(), t.Links.Load()
}

func (n *Network) traffic(name string) *Traffic {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.trafficLocked(name)
}

func (n *Network) trafficLocked(name string) *Traffic {
	t := n.sent[name]
	if t == nil {
		t = new(Traffic)
		n.sent[name] = t
	}
	return t
}

// SetStreamDelay delays every write on a stream by d (0 = none): a link's
// latency, paid by each batch a writer sends. Dials and packets keep the
// delay SetDelay gives them.
func (n *Network) SetStreamDelay(d time.Duration) { n.streamDelay.Store(int64(max(d, 0))) }

// New returns an empty network.
func New(cfg Config) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Network{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		ips:     map[string]string{},
		nodes:   map[string]*Node{},
		byAddr:  map[string]*endpoint{},
		blocked: map[link]bool{},
		sent:    map[string]*Traffic{},
		streams: map[*pipePair]struct{}{},
	}, nil
}

// AddNode starts a node. A name that ran before and crashed restarts with the
// same IP and fresh endpoints, as a restarted process on the same host would.
func (n *Network) AddNode(name string) (*Node, error) {
	if name == "" {
		return nil, fmt.Errorf("memnet: empty node name")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrNodeExists, name)
	}
	ip, ok := n.ips[name]
	if !ok {
		k := len(n.ips) + 1
		ip = fmt.Sprintf("127.1.%d.%d", k/250, k%250+1)
		n.ips[name] = ip
	}
	nd := &Node{net: n, name: name, ip: ip}
	nd.gossip = n.openLocked(nd, GossipPort, true)
	nd.links = n.openLocked(nd, LinkPort, false)
	nd.transport = &Transport{node: nd, ep: nd.gossip}
	nd.listener = &Listener{node: nd, ep: nd.links}
	n.nodes[name] = nd
	return nd, nil
}

func (n *Network) openLocked(nd *Node, port int, packets bool) *endpoint {
	ep := &endpoint{
		node:   nd.name,
		addr:   fmt.Sprintf("%s:%d", nd.ip, port),
		accept: make(chan *pipeConn, n.cfg.AcceptQueue),
		done:   make(chan struct{}),
	}
	if packets {
		ep.packets = make(chan *packet, n.cfg.PacketQueue)
	}
	n.byAddr[ep.addr] = ep
	return ep
}

// Partition cuts both directions between a and b.
func (n *Network) Partition(a, b string) {
	n.Block(a, b)
	n.Block(b, a)
}

// Block cuts the direction from → to: packets from → to vanish, dials either
// way between the two time out, and streams between them are broken (a
// stream needs both directions, as TCP needs its ACKs).
func (n *Network) Block(from, to string) {
	n.mu.Lock()
	n.blocked[link{from, to}] = true
	broken := n.takeStreamsLocked(func(p *pipePair) bool {
		return (p.a == from && p.b == to) || (p.a == to && p.b == from)
	})
	n.mu.Unlock()
	closeAll(broken)
}

// Reset breaks the streams between a and b, as a connection reset would,
// and leaves the path open: a redial succeeds at once.
func (n *Network) Reset(a, b string) {
	n.mu.Lock()
	broken := n.takeStreamsLocked(func(p *pipePair) bool {
		return (p.a == a && p.b == b) || (p.a == b && p.b == a)
	})
	n.mu.Unlock()
	closeAll(broken)
}

// Isolate partitions name from every other node the network knows.
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	others := make([]string, 0, len(n.ips))
	for o := range n.ips {
		if o != name {
			others = append(others, o)
		}
	}
	n.mu.Unlock()
	for _, o := range others {
		n.Partition(name, o)
	}
}

// Heal removes every partition and block. Loss and delay stay as set.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.blocked)
	n.mu.Unlock()
}

// SetLoss sets the probability in [0, 1] that a packet is dropped.
func (n *Network) SetLoss(p float64) {
	n.mu.Lock()
	n.drop = min(max(p, 0), 1)
	n.mu.Unlock()
}

// SetDelay delays every packet and every dial by d (0 = deliver at once).
func (n *Network) SetDelay(d time.Duration) {
	n.mu.Lock()
	n.delay = max(d, 0)
	n.mu.Unlock()
}

// Crash stops a node at once: its endpoints close (packets to it are dropped,
// dials to it are refused) and its streams break. Nothing is sent on its
// behalf: memberlist peers must detect it by probing. The name can be started
// again with AddNode.
func (n *Network) Crash(name string) error {
	n.mu.Lock()
	nd, ok := n.nodes[name]
	if !ok {
		n.mu.Unlock()
		return fmt.Errorf("%w: %s is not running", ErrUnknownNode, name)
	}
	delete(n.nodes, name)
	n.closeEndpointLocked(nd.gossip)
	n.closeEndpointLocked(nd.links)
	broken := n.takeStreamsLocked(func(p *pipePair) bool { return p.a == name || p.b == name })
	n.mu.Unlock()
	closeAll(broken)
	return nil
}

// Close crashes every running node, so that nothing of the network is left.
func (n *Network) Close() {
	n.mu.Lock()
	names := make([]string, 0, len(n.nodes))
	for name := range n.nodes {
		names = append(names, name)
	}
	n.mu.Unlock()
	for _, name := range names {
		_ = n.Crash(name)
	}
}

func (n *Network) closeEndpointLocked(ep *endpoint) {
	if ep.closed {
		return
	}
	ep.closed = true
	close(ep.done)
	for {
		select {
		case c := <-ep.accept: // dialed but never accepted: reset
			delete(n.streams, c.pair)
			c.pair.breakBoth()
			continue
		default:
		}
		break
	}
	if n.byAddr[ep.addr] == ep {
		delete(n.byAddr, ep.addr)
	}
}

func (n *Network) takeStreamsLocked(match func(*pipePair) bool) []*pipePair {
	var out []*pipePair
	for p := range n.streams {
		if match(p) {
			out = append(out, p)
			delete(n.streams, p)
		}
	}
	return out
}

func closeAll(ps []*pipePair) {
	for _, p := range ps {
		p.breakBoth()
	}
}

// cutLocked reports whether from and to are blocked either way: a stream or
// a dial needs both directions; a packet only its own (see sendPacket).
func (n *Network) cutLocked(from, to string) bool {
	return n.blocked[link{from, to}] || n.blocked[link{to, from}]
}

// route finds the open endpoint for a name (preferred) or an address.
func (n *Network) routeLocked(name, addr string, port int) *endpoint {
	if name != "" {
		if nd, ok := n.nodes[name]; ok {
			if port == GossipPort {
				return nd.gossip
			}
			return nd.links
		}
		return nil
	}
	return n.byAddr[addr]
}
