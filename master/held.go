package master

import "github.com/seed-a6839e30/dlm/modes"

// heldModes summarises the granted modes on a resource (of locks on the
// granted and convert queues) in 12 bytes instead of six counters. It relies
// on the invariant that granted modes are pairwise compatible: then at most
// one PW and one EX can be held, and CW and PR, which are incompatible, are
// never held together, so one counter serves whichever of them is held. NL
// conflicts with nothing and is not counted.
type heldModes struct {
	cr     uint32
	shared uint32     // holders of CW or of PR
	kind   modes.Mode // CW or PR while shared > 0
	pw, ex uint8
	// sem marks the resource a semaphore (semaphore.go). Its locks hold no
	// mode (NL, which is not counted), so cr and shared are free there:
	// they count the permits granted and the semaphore's permits. Keeping
	// them here keeps a resource at 64 bytes.
	sem bool
}

// counts expands the summary to a count per mode (NL left at zero).
func (h *heldModes) counts() (c [modes.Count]uint32) {
	c[modes.CR], c[modes.PW], c[modes.EX] = h.cr, uint32(h.pw), uint32(h.ex)
	if h.shared > 0 {
		c[h.kind] = h.shared
	}
	return c
}

// fits reports whether a lock granted m could be added without breaking the
// invariant the summary depends on. Only restored locks need the check;
// the grant rules never add a conflicting mode.
func (h *heldModes) fits(m modes.Mode) bool {
	c := h.counts()
	for held, n := range c {
		if n > 0 && !modes.Compatible(modes.Mode(held), m) {
			return false
		}
	}
	return true
}

func (h *heldModes) add(m modes.Mode) {
	switch m {
	case modes.CR:
		h.cr++
	case modes.CW, modes.PR:
		h.kind = m
		h.shared++
	case modes.PW:
		h.pw++
	case modes.EX:
		h.ex++
	}
}

func (h *heldModes) remove(m modes.Mode) {
	switch m {
	case modes.CR:
		h.cr--
	case modes.CW, modes.PR:
		h.shared--
	case modes.PW:
		h.pw--
	case modes.EX:
		h.ex--
	}
}

// conflicts reports whether rq is incompatible with a held mode, leaving out
// one holder in mode self when hasSelf is set (a converting lock does not
// conflict with itself).
func (h *heldModes) conflicts(rq modes.Mode, self modes.Mode, hasSelf bool) bool {
	c := h.counts()
	if hasSelf && self != modes.NL {
		c[self]--
	}
	for held := modes.CR; held <= modes.EX; held++ {
		if c[held] > 0 && !modes.Compatible(held, rq) {
			return true
		}
	}
	return false
}
