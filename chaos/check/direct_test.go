package check

import (
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// only runs one direct check on h and returns what it found.
func only(c Checks, h *History) []Violation {
	snap := h.snapshot()
	switch c {
	case CheckOverlap:
		return checkOverlap(snap.intervals)
	case CheckTokens:
		return checkTokens(snap.recs)
	case CheckStore:
		return checkStore(snap.recs)
	}
	panic("not a direct check")
}

// wantViolations fails unless the check found exactly n violations, each
// message containing all of the given strings.
func wantViolations(t *testing.T, vs []Violation, n int, contains ...string) {
	t.Helper()
	if len(vs) != n {
		t.Fatalf("%d violations, want %d: %v", len(vs), n, vs)
	}
	for _, v := range vs {
		for _, c := range contains {
			if !strings.Contains(v.Message, c) {
				t.Errorf("message lacks %q:\n%s", c, v.Message)
			}
		}
	}
}

func TestOverlap(t *testing.T) {
	t.Run("incompatible overlap names both holders", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 7)
		clk.at(s)
		h.Acquire(2, "n2", "r", modes.PR).Granted(modes.PR, 8)
		clk.at(2 * s)
		h.Release(1, "n1", "r").Released()
		clk.at(3 * s)
		h.Release(2, "n2", "r").Released()
		vs := only(CheckOverlap, h)
		wantViolations(t, vs, 1, `resource "r"`, "clients 1 and 2", "EX and PR", "[1s, 2s]",
			"client 1 on n1 held EX token 7 from 0s to 2s", "client 2 on n2 held PR token 8 from 1s to 3s", "release #2")
		if len(vs[0].Intervals) != 2 || vs[0].Check != CheckOverlap {
			t.Fatalf("structured fields: %+v", vs[0])
		}
	})
	t.Run("touching at one instant is no overlap", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
		clk.at(s)
		rel := h.Release(1, "n1", "r")
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2) // same fake instant
		rel.Released()
		wantViolations(t, only(CheckOverlap, h), 0)
	})
	t.Run("compatible modes may overlap", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
		h.Acquire(2, "n2", "r", modes.CR).Granted(modes.CR, 2)
		h.Acquire(3, "n2", "r", modes.PR).Granted(modes.PR, 3)
		clk.at(s)
		h.Acquire(4, "n3", "q", modes.EX).Granted(modes.EX, 1) // another resource
		wantViolations(t, only(CheckOverlap, h), 0)
	})
	t.Run("held to the end", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.PW).Granted(modes.PW, 1)
		clk.at(5 * s)
		h.Acquire(2, "n2", "r", modes.CW).Granted(modes.CW, 2)
		wantViolations(t, only(CheckOverlap, h), 1, "PW and CW", "[5s, ∞]", "still held at the end")
	})
	t.Run("a crash ends the belief", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
		clk.at(s)
		h.Crash("n1")
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		wantViolations(t, only(CheckOverlap, h), 0)
	})
	t.Run("grant before the crash overlaps", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
		clk.at(500 * ms)
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		clk.at(s)
		h.Crash("n1")
		wantViolations(t, only(CheckOverlap, h), 1, "[500ms, 1s]", "crash #")
	})
	t.Run("lost ends the belief", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
		clk.at(s)
		h.Lost(1, "n1", "r")
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		wantViolations(t, only(CheckOverlap, h), 0)
	})
	t.Run("unknown acquire holds no belief", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Unknown()
		clk.at(s)
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		wantViolations(t, only(CheckOverlap, h), 0)
	})
	t.Run("pending middle conversion believes CR", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
		clk.at(s)
		cv := h.Convert(1, "n1", "r", modes.CW)
		h.Acquire(2, "n2", "r", modes.CW).Granted(modes.CW, 2) // fine while converting
		clk.at(2 * s)
		cv.Granted(modes.CW, 3)
		h.Acquire(3, "n3", "r", modes.PR).Granted(modes.PR, 4) // not fine: 1 and 2 hold CW
		vs := only(CheckOverlap, h)
		wantViolations(t, vs, 2, "and 3", "CW and PR", "[2s, ∞]")
	})
}

func TestTokens(t *testing.T) {
	t.Run("increasing", func(t *testing.T) {
		h, clk := newManual()
		for i := range 5 {
			clk.at(time.Duration(i) * s)
			h.Acquire(i, "n1", "r", modes.EX).Granted(modes.EX, uint64(10+i))
			h.Release(i, "n1", "r").Released()
		}
		wantViolations(t, only(CheckTokens, h), 0)
	})
	t.Run("went back", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 7)
		clk.at(s)
		h.Release(1, "n1", "r").Released()
		clk.at(2 * s)
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 5)
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 7 to 5",
			"client 1 on n1", "client 2 on n2", "called at 2s")
	})
	t.Run("reused", func(t *testing.T) {
		h, clk := newManual()
		a := h.Acquire(1, "n1", "r", modes.CR)
		b := h.Acquire(2, "n2", "r", modes.CR)
		clk.at(s)
		a.Granted(modes.CR, 4)
		b.Granted(modes.CR, 4)
		wantViolations(t, only(CheckTokens, h), 1, "token 4 was granted twice")
	})
	t.Run("concurrent grants may return out of order", func(t *testing.T) {
		h, clk := newManual()
		a := h.Acquire(1, "n1", "r", modes.CR)
		clk.at(s)
		b := h.Acquire(2, "n2", "r", modes.CR)
		clk.at(2 * s)
		b.Granted(modes.CR, 5)
		clk.at(3 * s)
		a.Granted(modes.CR, 6)
		wantViolations(t, only(CheckTokens, h), 0)
	})
	t.Run("a tie is concurrent", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.CR).Granted(modes.CR, 7)
		b := h.Acquire(2, "n2", "r", modes.CR) // called at the instant a returned
		clk.at(s)
		b.Granted(modes.CR, 5)
		wantViolations(t, only(CheckTokens, h), 0)
	})
	t.Run("a client's own grants at one instant are in order", func(t *testing.T) {
		h, _ := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 7)
		h.Release(1, "n1", "r").Released()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 6) // same fake instant
		h.Acquire(2, "n2", "r", modes.NL).Granted(modes.NL, 5) // another client: concurrent
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 7 to 6", "client 1 on n1")
	})
	t.Run("down-conversion keeps its token, up-conversion needs a new one", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 3)
		clk.at(s)
		h.Convert(1, "n1", "r", modes.PR).Granted(modes.PR, 3)
		clk.at(2 * s)
		h.Convert(1, "n1", "r", modes.EX).Granted(modes.EX, 2)
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 3 to 2", "convert #2")
	})
	t.Run("shares of a node's grant carry its token", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.PR).GrantedShared(modes.PR, 4)
		clk.at(s)
		h.Acquire(2, "n2", "r", modes.PR).Granted(modes.PR, 5)
		clk.at(2 * s)
		h.Acquire(3, "n1", "r", modes.PR).GrantedShared(modes.PR, 4) // the same share, after 5
		wantViolations(t, only(CheckTokens, h), 0)
		if vs := only(CheckOverlap, h); len(vs) != 0 {
			t.Fatalf("PR shares overlap PR: %v", vs)
		}
	})
	t.Run("a share is a holder for the overlap check", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.PR).GrantedShared(modes.PR, 4)
		clk.at(s)
		h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 5)
		wantViolations(t, only(CheckOverlap, h), 1, "client 1", "client 2")
	})
	// The long run of 2026-12-01 at 27m41s: a worker frozen while it
	// held mix/0 in CR woke and converted down to NL, keeping its token,
	// after another client had been granted a newer one. The freeze ended
	// the client's belief, not its lock: a down-conversion is no grant.
	t.Run("a down-conversion after a freeze keeps its token", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "w2", "r", modes.CR).Granted(modes.CR, 5)
		clk.at(s)
		h.Freeze("w2")
		clk.at(2 * s)
		h.Acquire(2, "w1", "r", modes.CR).Granted(modes.CR, 7)
		clk.at(3 * s)
		h.Convert(1, "w2", "r", modes.NL).Granted(modes.NL, 5)
		wantViolations(t, only(CheckTokens, h), 0)
	})
	// The same shape as the long run's real bug at 8m13s (a woken member
	// granted an up-conversion from its stale table): an up-conversion
	// after a freeze needs a new token, and an old one is caught.
	t.Run("an up-conversion after a freeze needs a new token", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "w1", "r", modes.CR).Granted(modes.CR, 5)
		clk.at(s)
		h.Freeze("w1")
		clk.at(2 * s)
		h.Acquire(2, "w2", "r", modes.CR).Granted(modes.CR, 7)
		clk.at(3 * s)
		h.Convert(1, "w1", "r", modes.EX).Granted(modes.EX, 5)
		wantViolations(t, only(CheckTokens, h), 2, "5") // went back from 7, and granted twice
	})
	// A conversion in flight at the freeze leaves the lock in either
	// mode: PR afterwards is up from CR but down from EX, so it may keep
	// its token; EX after that is up from PR, a grant.
	t.Run("a conversion pending at the freeze leaves either mode", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "w1", "r", modes.CR).Granted(modes.CR, 5)
		h.Convert(1, "w1", "r", modes.EX) // in flight at the freeze
		clk.at(s)
		h.Freeze("w1")
		clk.at(2 * s)
		h.Acquire(2, "w2", "r", modes.NL).Granted(modes.NL, 7)
		clk.at(3 * s)
		h.Convert(1, "w1", "r", modes.PR).Granted(modes.PR, 5) // may be down from EX
		wantViolations(t, only(CheckTokens, h), 0)
		h.Convert(1, "w1", "r", modes.EX).Granted(modes.EX, 6) // up from PR: a grant, below 7
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 7 to 6")
	})
	// The 20-minute run of 2026-12-01 at 15m53s: a worker's CR request
	// was in flight when its process froze; the grant came back after the
	// thaw, and the client converted the lock down to NL under its token,
	// after another client had been granted a newer one. The lock was in
	// the mode granted late: a down-conversion from it is no grant.
	t.Run("a down-conversion of a lock granted after a freeze keeps its token", func(t *testing.T) {
		h, clk := newManual()
		late := h.Acquire(1, "w2", "r", modes.CR)
		clk.at(s)
		h.Freeze("w2")
		clk.at(2 * s)
		late.Granted(modes.CR, 5)
		h.Acquire(2, "w1", "r", modes.PR).Granted(modes.PR, 7)
		clk.at(3 * s)
		h.Convert(1, "w2", "r", modes.NL).Granted(modes.NL, 5)
		wantViolations(t, only(CheckTokens, h), 0)
		h.Convert(1, "w2", "r", modes.EX).Granted(modes.EX, 6) // up from NL: a grant, below 7
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 7 to 6")
	})
	t.Run("a conversion of a lock with no past is a grant", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(2, "w2", "r", modes.CR).Granted(modes.CR, 7)
		clk.at(s)
		h.Convert(1, "w1", "r", modes.NL).Granted(modes.NL, 5)
		wantViolations(t, only(CheckTokens, h), 1, "token went back from 7 to 5")
	})
	t.Run("unknown grants have no token", func(t *testing.T) {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.EX).Unknown()
		clk.at(s)
		h.Acquire(2, "n1", "r", modes.EX).Granted(modes.EX, 1)
		wantViolations(t, only(CheckTokens, h), 0)
	})
}

func TestStore(t *testing.T) {
	t.Run("Kleppmann: 33 accepted after 34", func(t *testing.T) {
		h, clk := newManual()
		h.Write(1, "n1", "k", 34, 1).Accepted()
		clk.at(s)
		h.Write(2, "n2", "k", 33, 2).Accepted()
		wantViolations(t, only(CheckStore, h), 1, `key "k"`, "stale token 33 after token 34", "client 2 on n2")
	})
	t.Run("33 rejected after 34", func(t *testing.T) {
		h, clk := newManual()
		h.Write(1, "n1", "k", 34, 1).Accepted()
		clk.at(s)
		h.Write(2, "n2", "k", 33, 2).Rejected()
		h.Write(1, "n1", "k", 34, 3).Accepted() // equal tokens are fine
		wantViolations(t, only(CheckStore, h), 0)
	})
	t.Run("rejected without cause", func(t *testing.T) {
		h, clk := newManual()
		h.Write(1, "n1", "k", 5, 1).Rejected()
		clk.at(s)
		h.Write(1, "n1", "k", 6, 1).Accepted()
		h.Write(2, "n2", "k", 6, 1).Rejected()
		vs := only(CheckStore, h)
		wantViolations(t, vs, 2, "rejected token")
		if !strings.Contains(vs[0].Message, "no write had been accepted") || !strings.Contains(vs[1].Message, "was 6") {
			t.Fatal(vs)
		}
	})
	t.Run("rejection explained by a write that may have been applied", func(t *testing.T) {
		h, clk := newManual()
		h.Write(1, "n1", "k", 9, 1).Unknown()
		clk.at(s)
		h.Write(2, "n2", "k", 5, 2).Rejected()
		wantViolations(t, only(CheckStore, h), 0)
	})
	t.Run("rejection explained by a concurrent write", func(t *testing.T) {
		h, clk := newManual()
		w := h.Write(2, "n2", "k", 5, 2)
		clk.at(s)
		x := h.Write(1, "n1", "k", 9, 1) // called before the rejection returned
		clk.at(2 * s)
		w.Rejected()
		x.Accepted()
		wantViolations(t, only(CheckStore, h), 0)
	})
	t.Run("concurrent stale write may be accepted", func(t *testing.T) {
		h, clk := newManual()
		x := h.Write(1, "n1", "k", 9, 1)
		w := h.Write(2, "n2", "k", 5, 2)
		clk.at(s)
		x.Accepted()
		w.Accepted()
		wantViolations(t, only(CheckStore, h), 0)
	})
	t.Run("a client's own writes at one instant are in order", func(t *testing.T) {
		h, _ := newManual()
		h.Write(1, "n1", "k", 9, 1).Accepted()
		h.Write(1, "n1", "k", 5, 2).Accepted()
		h.Write(2, "n2", "k", 4, 3).Accepted() // another client: concurrent
		wantViolations(t, only(CheckStore, h), 1, "stale token 5 after token 9")
	})
	t.Run("failed writes are ignored", func(t *testing.T) {
		h, clk := newManual()
		h.Write(1, "n1", "k", 9, 1).Failed(nil)
		clk.at(s)
		h.Write(2, "n2", "k", 5, 2).Accepted()
		wantViolations(t, only(CheckStore, h), 0)
	})
}
