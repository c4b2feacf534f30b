package wire

import (
	"bytes"
	"encoding/binary"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

var writeCorpus = flag.Bool("wire.writecorpus", false, "rewrite testdata/fuzz seed corpora from the seeds in the tests")

// samples returns valid messages of every type, including edge values.
func samples() []Message {
	long := strings.Repeat("r", 256)
	return []Message{
		&Ping{},
		&Hello{Version: Version, ClusterID: "prod-a", Node: "node-1", BootID: 0xdeadbeefcafe, Session: 1},
		&Hello{Version: 200, ClusterID: strings.Repeat("c", MaxClusterID), Node: strings.Repeat("n", MaxNodeName), BootID: ^uint64(0),
			Session: ^uint64(0), RecvBoot: ^uint64(0), RecvSession: 1 << 40, Received: ^uint64(0)},
		&LockRequest{Epoch: 1, Lockspace: "fs1", Resource: "inode/42", Lock: 7, Owner: 0, Mode: modes.PR},
		&LockRequest{Epoch: ^uint64(0), Lockspace: strings.Repeat("l", MaxLockspace), Resource: long, Lock: ^uint64(0), Owner: 1 << 40, Mode: modes.EX, Flags: 0xffffffff, Timeout: 1<<62 + 5, TTL: 30e9, Session: ^uint64(0)},
		&ConvertRequest{Epoch: 3, Lockspace: "fs1", Resource: "inode/42", Lock: 7, Owner: 9, Mode: modes.NL, LVB: []byte("value block"), LVBOp: LVBWrite},
		&ConvertRequest{Epoch: 3, Lockspace: "fs1", Resource: "x", Lock: 8, Mode: modes.CW, Timeout: 1e9, LVBOp: LVBInvalidate},
		&UnlockRequest{Epoch: 4, Lockspace: "fs1", Resource: "inode/42", Lock: 7, Owner: 9, LVB: bytes.Repeat([]byte{0xab}, 4096), LVBOp: LVBWrite},
		&UnlockRequest{Epoch: 4, Lockspace: "fs1", Resource: "inode/43", Lock: 70000},
		&CancelRequest{Epoch: 5, Lockspace: "ls", Resource: "a/b/c", Lock: 1 << 33, Owner: 2},
		&Completion{Epoch: 6, Lockspace: "fs1", Lock: 7, Status: StatusGranted, Mode: modes.PW, Token: 1<<48 | 17, LVB: []byte{1, 2, 3}, LVBSeq: 99, LVBFlags: LVBPresent | LVBValid},
		&Completion{Epoch: 6, Lockspace: "fs1", Lock: 8, Status: StatusDeadlock, Mode: modes.NL, Demoted: true, Err: "conversion deadlock"},
		&Completion{Epoch: 6, Lockspace: "fs1", Lock: 9, Status: StatusError, Err: strings.Repeat("e", MaxErr)},
		&Blocking{Epoch: 7, Lockspace: "fs1", Lock: 7, Mode: modes.EX},
		&Renew{Epoch: 8, Lockspace: "fs1", Locks: []uint64{1, 2, 300, 1 << 20, ^uint64(0)}},
		&Renew{Epoch: 8, Lockspace: "fs1", Session: 1 << 40},
		// recovery (appended: the seed files are named by index)
		&Heartbeat{},
		&Heartbeat{Epoch: ^uint64(0)},
		&HeartbeatAck{Epoch: 12, Member: true},
		&HeartbeatAck{},
		&Propose{Epoch: 13, Coordinator: "node-1", PrevEpoch: 12, Members: []ViewMember{
			{Name: strings.Repeat("n", MaxNodeName), BootID: ^uint64(0)}, {Name: "node-1", BootID: 1}, {Name: "node-2", BootID: 0xdeadbeefcafe},
		}},
		&Propose{Epoch: 1, Coordinator: strings.Repeat("c", MaxNodeName), Members: []ViewMember{{Name: "a", BootID: 7}}},
		&Promise{Epoch: 13, OK: true, Promised: 13, Committed: 12},
		&Promise{Epoch: ^uint64(0), Promised: ^uint64(0), Committed: 1 << 40, Reason: strings.Repeat("e", MaxErr)},
		&Commit{Epoch: 13, Coordinator: "node-1", Members: []ViewMember{{Name: "node-1", BootID: 1}, {Name: "node-2", BootID: 2}}},
		&RecoveryStatus{Epoch: 13, Phase: 1},
		&RecoveryPhase{Epoch: 13, Phase: MaxPhase},
		&Ack{Epoch: 13},
		&LockReport{Epoch: 13, Lockspace: "fs1", Locks: []ReportedLock{
			{Resource: "inode/42", Lock: 7, Owner: 9, Queue: QueueGranted, Granted: modes.PW, Requested: modes.PW, Token: 1<<48 | 17, TTL: 30e9, LVB: []byte("value"), LVBSeq: 99, LVBFlags: LVBPresent | LVBValid},
			{Resource: "inode/42", Lock: 8, Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, Token: 18, LVBFlags: LVBPresent},
			{Resource: long, Lock: ^uint64(0), Owner: ^uint64(0), Queue: QueueWaiting, Granted: modes.NL, Requested: modes.CW, LVB: bytes.Repeat([]byte{0xcd}, 4096), LVBSeq: ^uint64(0), LVBFlags: LVBPresent},
		}},
		&MasterReport{Epoch: 13, Lockspace: "fs1", LastToken: 1 << 40},
		&MasterReport{Epoch: 13, Lockspace: "fs1", LastToken: 1<<48 | 18, Resources: []ReportedResource{
			{Resource: "inode/42", LVB: []byte("value"), LVBSeq: 99, LVBFlags: LVBPresent | LVBValid, Locks: []QueuedLock{
				{Node: 1, Lock: 7, Queue: QueueGranted, Granted: modes.PR},
				{Node: 2, Lock: 9, Queue: QueueGranted, Granted: modes.PR},
				{Node: ^uint32(0), Lock: 8, Queue: QueueConverting, Granted: modes.PR},
				{Node: 0, Lock: ^uint64(0), Queue: QueueWaiting, Granted: modes.NL},
			}},
			{Resource: "empty", LVBFlags: LVBValid},
			{Resource: long, LVBFlags: LVBPresent, Locks: []QueuedLock{{Node: 3, Lock: 1, Queue: QueueWaiting}}},
		}},
		// deadlock detection (appended too)
		&DeadlockReport{Epoch: 13, Seq: 7, Edges: sampleEdges()},
		&DeadlockReport{Epoch: ^uint64(0), Seq: ^uint64(0)},
		&DeadlockConfirm{Epoch: 13, Edges: sampleEdges()[:1]},
		&DeadlockConfirmed{Epoch: 13, Held: []bool{true, false, true}},
		&DeadlockFail{Epoch: 13, Lockspace: "fs1", Resource: "inode/42", Node: 1 << 31, Lock: 7, Gen: 3, Detail: "cycle of 2 owners"},
		&DeadlockFail{Epoch: ^uint64(0), Lockspace: strings.Repeat("l", MaxLockspace), Resource: long, Node: ^uint32(0), Lock: ^uint64(0), Gen: ^uint64(0), Detail: strings.Repeat("d", MaxErr)},
		// which tables a node holds (appended too)
		&Mastery{Epoch: 13, Tables: sampleBitmap(), Views: []ViewRef{{Epoch: 11, ID: 0xdeadbeef}, {Epoch: 12, ID: ^uint64(0)}}},
		&Mastery{Epoch: ^uint64(0)},
		// acknowledging pings (appended too)
		&Ping{RecvSession: 7, Received: 1 << 33},
		&Ping{Closing: true},
		// semaphores and introspection (appended too)
		&SemaphoreRequest{Epoch: 1, Lockspace: "fs1", Resource: "pool", Lock: 7, Permits: 5, Count: 3},
		&SemaphoreRequest{Epoch: ^uint64(0), Lockspace: strings.Repeat("l", MaxLockspace), Resource: long, Lock: ^uint64(0), Owner: ^uint64(0),
			Permits: MaxPermits, Count: MaxPermits, Flags: 0xffffffff, Timeout: 1<<62 + 5, TTL: 30e9},
		&PermitReport{Epoch: 13, Lockspace: "fs1", Permits: []ReportedPermit{
			{Resource: "pool", Lock: 7, Owner: 9, Queue: QueueGranted, Permits: 5, Count: 2, Token: 1<<48 | 17, TTL: 30e9},
			{Resource: long, Lock: ^uint64(0), Owner: ^uint64(0), Queue: QueueWaiting, Permits: MaxPermits, Count: 1},
		}},
		&DescribeRequest{Epoch: 13, Lockspace: "fs1", Resource: "inode/42"},
		&DescribeReply{Epoch: 13, Status: DescribeFound, Locks: sampleDescribed(), Omitted: 3, ValueValid: true, ValueSeq: 99, ValueLen: 64},
		&DescribeReply{Epoch: ^uint64(0), Status: DescribeRetry},
		// the client protocol (appended too)
		&ClientHello{Name: "worker-7", Token: "s3cret", TTL: 10e9},
		&ClientHello{Name: strings.Repeat("n", MaxNodeName), Token: strings.Repeat("t", MaxToken), TTL: 1<<62 + 1, Session: ^uint64(0), Key: 1},
		&ClientHello{},
		&ClientWelcome{Session: 0x5eed, Key: 0xfeed, TTL: 10e9, Lease: 1e9, Node: "node1", MaxLocks: 100000, MaxPending: 1024, MaxFrame: 65536},
		&ClientWelcome{Session: ^uint64(0), Key: ^uint64(0), TTL: 1, Lease: 1<<62 + 3, Node: strings.Repeat("n", MaxNodeName), Resumed: true, LastRequest: ^uint64(0), MaxLocks: ^uint32(0), MaxPending: ^uint32(0), MaxFrame: ^uint32(0)},
		&ClientKeepAlive{},
		&ClientKeepAlive{Lock: ^uint64(0)},
		&ClientAlive{Lease: 3e9},
		&ClientLock{Lockspace: "app", Resource: "orders/42", Mode: modes.EX, Flags: ClientNotify, Timeout: 10e9},
		&ClientLock{Lockspace: strings.Repeat("l", MaxLockspace), Resource: long, Mode: modes.NL, Flags: ClientTry | ClientExpedite | ClientNotify, Timeout: 1<<62 + 7, TTL: 30e9, Owner: ^uint64(0)},
		&ClientConvert{Lock: 1, Mode: modes.PW, Flags: ClientQueue | ClientDemote | ClientTry, Timeout: 5e9},
		&ClientConvert{Lock: ^uint64(0), Mode: modes.NL},
		&ClientUnlock{Lock: 3},
		&ClientCancel{Request: ^uint64(0)},
		&ClientGrant{Lock: 3, Mode: modes.PR, Token: 1<<48 | 17, LVB: []byte("counter=41"), LVBSeq: 41, LVBFlags: LVBPresent | LVBValid},
		&ClientGrant{Lock: ^uint64(0), Mode: modes.NL, Token: ^uint64(0), Demoted: true, LVB: bytes.Repeat([]byte{0xab}, 4096), LVBSeq: ^uint64(0), LVBFlags: LVBPresent},
		&ClientValue{Lock: 9},
		&ClientSetValue{Lock: 9, LVBOp: LVBWrite, LVB: []byte("counter=42")},
		&ClientSetValue{Lock: ^uint64(0), LVBOp: LVBInvalidate},
		&ClientDescribe{Lockspace: "app", Resource: "orders/42"},
		&ClientResource{Master: "node2"},
		&ClientResource{Master: strings.Repeat("m", MaxNodeName), Known: true, LVB: []byte("v"), LVBSeq: 7, LVBFlags: LVBPresent | LVBValid, Locks: []ClientDescribedLock{
			{Queue: QueueGranted, Granted: modes.PR, Requested: modes.PR, Node: "node1", Lock: 1, Token: 1<<48 | 17, Waited: 3e6},
			{Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, Node: strings.Repeat("n", MaxNodeName), Lock: ^uint64(0), Owner: ^uint64(0), Token: ^uint64(0), Waited: 1<<62 + 9, TTL: 30e9},
			{Queue: QueueWaiting, Granted: modes.NL, Requested: modes.CW, Node: "node3", Lock: 5, Waited: 1},
		}},
		&ClientOK{},
		&ClientError{Code: CodeNotQueued},
		&ClientError{Code: CodeSessionEnded, Text: strings.Repeat("e", MaxErr)},
		&ClientBlocking{Lock: 3, Mode: modes.EX},
		&ClientLost{Lock: 3, Code: CodeLockLost, Text: "session TTL ran out"},
		&ClientLost{Lock: ^uint64(0), Code: CodeOther, Text: strings.Repeat("e", MaxErr)},
		&ClientBye{},
		&ClientAcquire{Lockspace: "app", Semaphore: "uploads", Permits: 5, Count: 3, Timeout: 10e9},
		&ClientAcquire{Lockspace: strings.Repeat("l", MaxLockspace), Semaphore: long, Permits: MaxPermits, Count: MaxPermits, Flags: ClientTry | ClientFailFast,
			Timeout: 1<<62 + 11, TTL: 30e9, Owner: ^uint64(0)},
		&ClientDescribe{Lockspace: strings.Repeat("l", MaxLockspace), Resource: long, Timeout: 1<<62 + 13},
		&ClientResource{Master: "node1", Known: true, Permits: MaxPermits, Omitted: ^uint32(0), Locks: []ClientDescribedLock{
			{Queue: QueueGranted, Granted: modes.NL, Requested: modes.NL, Node: "node2", Lock: 3, Token: 1 << 52, Count: MaxPermits},
			{Queue: QueueWaiting, Granted: modes.NL, Requested: modes.NL, Node: "node1", Lock: 4, Waited: 2e9, Count: 1},
		}},
		&ClientLock{Lockspace: "app", Resource: "orders/42", Mode: modes.PW, Flags: ClientFailFast | ClientTry},
		&ClientHello{Name: "worker-7", Token: "s3cret", TTL: 10e9, Version: ClientProtocol},
		&ClientHello{Name: "worker-7", TTL: 10e9, Session: 0x5eed, Key: 0xfeed, Version: ClientProtocol, Read: 7, Pushes: 2, Waiting: []uint64{2, 5, 6}},
		&ClientHello{Session: ^uint64(0), Key: ^uint64(0), Version: ClientProtocol, Read: ^uint64(0), Pushes: ^uint64(0), Waiting: manyIDs(MaxResumeWaiting)},
		&ClientAck{Read: 7},
		&ClientAck{Read: ^uint64(0)},
		// a Mastery with views whose recovery was aborted (appended too)
		&Mastery{Epoch: 14, Tables: sampleBitmap(), Views: []ViewRef{{Epoch: 11, ID: 0xdeadbeef}}, Aborted: []ViewRef{{Epoch: 12, ID: 1}, {Epoch: 13, ID: ^uint64(0)}}},
		&Mastery{Epoch: ^uint64(0), Views: manyViews(MaxMasteryViews), Aborted: manyViews(MaxMasteryViews)},
	}
}

// manyIDs returns n increasing request ids, the widest encodings among them.
func manyIDs(n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = 1<<40 + uint64(i)
	}
	return ids
}

// sampleDescribed are described locks on each queue, one of them permits,
// with the widest values.
func sampleDescribed() []DescribedLock {
	return []DescribedLock{
		{Node: "node-1", Lock: 7, Owner: 9, Queue: QueueGranted, Granted: modes.PR, Requested: modes.PR, Token: 1<<48 | 17, TTL: 30e9},
		{Node: strings.Repeat("n", MaxNodeName), Lock: ^uint64(0), Owner: ^uint64(0), Queue: QueueGranted, Permits: MaxPermits, Count: MaxPermits, Token: ^uint64(0)},
		{Node: "node-2", Lock: 8, Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, Token: 18, Waited: 1 << 62},
		{Node: "node#123", Lock: 1, Queue: QueueWaiting, Requested: modes.CW, Waited: 5},
	}
}

// sampleBitmap is a Mastery bitmap with every other bucket set.
func sampleBitmap() []byte { return bytes.Repeat([]byte{0x55}, MasteryBitmap) }

// sampleEdges are wait-for edges with edge values: a holder blocker with
// owners, one queued ahead, and the widest of each field.
func sampleEdges() []WaitEdge {
	return []WaitEdge{
		{Lockspace: "fs1", Resource: "inode/42", Mode: modes.EX, WaiterNode: 1, WaiterLock: 7, WaiterOwner: 1<<32 | 1, WaiterGen: 3,
			Kind: BlockHolder, BlockerNode: 2, BlockerLock: 9, BlockerOwner: 2<<32 | 1, Stamp: 1<<48 | 17},
		{Lockspace: "fs1", Resource: "inode/42", Mode: modes.PR, WaiterNode: 3, WaiterLock: 1, WaiterGen: 4,
			Kind: BlockAhead, BlockerNode: 1, BlockerLock: 7, BlockerOwner: 1<<32 | 1, Stamp: 3},
		{Lockspace: strings.Repeat("l", MaxLockspace), Resource: strings.Repeat("r", 256), Mode: modes.NL, WaiterNode: ^uint32(0), WaiterLock: ^uint64(0),
			WaiterOwner: ^uint64(0), WaiterGen: ^uint64(0), Kind: BlockHolder, BlockerNode: ^uint32(0), BlockerLock: 1, BlockerOwner: ^uint64(0)},
	}
}

func mustFrame(tb testing.TB, h Header, m Message) []byte {
	tb.Helper()
	l := DefaultLimits()
	b, err := AppendFrame(nil, h, m, &l)
	if err != nil {
		tb.Fatalf("AppendFrame(%T): %v", m, err)
	}
	return b
}

// rawPayload builds a payload (no length prefix) from raw header bytes and a body.
func rawPayload(version byte, typ byte, id uint64, body []byte) []byte {
	p := []byte{version, typ}
	p = binary.BigEndian.AppendUint64(p, id)
	return append(p, body...)
}

// withPrefix puts a correct length prefix in front of a payload.
func withPrefix(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// bomb is the regression input of membership.md §6: an array32 header that
// declares 20,000,000 elements and has none after it.
var bomb = []byte{mpArray32, 0x01, 0x31, 0x2d, 0x00}

// frameSeeds are whole frames, valid and not, for FuzzDecodeFrame.
func frameSeeds(tb testing.TB) map[string][]byte {
	s := map[string][]byte{}
	for i, m := range samples() {
		s["valid-"+m.name()+"-"+strconv.Itoa(i)] = mustFrame(tb, Header{ID: uint64(i)}, m)
	}
	s["reply"] = mustFrame(tb, Header{ID: 77, Reply: true}, samples()[9])
	renew := mustFrame(tb, Header{}, &Renew{Epoch: 1, Lockspace: "ls", Locks: []uint64{1}})
	s["bomb-array32-renew"] = withPrefix(append(rawPayload(Version, byte(TypeRenew), 0, []byte{0x94, 1, 0xa2, 'l', 's', 0}), bomb...))
	s["bomb-array32-body"] = withPrefix(rawPayload(Version, byte(TypeRenew), 0, bomb))
	s["huge-length"] = []byte{0xff, 0xff, 0xff, 0xff, Version, byte(TypeLockRequest)}
	s["short-prefix"] = []byte{0, 0}
	s["truncated"] = renew[:len(renew)-1]
	s["trailing"] = append(append([]byte(nil), renew...), 0)
	s["wrong-version"] = withPrefix(rawPayload(9, byte(TypeRenew), 0, renew[PrefixSize+HeaderSize:]))
	s["unknown-type"] = withPrefix(rawPayload(Version, 0x7f, 0, []byte{0x90}))
	s["map-bomb"] = withPrefix(rawPayload(Version, byte(TypeBlocking), 0, []byte{mpMap32, 0xff, 0xff, 0xff, 0xff}))
	s["str-bomb"] = withPrefix(rawPayload(Version, byte(TypeHello), 0, []byte{0x98, 1, mpStr32, 0x7f, 0xff, 0xff, 0xff}))
	// Lengths of 2^31 and more, negative in a 32-bit int.
	s["bomb-array32-max"] = withPrefix(rawPayload(Version, byte(TypeRenew), 0, []byte{0x94, 1, 0xa2, 'l', 's', 0, mpArray32, 0xff, 0xff, 0xff, 0xff}))
	s["str-bomb-max"] = withPrefix(rawPayload(Version, byte(TypeHello), 0, []byte{0x98, 1, mpStr32, 0x80, 0, 0, 0}))
	s["epoch-zero"] = withPrefix(rawPayload(Version, byte(TypeBlocking), 0, []byte{0x94, 0, 0xa1, 'x', 1, 5}))
	s["bad-mode"] = withPrefix(rawPayload(Version, byte(TypeBlocking), 0, []byte{0x94, 1, 0xa1, 'x', 1, 6}))
	for name, body := range typeSeeds(TypeMasterReport) {
		s["master-report-"+name] = withPrefix(rawPayload(Version, byte(TypeMasterReport), 0, body))
	}
	return s
}

// masterReportHead is the body of a MasterReport up to its resources array:
// the array header, epoch 1, lockspace "ls" and LastToken 0.
var masterReportHead = []byte{0x94, 1, 0xa2, 'l', 's', 0}

// resourceHead is a ReportedResource up to its locks array: the array header,
// resource "r", no LVB, LVBSeq 0 and no flags.
var resourceHead = []byte{0x95, 0xa1, 'r', mpNil, 0, 0}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// shortNames returns n members with distinct two-byte names, sorted.
func shortNames(n int) []ViewMember {
	ms := make([]ViewMember, n)
	for i := range ms {
		ms[i] = ViewMember{Name: string([]byte{'A' + byte(i/64), '0' + byte(i%64)}), BootID: 1}
	}
	return ms
}

// typeSeeds are the inputs aimed at one type's decoder beyond bodySeeds'
// generic ones: for the reports, nested array headers that declare more than
// the frame holds (each must fail before anything is sized by it) or more
// than the limits allow.
func typeSeeds(t Type) map[string][]byte {
	switch t {
	case TypeMasterReport:
		return map[string][]byte{
			// the resources array declares 20,000,000 elements, none follow
			"bomb-resources": cat(masterReportHead, bomb),
			// one resource whose locks array declares 20,000,000
			"bomb-nested-locks": cat(masterReportHead, []byte{0x91}, resourceHead, bomb),
			// both levels declare 65535 and 2^32-1 with nothing after them
			"bomb-both-levels": cat(masterReportHead, []byte{mpArray16, 0xff, 0xff}, resourceHead, []byte{mpArray32, 0xff, 0xff, 0xff, 0xff}),
			// 1024 resources declared over 1024 bytes: within arrayLen's one
			// byte per element, but a resource takes at least 6
			"bomb-resources-1-byte-each": cat(masterReportHead, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			// 1024 locks declared over 1024 bytes: a lock takes at least 5
			"bomb-locks-1-byte-each": cat(masterReportHead, []byte{0x91}, resourceHead, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
		}
	case TypeClientResource:
		head := []byte{0x98, 0xa1, 'm', mpTrue, mpNil, 0, 0, 0, 0}
		lock := []byte{0x9a, 1, 3, 3, 0xa1, 'n', 1, 0, 0, 0, 0, 0}
		return map[string][]byte{
			"bomb-locks":             cat(head, bomb),
			"bomb-locks-1-byte-each": cat(head, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			"not-known-with-locks":   cat([]byte{0x98, 0xa1, 'm', mpFalse, mpNil, 0, 0, 0, 0, 0x91}, lock),
			"count-over-permits":     cat([]byte{0x98, 0xa1, 'm', mpTrue, mpNil, 0, 0, 2, 0, 0x91}, lock[:len(lock)-1], []byte{3}),
			"lock-without-node":      cat(head, []byte{0x91, 0x9a, 1, 3, 3, 0xa0, 1, 0, 0, 0, 0, 0}),
			"old-three-field-lock":   cat(head, []byte{0x91, 0x93, 1, 3, 3}),
		}
	case TypeClientHello:
		v2 := func(read byte, waiting ...byte) []byte {
			return cat([]byte{0x99, 0xa0, 0xa0, 0, 1, 1, ClientProtocol, read, 0}, waiting)
		}
		return map[string][]byte{
			"v2-duplicate-waiting":   v2(9, 0x93, 2, 5, 5),
			"v2-unsorted-waiting":    v2(9, 0x92, 5, 2),
			"v2-zero-waiting":        v2(9, 0x91, 0),
			"v2-too-many-waiting":    (&ClientHello{Session: 1, Key: 1, Version: ClientProtocol, Read: 1, Waiting: manyIDs(MaxResumeWaiting + 1)}).appendBody(nil),
			"v2-bomb-waiting":        cat(v2(9), bomb),
			"v2-new-session-waits":   {0x99, 0xa0, 0xa0, 0, 0, 0, ClientProtocol, 0, 0, 0x91, 1},
			"v3-hello":               {0x9a, 0xa0, 0xa0, 0, 0, 0, 3, 0, 0, 0x90, 0},
			"v1-version-field":       {0x99, 0xa0, 0xa0, 0, 0, 0, 1, 0, 0, 0x90},
			"v2-eight-fields":        {0x98, 0xa0, 0xa0, 0, 0, 0, ClientProtocol, 0, 0x90},
			"v2-pushes-new-session":  {0x99, 0xa0, 0xa0, 0, 0, 0, ClientProtocol, 0, 3, 0x90},
			"four-fields":            {0x94, 0xa0, 0xa0, 0, 0},
			"v2-waiting-not-uint":    v2(9, 0x91, 0xa1, 'x'),
			"v2-waiting-map":         v2(9, 0x81, 1, 2),
			"v2-read-without-resume": {0x99, 0xa0, 0xa0, 0, 0, 0, ClientProtocol, 5, 0, 0x90},
		}
	case TypeClientAck:
		return map[string][]byte{
			"zero":     {0x91, 0},
			"negative": {0x91, 0xff},
			"two":      {0x92, 1, 2},
		}
	case TypeClientAcquire:
		return map[string][]byte{
			"no-permits":      {0x98, 0xa1, 'l', 0xa1, 's', 0, 0, 0, 0, 0, 0},
			"count-over":      {0x98, 0xa1, 'l', 0xa1, 's', 2, 3, 0, 0, 0, 0},
			"lock-flags":      {0x98, 0xa1, 'l', 0xa1, 's', 2, 1, 4, 0, 0, 0},
			"negative-ttl":    {0x98, 0xa1, 'l', 0xa1, 's', 2, 1, 0, 0, 0xff, 0},
			"over-maxpermits": {0x98, 0xa1, 'l', 0xa1, 's', 0xce, 0x01, 0x00, 0x00, 0x01, 1, 0, 0, 0, 0},
		}
	case TypeLockReport:
		lockHead := []byte{0x93, 1, 0xa2, 'l', 's'}
		return map[string][]byte{
			"bomb-locks":             cat(lockHead, bomb),
			"bomb-locks-1-byte-each": cat(lockHead, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
		}
	case TypePropose:
		return map[string][]byte{
			"bomb-members": cat([]byte{0x94, 1, 0xa1, 'c', 0}, bomb),
			"unsorted":     {0x94, 1, 0xa1, 'c', 0, 0x92, 0x92, 0xa1, 'b', 1, 0x92, 0xa1, 'a', 1},
			"duplicate":    {0x94, 1, 0xa1, 'c', 0, 0x92, 0x92, 0xa1, 'a', 1, 0x92, 0xa1, 'a', 2},
		}
	case TypeDeadlockReport:
		head := []byte{0x93, 1, 1}
		return map[string][]byte{
			"bomb-edges":             cat(head, bomb),
			"bomb-edges-1-byte-each": cat(head, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			"over-max-edges":         (&DeadlockReport{Epoch: 1, Edges: manyEdges(MaxEdges + 1)}).appendBody(nil),
			"edge-waits-for-itself":  cat(head, []byte{0x91, 0x9c, 0xa1, 'l', 0xa1, 'r', 5, 1, 1, 0, 1, 1, 1, 1, 0, 0}),
			"edge-kind-0":            cat(head, []byte{0x91, 0x9c, 0xa1, 'l', 0xa1, 'r', 5, 1, 1, 0, 1, 0, 2, 1, 0, 0}),
		}
	case TypePermitReport:
		head := []byte{0x93, 1, 0xa2, 'l', 's'}
		return map[string][]byte{
			"bomb-permits":             cat(head, bomb),
			"bomb-permits-1-byte-each": cat(head, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			"converting":               cat(head, []byte{0x91, 0x98, 0xa1, 'r', 1, 0, 2, 3, 1, 0, 0}),
			"count-over-permits":       cat(head, []byte{0x91, 0x98, 0xa1, 'r', 1, 0, 1, 3, 4, 0, 0}),
		}
	case TypeSemaphoreRequest:
		return map[string][]byte{
			"no-permits":   {0x9a, 1, 0xa1, 'l', 0xa1, 'r', 1, 0, 0, 0, 0, 0, 0},
			"over-permits": {0x9a, 1, 0xa1, 'l', 0xa1, 'r', 1, 0, 0xce, 0x01, 0x00, 0x00, 0x01, 1, 0, 0, 0},
		}
	case TypeDescribeReply:
		head := []byte{0x97, 1, 1}
		tail := []byte{0, mpTrue, 0, 0} // omitted, value valid, seq, len
		return map[string][]byte{
			"bomb-locks":             cat(head, bomb),
			"bomb-locks-1-byte-each": cat(head, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			"locks-with-retry":       cat([]byte{0x97, 1, 3, 0x91, 0x9b, 0xa1, 'a', 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}, tail),
			"out-of-queue-order":     cat([]byte{0x97, 1, 1, 0x92, 0x9b, 0xa1, 'a', 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x9b, 0xa1, 'b', 2, 0, 1, 0, 0, 0, 0, 0, 0, 0}, tail),
			"negative-ttl":           cat([]byte{0x97, 1, 1, 0x91, 0x9b, 0xa1, 'a', 1, 0, 1, 0, 0, 0, 0, 0, 0, 0xff}, tail),
			"no-node-name":           cat([]byte{0x97, 1, 1, 0x91, 0x9b, 0xa0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}, tail),
		}
	case TypeDeadlockConfirm:
		head := []byte{0x92, 1}
		return map[string][]byte{
			"bomb-edges":             cat(head, bomb),
			"bomb-edges-1-byte-each": cat(head, []byte{mpArray16, 0x04, 0x00}, make([]byte, 1024)),
			"no-edges":               cat(head, []byte{0x90}),
		}
	case TypeDeadlockConfirmed:
		return map[string][]byte{
			"bomb-held":     cat([]byte{0x92, 1}, bomb),
			"over-max-held": (&DeadlockConfirmed{Epoch: 1, Held: make([]bool, MaxEdges+1)}).appendBody(nil),
			"held-not-bool": {0x92, 1, 0x91, 1},
		}
	case TypeCommit:
		return map[string][]byte{
			"bomb-members":      cat([]byte{0x93, 1, 0xa1, 'c'}, bomb),
			"over-max-members":  cat([]byte{0x93, 1, 0xa1, 'c', mpArray16, 0x04, 0x01}, bytes.Repeat([]byte{0x92, 0xa1, 'm', 1}, MaxMembers+1)),
			"members-zero-boot": {0x93, 1, 0xa1, 'c', 0x91, 0x92, 0xa1, 'a', 0},
			// as many distinct names as the intern table holds, in 1.3 KB
			"many-names": (&Commit{Epoch: 1, Coordinator: "c", Members: shortNames(maxInterned)}).appendBody(nil),
		}
	}
	return nil
}

// bodySeeds are bodies for the per-type fuzz target of t.
func bodySeeds(t Type) map[string][]byte {
	s := map[string][]byte{
		"bomb-array32": bomb,
		"empty":        {},
		"empty-array":  {0x90},
		"map16-bomb":   {mpMap16, 0xff, 0xff},
		"bin32-bomb":   {mpBin32, 0xff, 0xff, 0xff, 0xf0},
	}
	for i, m := range samples() {
		if m.Type() != t {
			continue
		}
		body := m.appendBody(nil)
		s["valid-"+strconv.Itoa(i)] = body
		s["truncated-"+strconv.Itoa(i)] = body[:len(body)/2]
		s["trailing-"+strconv.Itoa(i)] = append(append([]byte(nil), body...), 0xc0)
	}
	maps.Copy(s, typeSeeds(t))
	return s
}

// writeSeedFiles writes seeds in the "go test fuzz v1" format under
// testdata/fuzz/<target>, when -wire.writecorpus is given.
func writeSeedFiles(tb testing.TB, target string, seeds map[string][]byte) {
	if !*writeCorpus {
		return
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, b := range seeds {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
