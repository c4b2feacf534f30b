// Package promreg registers the Prometheus collectors of one component as a
// group: all or none, and all unregistered again when the component stops,
// so that it can be started again on the same registry (a node restarted in
// the same process, for one).
package promreg

import "github.com/prometheus/client_golang/prometheus"

// Group is a set of collectors registered together.
type Group struct {
	reg prometheus.Registerer
	cs  []prometheus.Collector
}

// Register registers cs with reg, or nothing if reg is nil. If one fails,
// those already registered are unregistered and the error is returned.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) (*Group, error) {
	g := &Group{reg: reg}
	if reg == nil {
		return g, nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			g.Unregister()
			return nil, err
		}
		g.cs = append(g.cs, c)
	}
	return g, nil
}

// Unregister unregisters the group's collectors. It may be called on a nil
// group and more than once.
func (g *Group) Unregister() {
	if g == nil || g.reg == nil {
		return
	}
	for _, c := range g.cs {
		g.reg.Unregister(c)
	}
	g.cs = nil
}
