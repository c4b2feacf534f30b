package membership

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/memberlist"
)

// delegate implements memberlist's Delegate, EventDelegate, AliveDelegate
// and MergeDelegate. Every method returns quickly and never calls back into
// memberlist: the event methods run under memberlist's node lock (trap T2).
type delegate struct {
	metaMu    sync.Mutex // meta changes with SetTags
	meta      []byte
	clusterID string
	self      string
	q         *queue
	log       *slog.Logger
	met       *metrics
	live      *liveSet
}

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
	_ memberlist.AliveDelegate = (*delegate)(nil)
	_ memberlist.MergeDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate. The meta was sized and validated
// at Start (or SetTags), so it always fits limit.
func (d *delegate) NodeMeta(limit int) []byte {
	d.metaMu.Lock()
	defer d.metaMu.Unlock()
	return d.meta
}

// NotifyMsg implements memberlist.Delegate; dlm sends no gossip messages
// (lock traffic goes over the links, trap T5).
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.push(Join, n) }

// NotifyLeave implements memberlist.EventDelegate.
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.push(Leave, n) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.push(Update, n) }

func (d *delegate) push(kind EventKind, n *memberlist.Node) {
	if n.Name == d.self {
		return
	}
	r := copyNode(kind, n)
	d.live.apply(r)
	d.q.push(r)
}

// NotifyAlive implements memberlist.AliveDelegate: a node whose meta does
// not decode or names another cluster is not admitted.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	return d.admit(n, "alive")
}

// NotifyMerge implements memberlist.MergeDelegate: a join that would merge
// in any node of another cluster is refused as a whole.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := d.admit(n, "merge"); err != nil {
			return err
		}
	}
	return nil
}

func (d *delegate) admit(n *memberlist.Node, via string) error {
	if n.Name == d.self {
		return nil
	}
	m, err := DecodeMeta(n.Meta)
	if err != nil {
		d.met.refused.WithLabelValues("bad_meta").Inc()
		d.log.Warn("refused node with bad metadata", "node", n.Name, "via", via, "err", err)
		return err
	}
	if m.ClusterID != d.clusterID {
		d.met.refused.WithLabelValues("cluster").Inc()
		d.log.Warn("refused node of another cluster", "node", n.Name, "cluster", m.ClusterID, "via", via)
		return fmt.Errorf("membership: node %s is in cluster %q, not %q", n.Name, m.ClusterID, d.clusterID)
	}
	return nil
}
