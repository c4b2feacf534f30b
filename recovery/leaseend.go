package recovery

import "time"

// LeaseEnd returns when this node's quorum lease ends if no further
// acknowledgement comes, on this node's monotonic clock: the moment after
// which the others may re-grant what it holds (after their lock-delay).
// held is false while the node holds no lease (from the moment it ends
// on the clock, even before the Manager noticed); a cluster of one holds one
// that never ends, reported as the zero time with held true.
func (m *Manager) LeaseEnd() (end time.Time, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leaseOK || !m.LeaseHeld() {
		return time.Time{}, false
	}
	end, _ = m.leaseEndLocked()
	return end, true
}
