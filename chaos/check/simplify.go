package check

import "time"

// modelRecord is a lock record as the lock models see it.
type modelRecord struct {
	r    *Record
	kind Kind          // Acquire, Convert, Release, or Lost (a release that is never illegal)
	out  Outcome       // OK, Fail or Unknown
	ret  time.Duration // the return time the model uses
	skip bool          // left out of the model's history
}

// lockHistory returns the lock records, in call order, as the lock models
// see them.
//
// It also shrinks porcupine's work, which grows with every operation that
// may be placed anywhere (an Unknown one) or that changes nothing, without
// changing its verdict. The lock models are monotone: removing a client's
// lock from a state makes every operation of the other clients at least as
// legal, and the same client's later acquires too. So:
//
//   - a failed Acquire or Convert has no effect in any state and is left
//     out;
//   - an Unknown Acquire that no later Convert or release of a held lock
//     by its client relies on (they name the lock it would create) is left
//     out: the branch where it never took effect is always at least as
//     good;
//   - a release of unknown or failed outcome that nothing later relies on
//     becomes a release taking effect at its call, the best moment for
//     every other operation.
func lockHistory(recs []Record) []modelRecord {
	type lockKey struct {
		client   int
		resource string
		lock     int
	}
	// reliedOn[k] is the latest Seq of a Convert, or a release of a held
	// lock, naming lock k: operations that need the lock held.
	reliedOn := make(map[lockKey]int)
	for i := range recs {
		r := &recs[i]
		if r.Kind == Convert || (r.Kind == Release && r.Held) {
			reliedOn[lockKey{r.Client, r.Resource, r.lock}] = r.Seq
		}
	}
	relied := func(r *Record) bool {
		last, ok := reliedOn[lockKey{r.Client, r.Resource, r.lock}]
		return ok && last > r.Seq
	}
	var out []modelRecord
	for i := range recs {
		r := &recs[i]
		m := modelRecord{r: r, kind: r.Kind, out: r.Outcome, ret: r.Return}
		switch {
		case r.Kind == Acquire || r.Kind == Convert:
		case r.Kind == Release && r.Held:
		case r.Kind == Release || (r.Kind == Lost && r.Held):
			// The lock ended for the client without a checkable
			// release: a Lost, or an unlock of a lock it no longer
			// believed it held (its belief already ended). Either
			// way it frees the lock if held and is never illegal.
			m.kind = Lost
		default:
			continue
		}
		if m.out == Pending || r.lostDuring {
			m.out = Unknown
		}
		switch {
		case m.out == Fail && (m.kind == Acquire || m.kind == Convert):
			m.skip = true
		case m.out == Unknown && m.kind == Acquire && !relied(r):
			m.skip = true
		case m.out != OK && (m.kind == Release || m.kind == Lost) && !relied(r):
			m.kind, m.out, m.ret = Lost, OK, r.Call
		}
		out = append(out, m)
	}
	return out
}
