package recovery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Member is one member of a view: a node and the process start (boot) it
// runs. A node that restarts is a different member with the same name.
type Member struct {
	Name   string
	BootID uint64
}

func (m Member) String() string { return fmt.Sprintf("%s@%x", m.Name, m.BootID) }

// View is an agreed membership: every lock message carries its epoch, and
// each resource has one master per view.
type View struct {
	Epoch       uint64
	Coordinator string
	Members     []Member // sorted by name, names unique
	// Config is the cluster configuration the view was agreed under.
	Config Configuration
}

func (v View) String() string {
	names := make([]string, len(v.Members))
	for i, m := range v.Members {
		names[i] = m.String()
	}
	return fmt.Sprintf("epoch %d [%s]", v.Epoch, strings.Join(names, " "))
}

// Has reports whether the member (name and boot) is in the view.
func (v View) Has(m Member) bool {
	i, ok := slices.BinarySearchFunc(v.Members, m.Name, func(a Member, name string) int { return cmp.Compare(a.Name, name) })
	return ok && v.Members[i].BootID == m.BootID
}

// Removed returns the members of prev that are not in v (a restarted node's
// old boot among them).
func Removed(prev, v View) []Member {
	var out []Member
	for _, m := range prev.Members {
		if !v.Has(m) {
			out = append(out, m)
		}
	}
	return out
}

// sameMembers reports whether two sorted member lists are equal.
func sameMembers(a, b []Member) bool { return slices.Equal(a, b) }

func sortMembers(ms []Member) []Member {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return ms
}

func toWire(ms []Member) []wire.ViewMember {
	out := make([]wire.ViewMember, len(ms))
	for i, m := range ms {
		out[i] = wire.ViewMember{Name: m.Name, BootID: m.BootID}
	}
	return out
}

func fromWire(ms []wire.ViewMember) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{Name: m.Name, BootID: m.BootID}
	}
	return out
}
