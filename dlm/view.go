package dlm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/seed-a6839e30/dlm/master"
)

// A view is the membership of one epoch: who is in the cluster, and so who
// masters what. It is immutable once published; the node swaps in a new one.
type view struct {
	epoch   uint64
	members []*member // sorted by name
	byName  map[string]*member
	byID    map[master.NodeID]*member
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
	for _, m := range v.members {
		v.byName[m.name] = m
		v.byID[m.id] = m
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

// masterOf picks the resource's master by rendezvous (highest random
// weight) hashing: every member scores the resource, the highest score
// wins. When a member joins or leaves, only the resources it wins or won
// move. Written here rather than taken from a library because the score
// must come from the hash the shard is chosen by (one hash per request),
// and the popular Go package rehashes the key per lookup.
func (v *view) masterOf(h uint64) *member {
	var best *member
	var bestScore uint64
	for _, m := range v.members {
		if s := mix64(h ^ m.seed); best == nil || s > bestScore {
			best, bestScore = m, s
		}
	}
	return best
}

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
