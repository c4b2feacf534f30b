package membership

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
)

// EventKind says what happened to a member.
type EventKind uint8

// Event kinds.
const (
	// Join: a node became an alive member (first seen, or back after a
	// Leave).
	Join EventKind = iota + 1
	// Leave: a node was declared dead or left. memberlist's word only: a
	// leave is not proof that the node stopped (traps T4, T7).
	Leave
	// Update: an alive member's metadata changed, same boot (for example its
	// link address).
	Update
	// Restart: an alive member's boot ID changed without a Leave in between:
	// it crashed and restarted faster than the failure detector noticed
	// (trap T3). Treat it as a Leave of PrevBootID followed by a Join.
	Restart
)

func (k EventKind) String() string {
	switch k {
	case Join:
		return "join"
	case Leave:
		return "leave"
	case Update:
		return "update"
	case Restart:
		return "restart"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Member is a node as membership sees it.
type Member struct {
	Name       string // unique node name
	GossipAddr string // memberlist's "host:port"
	Meta              // what the node gossips about itself
}

// Event is one change of the membership.
type Event struct {
	Kind       EventKind
	Member     Member
	PrevBootID uint64 // for Restart: the boot ID that is gone
}

func (e Event) String() string {
	if e.Kind == Restart {
		return fmt.Sprintf("%v %s boot %x→%x", e.Kind, e.Member.Name, e.PrevBootID, e.Member.BootID)
	}
	return fmt.Sprintf("%v %s boot %x", e.Kind, e.Member.Name, e.Member.BootID)
}

// rawEvent is a memberlist callback, copied so that memberlist's node can
// change after the callback returns.
type rawEvent struct {
	kind EventKind // Join, Leave or Update, as memberlist reported it
	name string
	addr string
	meta []byte
}

func copyNode(kind EventKind, n *memberlist.Node) rawEvent {
	return rawEvent{
		kind: kind,
		name: n.Name,
		addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		meta: append([]byte(nil), n.Meta...),
	}
}

// queue is an unbounded FIFO between memberlist's callbacks (which must
// never block, trap T2) and the one goroutine that delivers events.
type queue struct {
	mu     sync.Mutex
	items  []rawEvent
	signal chan struct{} // 1-buffered
}

func newQueue() *queue { return &queue{signal: make(chan struct{}, 1)} }

func (q *queue) push(e rawEvent) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *queue) take() []rawEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

// tracker turns memberlist's reports into Events. It remembers the boot ID
// of every alive member, which is how a restart hidden behind an update is
// told apart (trap T3). It is used by the delivery goroutine only.
type tracker struct {
	boots map[string]uint64
}

func (t *tracker) translate(r rawEvent, meta Meta) Event {
	ev := Event{Kind: r.kind, Member: Member{Name: r.name, GossipAddr: r.addr, Meta: meta}}
	prev, known := t.boots[r.name]
	switch r.kind {
	case Leave:
		delete(t.boots, r.name)
		return ev
	case Join, Update:
		if known && prev != meta.BootID {
			ev.Kind, ev.PrevBootID = Restart, prev
		} else if !known {
			ev.Kind = Join // an update for a node we never saw join
		}
		t.boots[r.name] = meta.BootID
	}
	return ev
}

// liveSet is the set of members memberlist last reported alive, copied in
// its event callbacks (which run under memberlist's node lock, so each copy
// is consistent). A member whose meta does not decode is left out: it could
// not have been admitted.
type liveSet struct {
	mu sync.Mutex
	m  map[string]Member
}

func newLiveSet() *liveSet { return &liveSet{m: map[string]Member{}} }

func (l *liveSet) apply(r rawEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.kind == Leave {
		delete(l.m, r.name)
		return
	}
	meta, err := DecodeMeta(r.meta)
	if err != nil {
		delete(l.m, r.name)
		return
	}
	l.m[r.name] = Member{Name: r.name, GossipAddr: r.addr, Meta: meta}
}

func (l *liveSet) members() []Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Member, 0, len(l.m))
	for _, mem := range l.m {
		out = append(out, mem)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}
