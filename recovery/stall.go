package recovery

import (
	"time"
)

// Stalled agreement: proposals that keep failing are logged with the member
// that refused and its reason, so that an operator (or a chaos run's logs)
// can tell why no view commits; each round alone is logged at debug level
// only, as most failures are one round lost to a race and retried at once.

// stallWarnAfter is how long proposals must have been failing before it is
// logged, and how often it is logged again while they still fail: longer
// than a view change takes with a failure detected (the lock-delay is not
// part of agreement), short enough to be seen beside the fault that
// caused it.
const stallWarnAfter = 2 * time.Second

// refusedBy is the member that did not promise in a round, and why.
type refusedBy struct {
	member Member
	why    string
}

// stall counts the proposal rounds this node coordinated that failed since
// a view last committed here.
type stall struct {
	since, logged time.Time
	rounds        int
}

// noteFailedRoundLocked records a failed round of epoch, and logs once
// stallWarnAfter has passed since the first.
func (m *Manager) noteFailedRoundLocked(epoch uint64, by refusedBy) {
	now := time.Now()
	st := &m.stall
	if st.rounds == 0 {
		st.since = now
	}
	st.rounds++
	if now.Sub(st.since) < stallWarnAfter || now.Sub(st.logged) < stallWarnAfter {
		return
	}
	st.logged = now
	member := by.member.String()
	if by.member.Name == "" {
		member, by.why = "", "no refusal: the round ran out of time"
	}
	m.log.Warn("no view agreed: proposals keep failing",
		"for", now.Sub(st.since).Round(time.Millisecond), "rounds", st.rounds, "epoch", epoch,
		"member", member, "reason", by.why)
}

// agreedLocked ends a stall: a view committed.
func (m *Manager) agreedLocked(epoch uint64) {
	st := &m.stall
	if !st.logged.IsZero() {
		m.log.Info("view agreed after failed proposals", "epoch", epoch, "rounds", st.rounds,
			"after", time.Since(st.since).Round(time.Millisecond))
	}
	*st = stall{}
}
