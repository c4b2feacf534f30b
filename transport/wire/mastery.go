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
}

// ViewRef names a view: its epoch, and a hash of its members (names and
// boots) that tells two views of one epoch apart.
type ViewRef struct {
	Epoch uint64 // ≥ 1
	ID    uint64
}

const (
	masteryFields = 3
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
	if len(m.Views) > MaxMasteryViews {
		return fmt.Errorf("%w: %d views, limit %d", ErrInvalid, len(m.Views), MaxMasteryViews)
	}
	for i, v := range m.Views {
		if err := checkEpoch(v.Epoch); err != nil {
			return fmt.Errorf("view %d: %w", i, err)
		}
		if i > 0 && v.Epoch <= m.Views[i-1].Epoch {
			return fmt.Errorf("view %d: %w: epoch %d after %d: views must be in increasing epochs", i, ErrInvalid, v.Epoch, m.Views[i-1].Epoch)
		}
	}
	return nil
}

func (m *Mastery) appendBody(b []byte) []byte {
	b = appendArrayLen(b, masteryFields)
	b = appendUint(b, m.Epoch)
	b = appendBin(b, m.Tables)
	b = appendArrayLen(b, len(m.Views))
	for _, v := range m.Views {
		b = appendArrayLen(b, viewRefFields)
		b = appendUint(b, v.Epoch)
		b = appendUint(b, v.ID)
	}
	return b
}

func (m *Mastery) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(masteryFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Tables, err = r.bin("tables", MasteryBitmap); err != nil {
		return err
	}
	n, err := r.structArrayLen("views", viewRefFields)
	if err != nil {
		return err
	}
	if n > MaxMasteryViews {
		return fmt.Errorf("%w: %d views, limit %d", ErrInvalid, n, MaxMasteryViews)
	}
	m.Views = reuse(m.Views, n)
	for i := range m.Views {
		v := &m.Views[i]
		if err = r.expectArray(viewRefFields); err != nil {
			return err
		}
		if v.Epoch, err = r.uint64(); err != nil {
			return err
		}
		if v.ID, err = r.uint64(); err != nil {
			return err
		}
	}
	return nil
}
