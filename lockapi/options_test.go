package lockapi

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

type owner uint64

func (o owner) ID() uint64 { return uint64(o) }

// Every option sets its field and nothing else; nil options are skipped.
func TestApply(t *testing.T) {
	called := false
	o := Apply([]Option{nil, Try(), WithOwner(owner(7)), OnBlocking(func(modes.Mode) { called = true }),
		WithTTL(time.Second), QueueConvert(), DemoteOnDeadlock(), Expedite(), Cached()})
	if !o.Try || o.Owner.ID() != 7 || o.TTL != time.Second || !o.QueueConvert || !o.DemoteOnDeadlock || !o.Expedite || !o.Cached {
		t.Fatalf("%+v", o)
	}
	o.OnBlocking(modes.EX)
	if !called {
		t.Fatal("OnBlocking's function not kept")
	}
	if z := Apply(nil); z.Try || z.Owner != nil || z.OnBlocking != nil || z.TTL != 0 || z.Cached {
		t.Fatalf("no options: %+v", z)
	}
}

// The invalid-mode error wraps modes.ErrInvalidMode, as dlm's always did.
func TestErrInvalidModeWraps(t *testing.T) {
	if !errors.Is(ErrInvalidMode, modes.ErrInvalidMode) {
		t.Fatal("ErrInvalidMode does not wrap modes.ErrInvalidMode")
	}
}
