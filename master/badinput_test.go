package master

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestBadInputLeavesTableUnchanged checks every input error: it is the
// sentinel the API documents, it differs from the others, and the table
// (queues, value, tokens, effects) is exactly as before.
func TestBadInputLeavesTableUnchanged(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxNameLen, cfg.MaxLVB = 8, 4
	tbl := New(cfg)
	own := LockID{Node: 1, ID: 1}
	mustGrant(t, tbl, Request{Resource: "r", Lock: own, Owner: 7, Mode: modes.EX})
	queued := LockID{Node: 2, ID: 1}
	if res, err := tbl.Request(Request{Resource: "r", Lock: queued, Mode: modes.PR}); err != nil || res.Status != Queued {
		t.Fatalf("setup: %v %v", res, err)
	}
	gone := LockID{Node: 3, ID: 5}
	mustGrant(t, tbl, Request{Resource: "s", Lock: gone, Mode: modes.NL})
	if err := tbl.Release(Release{Lock: gone}); err != nil {
		t.Fatal(err)
	}
	tbl.Effects()

	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"unknown mode", ErrInvalidMode, func() error {
			_, err := tbl.Request(Request{Resource: "r", Lock: LockID{Node: 1, ID: 9}, Mode: 6})
			return err
		}},
		{"unknown mode in convert", ErrInvalidMode, func() error {
			_, err := tbl.Convert(Convert{Lock: own, Owner: 7, Mode: 99})
			return err
		}},
		{"empty name", ErrEmptyName, func() error {
			_, err := tbl.Request(Request{Lock: LockID{Node: 1, ID: 9}, Mode: modes.NL})
			return err
		}},
		{"name too long", ErrNameTooLong, func() error {
			_, err := tbl.Request(Request{Resource: "123456789", Lock: LockID{Node: 1, ID: 9}, Mode: modes.NL})
			return err
		}},
		{"LVB too large", ErrLVBTooLarge, func() error {
			return tbl.Release(Release{Lock: own, Owner: 7, LVBOp: LVBWrite, LVB: []byte("12345")})
		}},
		{"bad flags", ErrInvalidFlags, func() error {
			_, err := tbl.Request(Request{Resource: "r", Lock: LockID{Node: 1, ID: 9}, Mode: modes.PR, Flags: Expedite})
			return err
		}},
		{"lock id reused", ErrLockExists, func() error {
			_, err := tbl.Request(Request{Resource: "r", Lock: own, Mode: modes.NL})
			return err
		}},
		{"convert of unknown lock", ErrUnknownLock, func() error {
			_, err := tbl.Convert(Convert{Lock: LockID{Node: 9, ID: 1}, Mode: modes.NL})
			return err
		}},
		{"unlock of unknown lock", ErrUnknownLock, func() error {
			return tbl.Release(Release{Lock: LockID{Node: 1, ID: 77}})
		}},
		{"unlock of another owner's lock", ErrNotOwner, func() error {
			return tbl.Release(Release{Lock: own, Owner: 8})
		}},
		{"convert of another owner's lock", ErrNotOwner, func() error {
			_, err := tbl.Convert(Convert{Lock: own, Owner: 8, Mode: modes.NL})
			return err
		}},
		{"double unlock", ErrReleased, func() error {
			return tbl.Release(Release{Lock: gone})
		}},
		{"convert of a waiting lock", ErrNotGranted, func() error {
			_, err := tbl.Convert(Convert{Lock: queued, Mode: modes.EX})
			return err
		}},
		{"cancel with nothing queued", ErrNotPending, func() error {
			return tbl.Cancel(own, 7)
		}},
		{"restore of a conflicting lock", ErrIncompatible, func() error {
			return tbl.Restore(LockState{Resource: "r", Lock: LockID{Node: 4, ID: 1}, Queue: QueueGranted, Granted: modes.PR, Requested: modes.PR})
		}},
	}
	before := tbl.Dump()
	beforeTok := tbl.LastToken()
	seen := map[error]string{}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if prev, dup := seen[c.want]; dup && prev != c.name && !sameFamily(prev, c.name) {
			t.Errorf("%s and %s share a sentinel", prev, c.name)
		}
		seen[c.want] = c.name
		if got := tbl.Dump(); got != before {
			t.Errorf("%s changed the table:\nbefore:\n%s\nafter:\n%s", c.name, before, got)
		}
		if tbl.LastToken() != beforeTok || tbl.PendingEffects() != 0 {
			t.Errorf("%s issued a token or an effect", c.name)
		}
	}
	if errors.Is(ErrUnknownLock, ErrReleased) || errors.Is(ErrNotOwner, ErrUnknownLock) {
		t.Error("sentinels wrap each other")
	}
	if !errors.Is(cases[0].call(), modes.ErrInvalidMode) {
		t.Error("ErrInvalidMode does not wrap modes.ErrInvalidMode")
	}
}

// sameFamily lets two cases of one kind of mistake share a sentinel (an
// unknown mode in a request and in a conversion, say).
func sameFamily(a, b string) bool {
	pairs := map[[2]string]bool{
		{"unknown mode", "unknown mode in convert"}:                           true,
		{"convert of unknown lock", "unlock of unknown lock"}:                 true,
		{"unlock of another owner's lock", "convert of another owner's lock"}: true,
	}
	return pairs[[2]string{a, b}] || pairs[[2]string{b, a}]
}

// succeeds returns a check that a table call returned no error.
func succeeds(t *testing.T) func(Result, error) {
	return func(_ Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustGrant(t *testing.T, tbl *Table, req Request) Result {
	t.Helper()
	res, err := tbl.Request(req)
	if err != nil || res.Status != Granted {
		t.Fatalf("request %+v: %v, %v", req, res, err)
	}
	return res
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{MaxNameLen: 0, MaxLVB: 8},
		{MaxNameLen: HardMaxNameLen + 1},
		{MaxNameLen: 8, MaxLVB: -1},
		{MaxNameLen: 8, MaxLVB: HardMaxLVB + 1},
		{MaxNameLen: 8, MaxLocksPerNode: -1},
		{MaxNameLen: 8, MaxWaitersPerResource: -1},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid config")
		}
	}()
	New(Config{})
}

// TestStructSizes pins the sizes the memory target depends on: a lock and a
// resource each fill one 64-byte allocation.
func TestStructSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the sizes are pinned for 64-bit platforms, where the memory target applies")
	}
	if s := unsafe.Sizeof(lock{}); s != 64 {
		t.Errorf("lock is %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(resource{}); s != 64 {
		t.Errorf("resource is %d bytes, want 64", s)
	}
}
