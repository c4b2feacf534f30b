package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/seed-a6839e30/dlm/modes"
)

// The bodies are plain msgpack: a generic library (pinned at v5.3.5, see
// membership.md §6) decodes what the hand-written encoder writes, and the
// hand-written decoder reads what the library writes with its own choice of
// integer widths. This test is the only user of the library.

type libCompletion struct {
	Epoch     uint64
	Lockspace string
	Lock      uint64
	Status    uint8
	Mode      uint8
	Token     uint64
	LVB       []byte
	LVBSeq    uint64
	LVBFlags  uint8
	Demoted   bool
	Err       string
}

type libLockRequest struct {
	Epoch     uint64
	Lockspace string
	Resource  string
	Lock      uint64
	Owner     uint64
	Mode      uint8
	Flags     uint32
	Timeout   int64
	TTL       int64
	Session   uint64
}

type libRenew struct {
	Epoch     uint64
	Lockspace string
	Session   uint64
	Locks     []uint64
}

// The nested arrays of the recovery messages are arrays of arrays.

type libViewMember struct {
	Name   string
	BootID uint64
}

type libPropose struct {
	Epoch       uint64
	Coordinator string
	PrevEpoch   uint64
	Members     []libViewMember
	Config      libViewConfig
}

type libViewConfig struct {
	Version uint64
	Members []string
	Old     []string
}

type libQueuedLock struct {
	Node    uint32
	Lock    uint64
	Queue   uint8
	Granted uint8
}

type libReportedResource struct {
	Resource string
	LVB      []byte
	LVBSeq   uint64
	LVBFlags uint8
	Locks    []libQueuedLock
}

type libMasterReport struct {
	Epoch     uint64
	Lockspace string
	LastToken uint64
	Resources []libReportedResource
}

type libReportedLock struct {
	Resource  string
	Lock      uint64
	Owner     uint64
	Queue     uint8
	Granted   uint8
	Requested uint8
	Token     uint64
	TTL       int64
	LVB       []byte
	LVBSeq    uint64
	LVBFlags  uint8
	Session   uint64
}

type libLockReport struct {
	Epoch     uint64
	Lockspace string
	Locks     []libReportedLock
}

type libWaitEdge struct {
	Lockspace    string
	Resource     string
	Mode         uint8
	WaiterNode   uint32
	WaiterLock   uint64
	WaiterOwner  uint64
	WaiterGen    uint64
	Kind         uint8
	BlockerNode  uint32
	BlockerLock  uint64
	BlockerOwner uint64
	Stamp        uint64
}

type libDeadlockReport struct {
	Epoch uint64
	Seq   uint64
	Edges []libWaitEdge
}

type libDeadlockConfirmed struct {
	Epoch uint64
	Held  []bool
}

type libSemaphoreRequest struct {
	Epoch     uint64
	Lockspace string
	Resource  string
	Lock      uint64
	Owner     uint64
	Permits   uint32
	Count     uint32
	Flags     uint32
	Timeout   int64
	TTL       int64
}

type libReportedPermit struct {
	Resource string
	Lock     uint64
	Owner    uint64
	Queue    uint8
	Permits  uint32
	Count    uint32
	Token    uint64
	TTL      int64
}

type libPermitReport struct {
	Epoch     uint64
	Lockspace string
	Permits   []libReportedPermit
}

type libDescribedLock struct {
	Node      string
	Lock      uint64
	Owner     uint64
	Queue     uint8
	Granted   uint8
	Requested uint8
	Permits   uint32
	Count     uint32
	Token     uint64
	Waited    int64
	TTL       int64
}

type libDescribeReply struct {
	Epoch      uint64
	Status     uint8
	Locks      []libDescribedLock
	Omitted    uint32
	ValueValid bool
	ValueSeq   uint64
	ValueLen   uint32
}

func TestBodiesAreStandardMsgpack(t *testing.T) {
	cases := []struct {
		ours Message
		lib  any // pointer to the library's view of the same message
		zero func() any
	}{
		{
			&LockRequest{Epoch: 1 << 40, Lockspace: "fs1", Resource: "inode/42", Lock: 7, Owner: 3, Mode: modes.PW, Flags: 0x10, Timeout: 5e9, TTL: 1, Session: 1 << 33},
			&libLockRequest{Epoch: 1 << 40, Lockspace: "fs1", Resource: "inode/42", Lock: 7, Owner: 3, Mode: uint8(modes.PW), Flags: 0x10, Timeout: 5e9, TTL: 1, Session: 1 << 33},
			func() any { return new(libLockRequest) },
		},
		{
			&Completion{Epoch: 2, Lockspace: "fs1", Lock: 9, Status: StatusGranted, Mode: modes.EX, Token: 99, LVB: []byte("lvb"), LVBSeq: 4, LVBFlags: LVBPresent | LVBValid, Demoted: true, Err: "x"},
			&libCompletion{Epoch: 2, Lockspace: "fs1", Lock: 9, Status: uint8(StatusGranted), Mode: uint8(modes.EX), Token: 99, LVB: []byte("lvb"), LVBSeq: 4, LVBFlags: 3, Demoted: true, Err: "x"},
			func() any { return new(libCompletion) },
		},
		{
			&Renew{Epoch: 3, Lockspace: "fs1", Session: 12, Locks: []uint64{1, 1 << 63}},
			&libRenew{Epoch: 3, Lockspace: "fs1", Session: 12, Locks: []uint64{1, 1 << 63}},
			func() any { return new(libRenew) },
		},
		{
			&Propose{Epoch: 5, Coordinator: "a", PrevEpoch: 4, Members: []ViewMember{{Name: "a", BootID: 1 << 50}, {Name: "b", BootID: 2}}, Config: ViewConfig{Version: 3, Members: []string{"a", "b"}, Old: []string{"a"}}},
			&libPropose{Epoch: 5, Coordinator: "a", PrevEpoch: 4, Members: []libViewMember{{Name: "a", BootID: 1 << 50}, {Name: "b", BootID: 2}}, Config: libViewConfig{Version: 3, Members: []string{"a", "b"}, Old: []string{"a"}}},
			func() any { return new(libPropose) },
		},
		{
			&LockReport{Epoch: 5, Lockspace: "fs1", Locks: []ReportedLock{
				{Resource: "r", Lock: 1, Owner: 2, Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, Token: 1 << 40, TTL: 3e9, LVB: []byte("v"), LVBSeq: 7, LVBFlags: LVBPresent, Session: 4},
			}},
			&libLockReport{Epoch: 5, Lockspace: "fs1", Locks: []libReportedLock{
				{Resource: "r", Lock: 1, Owner: 2, Queue: QueueConverting, Granted: uint8(modes.PR), Requested: uint8(modes.EX), Token: 1 << 40, TTL: 3e9, LVB: []byte("v"), LVBSeq: 7, LVBFlags: 1, Session: 4},
			}},
			func() any { return new(libLockReport) },
		},
		{
			&MasterReport{Epoch: 5, Lockspace: "fs1", LastToken: 1 << 40, Resources: []ReportedResource{
				{Resource: "r", LVB: []byte("lvb"), LVBSeq: 3, LVBFlags: LVBPresent | LVBValid, Locks: []QueuedLock{
					{Node: 1 << 31, Lock: 9, Queue: QueueGranted, Granted: modes.PW},
					{Node: 2, Lock: 10, Queue: QueueWaiting, Granted: modes.NL},
				}},
			}},
			&libMasterReport{Epoch: 5, Lockspace: "fs1", LastToken: 1 << 40, Resources: []libReportedResource{
				{Resource: "r", LVB: []byte("lvb"), LVBSeq: 3, LVBFlags: 3, Locks: []libQueuedLock{
					{Node: 1 << 31, Lock: 9, Queue: QueueGranted, Granted: uint8(modes.PW)},
					{Node: 2, Lock: 10, Queue: QueueWaiting, Granted: uint8(modes.NL)},
				}},
			}},
			func() any { return new(libMasterReport) },
		},
		{
			&DeadlockReport{Epoch: 5, Seq: 1 << 33, Edges: []WaitEdge{
				{Lockspace: "fs1", Resource: "r", Mode: modes.EX, WaiterNode: 1 << 31, WaiterLock: 9, WaiterOwner: 1 << 40, WaiterGen: 3,
					Kind: BlockAhead, BlockerNode: 2, BlockerLock: 10, BlockerOwner: 7, Stamp: 2},
			}},
			&libDeadlockReport{Epoch: 5, Seq: 1 << 33, Edges: []libWaitEdge{
				{Lockspace: "fs1", Resource: "r", Mode: uint8(modes.EX), WaiterNode: 1 << 31, WaiterLock: 9, WaiterOwner: 1 << 40, WaiterGen: 3,
					Kind: BlockAhead, BlockerNode: 2, BlockerLock: 10, BlockerOwner: 7, Stamp: 2},
			}},
			func() any { return new(libDeadlockReport) },
		},
		{
			&SemaphoreRequest{Epoch: 5, Lockspace: "fs1", Resource: "pool", Lock: 9, Owner: 1 << 40, Permits: 1 << 20, Count: 300, Flags: 1, Timeout: 5e9, TTL: 2},
			&libSemaphoreRequest{Epoch: 5, Lockspace: "fs1", Resource: "pool", Lock: 9, Owner: 1 << 40, Permits: 1 << 20, Count: 300, Flags: 1, Timeout: 5e9, TTL: 2},
			func() any { return new(libSemaphoreRequest) },
		},
		{
			&PermitReport{Epoch: 5, Lockspace: "fs1", Permits: []ReportedPermit{{Resource: "pool", Lock: 1, Owner: 2, Queue: QueueWaiting, Permits: 7, Count: 7, Token: 1 << 50, TTL: 3e9}}},
			&libPermitReport{Epoch: 5, Lockspace: "fs1", Permits: []libReportedPermit{{Resource: "pool", Lock: 1, Owner: 2, Queue: QueueWaiting, Permits: 7, Count: 7, Token: 1 << 50, TTL: 3e9}}},
			func() any { return new(libPermitReport) },
		},
		{
			&DescribeReply{Epoch: 5, Status: DescribeFound, Omitted: 1 << 20, ValueValid: true, ValueSeq: 1 << 33, ValueLen: 64, Locks: []DescribedLock{
				{Node: "node-1", Lock: 9, Owner: 3, Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, Token: 1 << 40, Waited: 7e9, TTL: 3e9},
				{Node: "node-2", Lock: 10, Queue: QueueWaiting, Permits: 5, Count: 2},
			}},
			&libDescribeReply{Epoch: 5, Status: uint8(DescribeFound), Omitted: 1 << 20, ValueValid: true, ValueSeq: 1 << 33, ValueLen: 64, Locks: []libDescribedLock{
				{Node: "node-1", Lock: 9, Owner: 3, Queue: QueueConverting, Granted: uint8(modes.PR), Requested: uint8(modes.EX), Token: 1 << 40, Waited: 7e9, TTL: 3e9},
				{Node: "node-2", Lock: 10, Queue: QueueWaiting, Permits: 5, Count: 2},
			}},
			func() any { return new(libDescribeReply) },
		},
		{
			&DeadlockConfirmed{Epoch: 5, Held: []bool{true, false}},
			&libDeadlockConfirmed{Epoch: 5, Held: []bool{true, false}},
			func() any { return new(libDeadlockConfirmed) },
		},
	}
	for _, c := range cases {
		// ours -> library
		body := c.ours.appendBody(nil)
		got := c.zero()
		if err := msgpack.Unmarshal(body, got); err != nil {
			t.Fatalf("library cannot read our %T: %v", c.ours, err)
		}
		if !reflect.DeepEqual(got, c.lib) {
			t.Errorf("library read %+v, want %+v", got, c.lib)
		}
		// library -> ours
		var lib bytes.Buffer
		enc := msgpack.NewEncoder(&lib)
		enc.UseArrayEncodedStructs(true) // the bodies are arrays, not maps
		if err := enc.Encode(c.lib); err != nil {
			t.Fatal(err)
		}
		libBody := lib.Bytes()
		if bytes.Equal(libBody, body) {
			t.Logf("%T: library and hand-written encodings coincide", c.ours)
		}
		_, m, err := NewDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(c.ours.Type()), 0, libBody))
		if err != nil {
			t.Fatalf("we cannot read the library's %T: %v (%x)", c.ours, err, libBody)
		}
		if !reflect.DeepEqual(m, c.ours) {
			t.Errorf("we read %+v, want %+v", m, c.ours)
		}
	}
}
