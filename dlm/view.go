package dlm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A view is the membership of one epoch: who is in the cluster, and so who
// masters what. It is immutable once published; the node swaps in a new one.
type view struct {
	epoch   uint64
	id      uint64    // tells two views of one epoch apart (wire.ViewRef)
	members []*member // sorted by name
	byName  map[string]*member
	byID    map[master.NodeID]*member
	// owner is the master of each bucket (see masterOf): one table lookup
	// per request, whatever the size of the cluster.
	owner [numBuckets]*member
}

type member struct {
	name     string
	id       master.NodeID
	seed     uint64 // rendezvous weight seed: xxhash of the name
	linkAddr string
	bootID   uint64
}

// newView makes a view of members; with none (before the first agreed
// view) it holds self alone, so that routing never finds no master.
func newView(epoch uint64, ms []*member, self *member) *view {
	if len(ms) == 0 {
		ms = []*member{self}
	}
	v := &view{epoch: epoch, byName: map[string]*member{}, byID: map[master.NodeID]*member{}}
	v.members = slices.Clone(ms)
	slices.SortFunc(v.members, func(a, b *member) int { return cmp.Compare(a.name, b.name) })
	d := xxhash.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], epoch)
	_, _ = d.Write(b[:])
	for _, m := range v.members {
		v.byName[m.name] = m
		v.byID[m.id] = m
		binary.LittleEndian.PutUint64(b[:], uint64(len(m.name)))
		_, _ = d.Write(b[:])
		_, _ = d.WriteString(m.name)
		binary.LittleEndian.PutUint64(b[:], m.bootID)
		_, _ = d.Write(b[:])
	}
	v.id = d.Sum64()
	for bk := range v.owner {
		var best *member
		var bestScore uint64
		for _, m := range v.members {
			if s := mix64(uint64(bk) ^ m.seed); best == nil || s > bestScore {
				best, bestScore = m, s
			}
		}
		v.owner[bk] = best
	}
	return v
}

// nodeName names the node of id for people: its name if it is a member of
// the view, else its id.
func (v *view) nodeName(id master.NodeID) string {
	if m := v.byID[id]; m != nil {
		return m.name
	}
	return fmt.Sprintf("node#%d", id)
}

// ref names the view for a wire.Mastery.
func (v *view) ref() wire.ViewRef { return wire.ViewRef{Epoch: v.epoch, ID: v.id} }

// has reports whether the node (name and boot) is a member.
func (v *view) has(name string, boot uint64) bool {
	m := v.byName[name]
	return m != nil && m.bootID == boot
}

// owned returns the buckets m masters in the view.
func (v *view) owned(m *member) bucketSet {
	var s bucketSet
	for b, o := range v.owner {
		if o.name == m.name {
			s.add(b)
		}
	}
	return s
}

// nodeID derives a node's numeric id from its name, the same on every node.
// Config.Validate refuses member lists in which two names collide. Zero is
// avoided so that it can mean "none".
func nodeID(name string) master.NodeID {
	id := master.NodeID(xxhash.Sum64String(name))
	if id == 0 {
		id = 1
	}
	return id
}

func newMember(name, linkAddr string, bootID uint64) *member {
	return &member{name: name, id: nodeID(name), seed: xxhash.Sum64String(name), linkAddr: linkAddr, bootID: bootID}
}

// resourceHash is the hash a resource is mastered and sharded by. Mixing
// in the lockspace's hash spreads the same name in different lockspaces
// over different masters.
func resourceHash(lockspaceSeed uint64, resource string) uint64 {
	return xxhash.Sum64String(resource) ^ lockspaceSeed
}

// Resources are mastered in buckets: a resource's bucket is the low bits
// of its hash, and a bucket's master is picked by rendezvous (highest
// random weight) hashing: every member scores the bucket, the highest
// score wins. When a member joins or leaves, only the buckets it wins or
// won move. Mastering buckets rather than each resource by itself keeps the
// same property and makes "what this node masters" a set of 4096 bits: the
// size of what a recovery exchanges before anything moves (wire.Mastery),
// and a lookup per request that does not grow with the cluster. Written
// here rather than taken from a library because the bucket must come from
// the hash the shard is chosen by (one hash per request).
const numBuckets = wire.MasteryBuckets

// bucketOf is the bucket of a resource hash.
func bucketOf(h uint64) int { return int(h & (numBuckets - 1)) }

// masterOf returns the master of the resource with hash h.
func (v *view) masterOf(h uint64) *member { return v.owner[bucketOf(h)] }

// mix64 is the splitmix64 finaliser: it spreads the bits of x so that
// nearby inputs get unrelated scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
