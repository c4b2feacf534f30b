package recovery

// Refusal: which peers this node keeps out of views and quorums because
// their cluster configuration differs from its own, and whether this node
// itself is the one that differs. The host (dlm) decides from what the
// peers advertise; the Manager enforces it:
//
//   - a refused peer is never alive here, so it is in no view this node
//     coordinates; its proposals get no promise, its heartbeats no
//     acknowledgement as a member, and its acknowledgements do not count
//     towards this node's lease;
//   - an isolated node (the odd one out) proposes nothing, promises
//     nothing and holds no lease, so it never serves.

type refusal struct {
	refused  map[string]bool
	isolated string // why this node is isolated; "" while it is not
}

// RefusePeer keeps name out of views and quorums until AcceptPeer. A peer
// in the committed view is left out of the next one.
func (m *Manager) RefusePeer(name string) {
	if name == m.self.Name {
		return
	}
	m.mu.Lock()
	if m.refusal.refused == nil {
		m.refusal.refused = map[string]bool{}
	}
	m.refusal.refused[name] = true
	delete(m.alive, name)
	delete(m.acks, name)
	m.mu.Unlock()
	m.checkLease()
}

// AcceptPeer ends RefusePeer; the peer counts again from the next time
// membership reports it alive.
func (m *Manager) AcceptPeer(name string) {
	m.mu.Lock()
	delete(m.refusal.refused, name)
	m.mu.Unlock()
}

// Isolate stops this node from taking part in views and from holding a
// lease, for the reason given, until Isolate(""); it then waits to be
// taken into a view again.
func (m *Manager) Isolate(why string) {
	m.mu.Lock()
	was := m.refusal.isolated
	m.refusal.isolated = why
	m.mu.Unlock()
	if was == "" && why != "" {
		m.log.Error("isolated: this node takes no part in views and holds no lease", "why", why)
	}
	m.checkLease()
}

// Isolated returns why this node is isolated, "" if it is not.
func (m *Manager) Isolated() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusal.isolated
}

func (m *Manager) refusedLocked(name string) bool { return m.refusal.refused[name] }
