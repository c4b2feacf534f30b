package wire

import "fmt"

// This file holds the Mastery message, which a recovery exchanges before
// anything moves: with every member's Mastery in hand, each node computes
// the same answer to "which resources change master, and must be rebuilt
// from their holders' reports?", and everything else keeps being served.

// MasteryBuckets is the number of buckets resources are mastered in: a
// resource's bucket is the low bits of its hash, and each bucket has one
// master per view (rendezvous hashing of the bucket over the view's
// members). It is fixed by the protocol: every node must agree on it.
const MasteryBuckets = 4096

// MasteryBitmap is the size in bytes of a Mastery's Tables bitmap.
const MasteryBitmap = MasteryBuckets / 8

// MaxMasteryViews is the most views one Mastery may list. A node whose lock
// state went through more views without a completed rebuild (recoveries
// aborted one after another) forgets its tables and starts its list again.
const MaxMasteryViews = 16

// Mastery: after a view commits and before any member suspends lock traffic
// for the view's recovery, every member tells every other which lock tables
// it holds in full and which views its lock state went through (request;
// reply Ack).
type Mastery struct {
	Epoch uint64 // the view being recovered, ≥ 1
	// Tables is a bitmap of MasteryBuckets bits (bucket b is bit b%8 of byte
	// b/8): the buckets whose lock tables the sender holds in full. Empty
	// means none: a node that just started, or that dropped its tables.
	Tables []byte
	// Views are the views the sender suspended since it last rebuilt its
	// tables (that view first) or since its lock state began, oldest first,
	// epochs strictly increasing; 0..MaxMasteryViews. A node that has never
	// suspended a view (it holds no lock) lists none.
	Views []ViewRef
	// Aborted are the views since the first of Views that the sender sent
	// its Mastery for and did not suspend (the recovery was aborted
	// first), oldest first, epochs strictly increasing; 0..MaxMasteryViews.
	// The others may have suspended such a view: the sender was a member
	// of it and missed none of it, but its tables did not follow it. An
	// optional last field, left out when empty: a Mastery without it
	// decodes with none.
	Aborted []ViewRef
}

// ViewRef names a view: its epoch, and a hash of its members (names and
// boots) that tells two views of one epoch apart.
type ViewRef struct {
	Epoch uint64 // ≥ 1
	ID    uint64
}

const (
	masteryFields = 4 // the last one optional
	viewRefFields = 2
)

// Type implements Message.
func (*Mastery) Type() Type { return TypeMastery }

func (*Mastery) name() string { return "mastery" }

// Validate implements Message.
func (m *Mastery) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if n := len(m.Tables); n != 0 && n != MasteryBitmap {
		return fmt.Errorf("%w: tables bitmap of %d bytes, must be 0 or %d", ErrInvalid, n, MasteryBitmap)
	}
	if err := checkViewRefs("view", m.Views); err != nil {
		return err
	}
	return checkViewRefs("aborted view", m.Aborted)
}

func checkViewRefs(what string, vs []ViewRef) error {
	if len(vs) > MaxMasteryViews {
		return fmt.Errorf("%w: %d %ss, limit %d", ErrInvalid, len(vs), what, MaxMasteryViews)
	}
	for i, v := range vs {
		if err := checkEpoch(v.Epoch); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
		if i > 0 && v.Epoch <= vs[i-1].Epoch {
			return fmt.Errorf("%s %d: %w: epoch %d after %d: views must be in increasing epochs", what, i, ErrInvalid, v.Epoch, vs[i-1].Epoch)
		}
	}
	return nil
}

func (m *Mastery) appendBody(b []byte) []byte {
	fields := masteryFields
	if len(m.Aborted) == 0 {
		fields-- // as a sender that knows no Aborted writes it
	}
	b = appendArrayLen(b, fields)
	b = appendUint(b, m.Epoch)
	b = appendBin(b, m.Tables)
	b = appendViewRefs(b, m.Views)
	if len(m.Aborted) != 0 {
		b = appendViewRefs(b, m.Aborted)
	}
	return b
}

func appendViewRefs(b []byte, vs []ViewRef) []byte {
	b = appendArrayLen(b, len(vs))
	for _, v := range vs {
		b = appendArrayLen(b, viewRefFields)
		b = appendUint(b, v.Epoch)
		b = appendUint(b, v.ID)
	}
	return b
}

func (m *Mastery) decodeBody(r *reader, _ *Decoder) (err error) {
	hasAborted, err := r.fieldsOrOne(masteryFields)
	if err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Tables, err = r.bin("tables", MasteryBitmap); err != nil {
		return err
	}
	if m.Views, err = r.viewRefs("views", m.Views); err != nil {
		return err
	}
	m.Aborted = reuse(m.Aborted, 0)
	if hasAborted {
		m.Aborted, err = r.viewRefs("aborted views", m.Aborted)
	}
	return err
}

func (r *reader) viewRefs(field string, vs []ViewRef) ([]ViewRef, error) {
	n, err := r.structArrayLen(field, viewRefFields)
	if err != nil {
		return nil, err
	}
	if n > MaxMasteryViews {
		return nil, fmt.Errorf("%w: %d %s, limit %d", ErrInvalid, n, field, MaxMasteryViews)
	}
	vs = reuse(vs, n)
	for i := range vs {
		v := &vs[i]
		if err = r.expectArray(viewRefFields); err != nil {
			return nil, err
		}
		if v.Epoch, err = r.uint64(); err != nil {
			return nil, err
		}
		if v.ID, err = r.uint64(); err != nil {
			return nil, err
		}
	}
	return vs, nil
}
