package recovery

import (
	"context"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Recovery of a committed view, in the phases of the Linux DLM's
// ls_recover, with a barrier between them that the view's coordinator
// keeps:
//
//	each member:  Prepare (learn every member's lock state); Suspend;
//	              Report (its locks on the resources that move, to their
//	              new masters; what it mastered of them); wait out the
//	              lock-delay of every node that is not a member; status 1
//	coordinator:  all at 1 → phase 1
//	each member:  Rebuild (purge the locks of nodes that left; tables of
//	              the moved resources from the reports); status 2
//	coordinator:  all at 2 → phase 2
//	each member:  Resume
//
// A newer view aborts the run wherever it is; the next one starts over
// from what every member then holds, which is always possible because
// every node reports what it holds, not what it was told. Runs never
// overlap: a run starts once the one it aborted has returned. Lost status
// or phase messages are repeated: a member repeats its status every
// StatusInterval until the next phase arrives, and the coordinator answers
// each status with the phase it reached.

// Phases of the barrier.
const (
	phaseReported = 1 // member: reports acknowledged, lock-delay over; coordinator: rebuild
	phaseRebuilt  = 2 // member: tables rebuilt; coordinator: resume
)

type recoveryRun struct {
	prev, view View
	ctx        context.Context
	cancel     context.CancelFunc
	phase      chan uint8 // phases the coordinator ordered, newest wins
}

func (m *Manager) startRunLocked(prev, v View) *recoveryRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recoveryRun{prev: prev, view: v, ctx: ctx, cancel: cancel, phase: make(chan uint8, 1)}
	m.run = r
	return r
}

// Stats are the durations of one completed recovery, as this node saw it.
type Stats struct {
	Epoch     uint64
	Started   time.Time     // when this node started recovering the view
	Removed   []Member      // members of the previous view not in this one
	Added     []Member      // members of this view not in the previous one
	Prepare   time.Duration // learning every member's lock state
	Report    time.Duration // suspend, send every report, get every ack
	LockDelay time.Duration // waiting out removed members' leases
	Barrier1  time.Duration // waiting for every member's reports
	Rebuild   time.Duration // restoring the tables
	Barrier2  time.Duration // waiting for every member's rebuild
	Total     time.Duration // from the commit to locking re-enabled
}

// Work is the recovery's own time: the total less the lock-delay, which is
// a fixed wait for safety, not work.
func (s Stats) Work() time.Duration { return s.Total - s.LockDelay }

// LastStats returns the durations of the latest recovery completed here.
func (m *Manager) LastStats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// recover runs the member's side of one view's recovery.
func (m *Manager) recover(r *recoveryRun) {
	start := time.Now()
	st := Stats{Epoch: r.view.Epoch, Started: start, Removed: Removed(r.prev, r.view), Added: Removed(r.view, r.prev)}
	lap := func(d *time.Duration, t *time.Time) { now := time.Now(); *d = now.Sub(*t); *t = now }
	m.met.recoveries.Inc()
	t := start
	if r.ctx.Err() != nil {
		return // aborted while the run before it ended
	}
	if err := m.host.Prepare(r.ctx, r.view); err != nil {
		if r.ctx.Err() == nil {
			m.log.Warn("recovery: members' lock state not learned; waiting for a new view", "epoch", r.view.Epoch, "err", err)
		}
		return
	}
	lap(&st.Prepare, &t)
	m.met.phase.WithLabelValues("prepare").Observe(st.Prepare.Seconds())
	m.host.Suspend(r.view)
	if err := m.host.Report(r.ctx, r.view); err != nil {
		if r.ctx.Err() == nil {
			m.log.Warn("recovery: reports not acknowledged; waiting for a new view", "epoch", r.view.Epoch, "err", err)
		}
		return
	}
	lap(&st.Report, &t)
	if !m.waitLockDelay(r) {
		return
	}
	lap(&st.LockDelay, &t)
	m.met.phase.WithLabelValues("report").Observe(st.Report.Seconds())
	m.met.phase.WithLabelValues("lockdelay").Observe(st.LockDelay.Seconds())
	if !m.barrierWait(r, phaseReported) {
		return
	}
	lap(&st.Barrier1, &t)
	m.host.Rebuild(r.view)
	lap(&st.Rebuild, &t)
	m.met.phase.WithLabelValues("rebuild").Observe(st.Rebuild.Seconds())
	if !m.barrierWait(r, phaseRebuilt) {
		return
	}
	lap(&st.Barrier2, &t)
	m.mu.Lock()
	if m.run != r { // a newer view came in between
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.host.Resume(r.view)
	st.Total = time.Since(start)
	m.mu.Lock()
	current := m.run == r
	if current {
		m.resumed, m.recoveredView = r.view.Epoch, r.view
		m.run = nil
		m.stats = st
	}
	served := m.noteServedLocked()
	m.mu.Unlock()
	if served {
		close(m.served)
	}
	if f := m.cfg.OnRecovered; f != nil && current {
		f(st)
	}
	m.met.phase.WithLabelValues("total").Observe(time.Since(start).Seconds())
	m.log.Info("recovery done", "epoch", r.view.Epoch, "took", time.Since(start))
}

// waitLockDelay waits until LockDelay has passed since the last heartbeat
// this node acknowledged for every node (name and boot) that is not a
// member of the view: not only those the view removed from the one before,
// but also those an aborted view removed, whose locks this view's rebuild
// purges just the same. It reports false if the run was aborted meanwhile.
func (m *Manager) waitLockDelay(r *recoveryRun) bool {
	if m.noLockDelay {
		return true
	}
	var until time.Time
	m.mu.Lock()
	now := time.Now()
	for gone, t := range m.ackGiven {
		if r.view.Has(gone) {
			continue
		}
		end := t.Add(m.cfg.LockDelay())
		if !end.After(now) {
			delete(m.ackGiven, gone) // long over: nothing to wait for again
			continue
		}
		if end.After(until) {
			until = end
		}
	}
	m.mu.Unlock()
	if d := time.Until(until); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.ctx.Done():
			return false
		}
	}
	return true
}

// barrierWait reports phase done to the coordinator, repeating it, until
// the coordinator orders that phase, or the run is aborted (false).
func (m *Manager) barrierWait(r *recoveryRun, phase uint8) bool {
	st := &wire.RecoveryStatus{Epoch: r.view.Epoch, Phase: phase}
	t := time.NewTicker(m.cfg.StatusInterval)
	defer t.Stop()
	m.sendStatus(r.view.Coordinator, st)
	for {
		select {
		case got := <-r.phase:
			if got >= phase {
				if got > phase { // the coordinator is ahead: keep the news
					r.offer(got)
				}
				return true
			}
			// An older phase: the others are not there yet. Repeat only on
			// the ticker, or status and answer would chase each other.
		case <-t.C:
			m.sendStatus(r.view.Coordinator, st)
		case <-r.ctx.Done():
			return false
		}
	}
}

func (m *Manager) sendStatus(coordinator string, st *wire.RecoveryStatus) {
	if coordinator == m.self.Name {
		m.onStatus(m.self, st)
		return
	}
	_ = m.links.Send(coordinator, st)
}

func (r *recoveryRun) offer(phase uint8) {
	for {
		select {
		case r.phase <- phase:
			return
		case old := <-r.phase:
			phase = max(phase, old)
		}
	}
}

// onStatus is the coordinator's side: record a member's phase, and when
// every member has reached it, order the next.
func (m *Manager) onStatus(from Member, st *wire.RecoveryStatus) {
	m.mu.Lock()
	if st.Phase == phaseResync {
		if st.Epoch == m.committed.Epoch && m.committed.Coordinator == m.self.Name {
			m.forceAfter = max(m.forceAfter, st.Epoch)
		}
		m.mu.Unlock()
		return
	}
	b := &m.barrier
	if st.Epoch != b.epoch || m.committed.Epoch != st.Epoch || m.committed.Coordinator != m.self.Name || !m.committed.Has(from) {
		m.mu.Unlock()
		return
	}
	if st.Phase > b.statuses[from.Name] {
		b.statuses[from.Name] = st.Phase
	}
	reached := false
	if b.sent < st.Phase && m.allAtLocked(st.Phase) {
		b.sent, reached = st.Phase, true
	}
	sent, members := b.sent, m.committed.Members
	m.mu.Unlock()
	if sent < st.Phase {
		return // the member is ahead of the others: it waits for them
	}
	ph := &wire.RecoveryPhase{Epoch: st.Epoch, Phase: sent}
	if sent == st.Phase && reached {
		for _, mem := range members {
			m.sendPhase(mem.Name, ph)
		}
		return
	}
	m.sendPhase(from.Name, ph) // a repeat from one that missed the order
}

func (m *Manager) allAtLocked(phase uint8) bool {
	for _, mem := range m.committed.Members {
		if m.barrier.statuses[mem.Name] < phase {
			return false
		}
	}
	return true
}

func (m *Manager) sendPhase(to string, ph *wire.RecoveryPhase) {
	if to == m.self.Name {
		m.onPhase(ph)
		return
	}
	_ = m.links.Send(to, ph)
}

// onPhase hands a coordinator's order to the run of its epoch.
func (m *Manager) onPhase(ph *wire.RecoveryPhase) {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r != nil && r.view.Epoch == ph.Epoch {
		r.offer(ph.Phase)
	}
}

// driveBarrier repeats the Commit to members of the current view that have
// not reported any phase yet (a lost Commit would otherwise stall the view).
func (m *Manager) driveBarrier() {
	m.mu.Lock()
	v := m.committed
	if v.Coordinator != m.self.Name || m.barrier.epoch != v.Epoch || m.barrier.sent >= phaseRebuilt {
		m.mu.Unlock()
		return
	}
	var late []string
	for _, mem := range v.Members {
		if mem.Name != m.self.Name && m.barrier.statuses[mem.Name] == 0 {
			late = append(late, mem.Name)
		}
	}
	m.mu.Unlock()
	if len(late) == 0 {
		return
	}
	c := &wire.Commit{Epoch: v.Epoch, Coordinator: v.Coordinator, Members: toWire(v.Members), Config: v.Config.toWire()}
	for _, name := range late {
		_ = m.links.Send(name, c)
	}
}
