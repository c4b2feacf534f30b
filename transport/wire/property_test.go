package wire

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/seed-a6839e30/dlm/modes"
)

// Generators of valid messages: every value the protocol allows, including
// the extremes of each integer width and of each length limit.

func genName(max int) *rapid.Generator[string] {
	return rapid.StringN(1, max, max).Filter(func(s string) bool { return len(s) >= 1 && len(s) <= max })
}

func genLock() *rapid.Generator[uint64] { return rapid.Uint64Min(1) }

func genMode() *rapid.Generator[modes.Mode] {
	return rapid.Custom(func(t *rapid.T) modes.Mode { return modes.Mode(rapid.Uint8Range(0, modes.Count-1).Draw(t, "mode")) })
}

func genLVB(t *rapid.T, l Limits) ([]byte, LVBOp) {
	op := LVBOp(rapid.Uint8Range(0, 2).Draw(t, "lvbop"))
	if op != LVBWrite {
		return nil, op
	}
	lvb := rapid.SliceOfN(rapid.Byte(), 0, l.MaxLVB).Draw(t, "lvb")
	if len(lvb) == 0 {
		lvb = nil
	}
	return lvb, op
}

func genMessage(l Limits) *rapid.Generator[Message] {
	return rapid.Custom(func(t *rapid.T) Message {
		epoch := rapid.Uint64Min(1).Draw(t, "epoch")
		ls := genName(MaxLockspace).Draw(t, "lockspace")
		res := genName(l.MaxName).Draw(t, "resource")
		lock, owner := genLock().Draw(t, "lock"), rapid.Uint64().Draw(t, "owner")
		timeout := rapid.Int64Min(0).Draw(t, "timeout")
		ty := rapid.SampledFrom(knownTypes()).Draw(t, "type")
		if ty.Client() {
			return genClientMessage(t, l, ty)
		}
		switch ty {
		case TypePing:
			return &Ping{RecvSession: rapid.Uint64().Draw(t, "rs"), Received: rapid.Uint64().Draw(t, "recv"), Closing: rapid.Bool().Draw(t, "closing")}
		case TypeHello:
			return &Hello{Version: rapid.Uint8Range(1, 255).Draw(t, "v"), ClusterID: genName(MaxClusterID).Draw(t, "c"), Node: genName(MaxNodeName).Draw(t, "n"), BootID: rapid.Uint64Min(1).Draw(t, "boot"),
				Session: rapid.Uint64Min(1).Draw(t, "session"), RecvBoot: rapid.Uint64().Draw(t, "rb"), RecvSession: rapid.Uint64().Draw(t, "rs"), Received: rapid.Uint64().Draw(t, "recv")}
		case TypeLockRequest:
			m := &LockRequest{Epoch: epoch, Lockspace: ls, Resource: res, Lock: lock, Owner: owner, Mode: genMode().Draw(t, "m"), Flags: rapid.Uint32().Draw(t, "f"), Timeout: timeout, TTL: rapid.Int64Min(0).Draw(t, "ttl")}
			if m.TTL > 0 {
				m.Session = rapid.Uint64().Draw(t, "session")
			}
			return m
		case TypeConvertRequest:
			lvb, op := genLVB(t, l)
			return &ConvertRequest{Epoch: epoch, Lockspace: ls, Resource: res, Lock: lock, Owner: owner, Mode: genMode().Draw(t, "m"), Flags: rapid.Uint32().Draw(t, "f"), Timeout: timeout, LVB: lvb, LVBOp: op}
		case TypeUnlockRequest:
			lvb, op := genLVB(t, l)
			return &UnlockRequest{Epoch: epoch, Lockspace: ls, Resource: res, Lock: lock, Owner: owner, LVB: lvb, LVBOp: op}
		case TypeCancelRequest:
			return &CancelRequest{Epoch: epoch, Lockspace: ls, Resource: res, Lock: lock, Owner: owner}
		case TypeCompletion:
			lvb, flags := genLVBBlock(t, l)
			return &Completion{Epoch: epoch, Lockspace: ls, Lock: lock, Status: Status(rapid.Uint8Range(1, 7).Draw(t, "s")), Mode: genMode().Draw(t, "m"),
				Token: rapid.Uint64().Draw(t, "tok"), LVB: lvb, LVBSeq: rapid.Uint64().Draw(t, "seq"), LVBFlags: flags, Demoted: rapid.Bool().Draw(t, "d"),
				Err: rapid.StringN(0, MaxErr, MaxErr).Filter(func(s string) bool { return len(s) <= MaxErr }).Draw(t, "err")}
		case TypeBlocking:
			return &Blocking{Epoch: epoch, Lockspace: ls, Lock: lock, Mode: genMode().Draw(t, "m")}
		case TypeRenew:
			session := rapid.Uint64().Draw(t, "session")
			return &Renew{Epoch: epoch, Lockspace: ls, Session: session, Locks: rapid.SliceOfN(genLock(), min(1, int(session)), 300).Draw(t, "locks")}
		case TypeHeartbeat:
			return &Heartbeat{Epoch: rapid.Uint64().Draw(t, "e")}
		case TypeHeartbeatAck:
			return &HeartbeatAck{Epoch: rapid.Uint64().Draw(t, "e"), Member: rapid.Bool().Draw(t, "member")}
		case TypePropose:
			return &Propose{Epoch: epoch, Coordinator: genName(MaxNodeName).Draw(t, "coord"), PrevEpoch: rapid.Uint64().Draw(t, "prev"), Members: genMembers().Draw(t, "members")}
		case TypePromise:
			return &Promise{Epoch: epoch, OK: rapid.Bool().Draw(t, "ok"), Promised: rapid.Uint64().Draw(t, "promised"), Committed: rapid.Uint64().Draw(t, "committed"),
				Reason: rapid.StringN(0, MaxErr, MaxErr).Filter(func(s string) bool { return len(s) <= MaxErr }).Draw(t, "reason")}
		case TypeCommit:
			return &Commit{Epoch: epoch, Coordinator: genName(MaxNodeName).Draw(t, "coord"), Members: genMembers().Draw(t, "members")}
		case TypeRecoveryStatus:
			return &RecoveryStatus{Epoch: epoch, Phase: rapid.Uint8Range(1, MaxPhase).Draw(t, "phase")}
		case TypeRecoveryPhase:
			return &RecoveryPhase{Epoch: epoch, Phase: rapid.Uint8Range(1, MaxPhase).Draw(t, "phase")}
		case TypeAck:
			return &Ack{Epoch: epoch}
		case TypeLockReport:
			return &LockReport{Epoch: epoch, Lockspace: ls, Locks: rapid.SliceOfN(genReportedLock(l), 1, 50).Draw(t, "locks")}
		case TypeMasterReport:
			rs := rapid.SliceOfN(genReportedResource(l), 0, 20).Draw(t, "resources")
			if len(rs) == 0 {
				rs = nil
			}
			return &MasterReport{Epoch: epoch, Lockspace: ls, LastToken: rapid.Uint64().Draw(t, "last"), Resources: rs}
		case TypeDeadlockReport:
			edges := rapid.SliceOfN(genWaitEdge(l), 0, 30).Draw(t, "edges")
			if len(edges) == 0 {
				edges = nil
			}
			return &DeadlockReport{Epoch: epoch, Seq: rapid.Uint64().Draw(t, "seq"), Edges: edges}
		case TypeDeadlockConfirm:
			return &DeadlockConfirm{Epoch: epoch, Edges: rapid.SliceOfN(genWaitEdge(l), 1, 30).Draw(t, "edges")}
		case TypeDeadlockConfirmed:
			return &DeadlockConfirmed{Epoch: epoch, Held: rapid.SliceOfN(rapid.Bool(), 1, 300).Draw(t, "held")}
		case TypeDeadlockFail:
			return &DeadlockFail{Epoch: epoch, Lockspace: ls, Resource: res, Node: rapid.Uint32().Draw(t, "node"), Lock: lock,
				Gen: rapid.Uint64Min(1).Draw(t, "gen"), Detail: rapid.StringN(0, MaxErr, MaxErr).Filter(func(s string) bool { return len(s) <= MaxErr }).Draw(t, "detail")}
		case TypeMastery:
			return genMastery(epoch).Draw(t, "mastery")
		case TypeSemaphoreRequest:
			permits := rapid.Uint32Range(1, MaxPermits).Draw(t, "permits")
			return &SemaphoreRequest{Epoch: epoch, Lockspace: ls, Resource: res, Lock: lock, Owner: owner, Permits: permits,
				Count: rapid.Uint32Range(1, permits).Draw(t, "count"), Flags: rapid.Uint32().Draw(t, "f"), Timeout: timeout, TTL: rapid.Int64Min(0).Draw(t, "ttl")}
		case TypePermitReport:
			return &PermitReport{Epoch: epoch, Lockspace: ls, Permits: rapid.SliceOfN(genReportedPermit(l), 1, 50).Draw(t, "permits")}
		case TypeDescribeRequest:
			return &DescribeRequest{Epoch: epoch, Lockspace: ls, Resource: res}
		case TypeDescribeReply:
			st := DescribeStatus(rapid.Uint8Range(1, 3).Draw(t, "status"))
			m := &DescribeReply{Epoch: epoch, Status: st}
			if st == DescribeFound {
				locks := rapid.SliceOfN(genDescribedLock(), 0, 30).Draw(t, "locks")
				slices.SortStableFunc(locks, func(a, b DescribedLock) int { return int(a.Queue) - int(b.Queue) })
				if len(locks) > 0 {
					m.Locks = locks
				}
				m.Omitted = rapid.Uint32().Draw(t, "omitted")
			}
			m.ValueValid, m.ValueSeq, m.ValueLen = rapid.Bool().Draw(t, "vv"), rapid.Uint64().Draw(t, "vs"), rapid.Uint32().Draw(t, "vl")
			return m
		}
		panic("genMessage: no generator for a type")
	})
}

// genMastery draws a valid Mastery: no tables or a full bitmap, and views
// and aborted views in increasing epochs.
func genMastery(epoch uint64) *rapid.Generator[*Mastery] {
	return rapid.Custom(func(t *rapid.T) *Mastery {
		m := &Mastery{Epoch: epoch}
		if rapid.Bool().Draw(t, "tables") {
			m.Tables = rapid.SliceOfN(rapid.Byte(), MasteryBitmap, MasteryBitmap).Draw(t, "bitmap")
		}
		e := uint64(0)
		for range rapid.IntRange(0, MaxMasteryViews).Draw(t, "views") {
			e += rapid.Uint64Range(1, 1<<20).Draw(t, "step")
			m.Views = append(m.Views, ViewRef{Epoch: e, ID: rapid.Uint64().Draw(t, "id")})
		}
		e = 0
		for range rapid.IntRange(0, MaxMasteryViews).Draw(t, "aborted") {
			e += rapid.Uint64Range(1, 1<<20).Draw(t, "step")
			m.Aborted = append(m.Aborted, ViewRef{Epoch: e, ID: rapid.Uint64().Draw(t, "id")})
		}
		return m
	})
}

// genWaitEdge draws a valid wait-for edge: a waiter that is not its own
// blocker, and a request generation for a blocker queued ahead.
func genWaitEdge(l Limits) *rapid.Generator[WaitEdge] {
	return rapid.Custom(func(t *rapid.T) WaitEdge {
		e := WaitEdge{
			Lockspace: genName(MaxLockspace).Draw(t, "lockspace"), Resource: genName(l.MaxName).Draw(t, "resource"), Mode: genMode().Draw(t, "mode"),
			WaiterNode: rapid.Uint32().Draw(t, "wnode"), WaiterLock: genLock().Draw(t, "wlock"), WaiterOwner: rapid.Uint64().Draw(t, "wowner"),
			WaiterGen: rapid.Uint64Min(1).Draw(t, "wgen"), Kind: rapid.Uint8Range(BlockHolder, BlockAhead).Draw(t, "kind"),
			BlockerNode: rapid.Uint32().Draw(t, "bnode"), BlockerLock: genLock().Draw(t, "block"), BlockerOwner: rapid.Uint64().Draw(t, "bowner"),
		}
		if e.Kind == BlockAhead {
			e.Stamp = rapid.Uint64Min(1).Draw(t, "gen")
		} else {
			e.Stamp = rapid.Uint64().Draw(t, "token")
		}
		if e.WaiterNode == e.BlockerNode && e.WaiterLock == e.BlockerLock {
			e.BlockerLock ^= 1 << 63
		}
		return e
	})
}

// genMembers draws a valid member list: distinct names, sorted.
func genMembers() *rapid.Generator[[]ViewMember] {
	return rapid.Custom(func(t *rapid.T) []ViewMember {
		names := rapid.SliceOfNDistinct(genName(MaxNodeName), 1, 40, func(s string) string { return s }).Draw(t, "names")
		ms := make([]ViewMember, len(names))
		for i, n := range names {
			ms[i] = ViewMember{Name: n, BootID: rapid.Uint64Min(1).Draw(t, "boot")}
		}
		SortMembers(ms)
		return ms
	})
}

// genQueued draws a queue and a granted mode that agree: NL while waiting.
func genQueued(t *rapid.T) (uint8, modes.Mode) {
	q := rapid.Uint8Range(QueueGranted, QueueWaiting).Draw(t, "queue")
	if q == QueueWaiting {
		return q, modes.NL
	}
	return q, genMode().Draw(t, "granted")
}

// genLVBBlock draws a value block with flags, as a Completion or report carries.
func genLVBBlock(t *rapid.T, l Limits) ([]byte, LVBFlags) {
	flags := LVBFlags(rapid.Uint8Range(0, 3).Draw(t, "lvbflags"))
	var lvb []byte
	if flags&LVBPresent != 0 {
		lvb, _ = genLVB(t, l)
	}
	return lvb, flags
}

func genReportedLock(l Limits) *rapid.Generator[ReportedLock] {
	return rapid.Custom(func(t *rapid.T) ReportedLock {
		q, granted := genQueued(t)
		lvb, flags := genLVBBlock(t, l)
		k := ReportedLock{Resource: genName(l.MaxName).Draw(t, "resource"), Lock: genLock().Draw(t, "lock"), Owner: rapid.Uint64().Draw(t, "owner"),
			Queue: q, Granted: granted, Requested: genMode().Draw(t, "requested"), Token: rapid.Uint64().Draw(t, "token"), TTL: rapid.Int64Min(0).Draw(t, "ttl"),
			LVB: lvb, LVBSeq: rapid.Uint64().Draw(t, "seq"), LVBFlags: flags}
		if k.TTL > 0 {
			k.Session = rapid.Uint64().Draw(t, "session")
		}
		return k
	})
}

func genReportedPermit(l Limits) *rapid.Generator[ReportedPermit] {
	return rapid.Custom(func(t *rapid.T) ReportedPermit {
		permits := rapid.Uint32Range(1, MaxPermits).Draw(t, "permits")
		return ReportedPermit{Resource: genName(l.MaxName).Draw(t, "resource"), Lock: genLock().Draw(t, "lock"), Owner: rapid.Uint64().Draw(t, "owner"),
			Queue: rapid.SampledFrom([]uint8{QueueGranted, QueueWaiting}).Draw(t, "queue"), Permits: permits,
			Count: rapid.Uint32Range(1, permits).Draw(t, "count"), Token: rapid.Uint64().Draw(t, "token"), TTL: rapid.Int64Min(0).Draw(t, "ttl")}
	})
}

// genDescribedLock draws a described lock: a lock in a mode on any queue,
// or permits, granted or waiting.
func genDescribedLock() *rapid.Generator[DescribedLock] {
	return rapid.Custom(func(t *rapid.T) DescribedLock {
		k := DescribedLock{Node: genName(MaxNodeName).Draw(t, "node"), Lock: genLock().Draw(t, "lock"), Owner: rapid.Uint64().Draw(t, "owner"),
			Token: rapid.Uint64().Draw(t, "token"), Waited: rapid.Int64Min(0).Draw(t, "waited"), TTL: rapid.Int64Min(0).Draw(t, "ttl")}
		if rapid.Bool().Draw(t, "permits") {
			k.Queue = rapid.SampledFrom([]uint8{QueueGranted, QueueWaiting}).Draw(t, "queue")
			k.Permits = rapid.Uint32Range(1, MaxPermits).Draw(t, "n")
			k.Count = rapid.Uint32Range(1, k.Permits).Draw(t, "count")
			return k
		}
		k.Queue, k.Granted = genQueued(t)
		k.Requested = genMode().Draw(t, "requested")
		return k
	})
}

func genReportedResource(l Limits) *rapid.Generator[ReportedResource] {
	return rapid.Custom(func(t *rapid.T) ReportedResource {
		lvb, flags := genLVBBlock(t, l)
		locks := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) QueuedLock {
			q, granted := genQueued(t)
			return QueuedLock{Node: rapid.Uint32().Draw(t, "node"), Lock: genLock().Draw(t, "lock"), Queue: q, Granted: granted}
		}), 0, 20).Draw(t, "locks")
		slices.SortStableFunc(locks, func(a, b QueuedLock) int { return int(a.Queue) - int(b.Queue) })
		if len(locks) == 0 {
			locks = nil
		}
		return ReportedResource{Resource: genName(l.MaxName).Draw(t, "resource"), LVB: lvb, LVBSeq: rapid.Uint64().Draw(t, "seq"), LVBFlags: flags, Locks: locks}
	})
}

// Every valid message encodes, decodes to an equal message that re-encodes
// to the same bytes; and any truncation of its frame is refused.
func TestCodecProperties(t *testing.T) {
	l := DefaultLimits()
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(l).Draw(t, "msg")
		h := Header{ID: rapid.Uint64().Draw(t, "id")}
		h.Reply = h.ID != 0 && rapid.Bool().Draw(t, "reply")
		frame, err := AppendFrame(nil, h, m, &l)
		if err != nil {
			t.Fatalf("valid %#v refused: %v", m, err)
		}
		gh, gm, err := testDecoder(l).DecodeFrame(frame)
		if err != nil {
			t.Fatalf("%#v: %v", m, err)
		}
		h.Type = m.Type()
		if gh != h || !reflect.DeepEqual(gm, m) {
			t.Fatalf("round trip: %+v %#v → %+v %#v", h, m, gh, gm)
		}
		again, err := AppendFrame(nil, gh, gm, &l)
		if err != nil || !bytes.Equal(again, frame) {
			t.Fatalf("re-encoding is not stable: %x → %x (%v)", frame, again, err)
		}
		cut := rapid.IntRange(0, len(frame)-1).Draw(t, "cut")
		if _, got, err := testDecoder(l).DecodeFrame(frame[:cut]); err == nil || got != nil {
			t.Fatalf("frame cut to %d of %d bytes decoded: %v", cut, len(frame), got)
		}
	})
}
