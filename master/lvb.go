package master

import "github.com/seed-a6839e30/dlm/modes"

// lvbOps is the Linux DLM's dlm_lvb_operations table (anchors.md §5):
// lvbOps[granted][requested] is 'R' when the grant copies the resource's value
// to the holder, 'W' when the holder's value is written to the resource, and
// '-' for neither. A new lock reads as if granted NL.
var lvbOps = [modes.Count][modes.Count]byte{
	//    NL   CR   CW   PR   PW   EX
	{'R', 'R', 'R', 'R', 'R', 'R'}, // NL (and new)
	{'-', 'R', 'R', 'R', 'R', 'R'}, // CR
	{'-', '-', 'R', 'R', 'R', 'R'}, // CW
	{'-', '-', '-', 'R', 'R', 'R'}, // PR
	{'W', 'W', 'W', 'W', 'W', 'R'}, // PW
	{'W', 'W', 'W', 'W', 'W', 'W'}, // EX
}

// lvbReads reports whether granting to (from from, or new) reads the value.
// A grant of NL reads nothing: NL gives no access, so it gets no value.
func lvbReads(from, to modes.Mode, isNew bool) bool {
	if to == modes.NL {
		return false
	}
	if isNew {
		from = modes.NL
	}
	return lvbOps[from][to] == 'R'
}

// lvbWrites reports whether a conversion from -> to writes the holder's value.
func lvbWrites(from, to modes.Mode) bool { return lvbOps[from][to] == 'W' }

// releaseWrites reports whether releasing a lock granted in mode m writes.
func releaseWrites(m modes.Mode) bool { return m == modes.PW || m == modes.EX }

func (r *resource) readLVB() LVB {
	if r.lvb == nil {
		return LVB{Valid: true}
	}
	return LVB{Data: r.lvb.data, Seq: r.lvb.seq, Valid: r.lvb.valid}
}

func (r *resource) lvbFor() *lvbState {
	if r.lvb == nil {
		r.lvb = &lvbState{valid: true}
	}
	return r.lvb
}

// applyLVB carries out a holder's write or invalidation.
func (r *resource) applyLVB(op LVBOp, data []byte) {
	switch op {
	case LVBWrite:
		v := r.lvbFor()
		v.data = append(v.data[:0], data...)
		v.seq++
		v.valid = true
	case LVBInvalidate:
		r.lvbFor().valid = false
	}
}

// invalidateLVB marks the value not valid because a holder that could have
// been changing it is gone without writing it back.
func (r *resource) invalidateLVB() { r.lvbFor().valid = false }
