package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// This file holds the messages of deadlock detection across nodes (see the
// dlm package for the protocol): every node reports the wait-for edges of
// its long-waiting requests to the detector (DeadlockReport, one-way); the
// detector asks the masters of the edges of a cycle whether each still
// holds (DeadlockConfirm, a request, answered by DeadlockConfirmed), and
// then asks the master of one request of the cycle to fail it
// (DeadlockFail, one-way). Every message carries the epoch of the view its
// edges were observed in; a master confirms and fails only in that epoch.
//
// The edges of one message are bounded by MaxEdges; their decoders bound the
// array by the bytes that remain (structArrayLen) and by MaxEdges before
// sizing a slice. Lockspace names are interned, resource names not.

// Kinds of blocker (WaitEdge.Kind). 0 is not a kind, so a forgotten field is
// refused.
const (
	BlockHolder = 1 // the blocker holds a conflicting mode; Stamp is its fencing token
	BlockAhead  = 2 // the blocker's request is queued ahead; Stamp is its request generation
)

// WaitEdge is one wait-for edge as a master observed it: the waiter's queued
// request cannot be granted before the blocker's lock changes. The ids let
// the master confirm later that the edge held all along (master.EdgeHolds).
type WaitEdge struct {
	Lockspace    string     // 1..MaxLockspace
	Resource     string     // 1..Limits.MaxName
	WaiterLock   uint64     // ≠ 0, with WaiterNode: the waiting lock
	WaiterOwner  uint64     // 0: the lock is its own owner
	WaiterGen    uint64     // ≠ 0: generation of the waiter's queued request
	BlockerLock  uint64     // ≠ 0, with BlockerNode: the blocking lock, not the waiter
	BlockerOwner uint64     // 0: the lock is its own owner
	Stamp        uint64     // fencing token (BlockHolder) or request generation, ≠ 0 (BlockAhead)
	WaiterNode   uint32     // numeric node id (any value)
	BlockerNode  uint32     // numeric node id (any value)
	Mode         modes.Mode // valid: the mode the waiter asks for
	Kind         uint8      // BlockHolder or BlockAhead
}

const waitEdgeFields = 12

func (e *WaitEdge) validate(l *Limits) error {
	if err := checkName("lockspace", e.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkName("resource", e.Resource, l.MaxName); err != nil {
		return err
	}
	if err := checkMode(e.Mode); err != nil {
		return err
	}
	if err := checkLock(e.WaiterLock); err != nil {
		return err
	}
	if err := checkLock(e.BlockerLock); err != nil {
		return err
	}
	if e.WaiterNode == e.BlockerNode && e.WaiterLock == e.BlockerLock {
		return fmt.Errorf("%w: lock %d/%d waits for itself", ErrInvalid, e.WaiterNode, e.WaiterLock)
	}
	if e.WaiterGen == 0 {
		return fmt.Errorf("%w: request generation 0", ErrInvalid)
	}
	switch e.Kind {
	case BlockHolder:
	case BlockAhead:
		if e.Stamp == 0 {
			return fmt.Errorf("%w: request generation 0 of a blocker queued ahead", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: unknown blocker kind %d", ErrInvalid, e.Kind)
	}
	return nil
}

func checkEdges(edges []WaitEdge, min int, l *Limits) error {
	if len(edges) < min || len(edges) > MaxEdges {
		return fmt.Errorf("%w: %d edges, must be %d..%d", ErrInvalid, len(edges), min, MaxEdges)
	}
	for i := range edges {
		if err := edges[i].validate(l); err != nil {
			return fmt.Errorf("edge %d: %w", i, err)
		}
	}
	return nil
}

func appendEdges(b []byte, edges []WaitEdge) []byte {
	b = appendArrayLen(b, len(edges))
	for i := range edges {
		e := &edges[i]
		b = appendArrayLen(b, waitEdgeFields)
		b = appendStr(b, e.Lockspace)
		b = appendStr(b, e.Resource)
		b = appendUint(b, uint64(e.Mode))
		b = appendUint(b, uint64(e.WaiterNode))
		b = appendUint(b, e.WaiterLock)
		b = appendUint(b, e.WaiterOwner)
		b = appendUint(b, e.WaiterGen)
		b = appendUint(b, uint64(e.Kind))
		b = appendUint(b, uint64(e.BlockerNode))
		b = appendUint(b, e.BlockerLock)
		b = appendUint(b, e.BlockerOwner)
		b = appendUint(b, e.Stamp)
	}
	return b
}

// edges reads an array of edges into edges, reusing its array. It returns
// the slice even on error, so that the message keeps the array for the next
// decode.
func (d *Decoder) edges(r *reader, edges []WaitEdge) ([]WaitEdge, error) {
	n, err := r.structArrayLen("edges", waitEdgeFields) // bounded before the make in reuse
	if err != nil {
		return edges, err
	}
	if n > MaxEdges {
		return edges, fmt.Errorf("%w: %d edges, limit %d", ErrInvalid, n, MaxEdges)
	}
	edges = reuse(edges, n)
	for i := range edges {
		if err = d.waitEdge(r, &edges[i]); err != nil {
			return edges, fmt.Errorf("edge %d: %w", i, err)
		}
	}
	return edges, nil
}

// waitEdge overwrites every field of e.
func (d *Decoder) waitEdge(r *reader, e *WaitEdge) (err error) {
	if err = r.expectArray(waitEdgeFields); err != nil {
		return err
	}
	if e.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if e.Resource, err = d.stringField(r, "resource", d.limits.MaxName); err != nil {
		return err
	}
	if e.Mode, err = readMode(r); err != nil {
		return err
	}
	if e.WaiterNode, err = r.uint32(); err != nil {
		return err
	}
	if e.WaiterLock, err = r.uint64(); err != nil {
		return err
	}
	if e.WaiterOwner, err = r.uint64(); err != nil {
		return err
	}
	if e.WaiterGen, err = r.uint64(); err != nil {
		return err
	}
	if e.Kind, err = r.uint8(); err != nil {
		return err
	}
	if e.BlockerNode, err = r.uint32(); err != nil {
		return err
	}
	if e.BlockerLock, err = r.uint64(); err != nil {
		return err
	}
	if e.BlockerOwner, err = r.uint64(); err != nil {
		return err
	}
	e.Stamp, err = r.uint64()
	return err
}

// DeadlockReport: a node tells the deadlock detector the wait-for edges of
// the requests that have waited long on the tables it masters (one-way). A
// later report from the same node replaces an earlier one; an empty report
// says the node has no such edges any more.
type DeadlockReport struct {
	Epoch uint64     // ≥ 1: the view the edges were observed in
	Seq   uint64     // increases with every report of the sender
	Edges []WaitEdge // 0..MaxEdges
}

const deadlockReportFields = 3

// Type implements Message.
func (*DeadlockReport) Type() Type { return TypeDeadlockReport }

func (*DeadlockReport) name() string { return "deadlock_report" }

// Validate implements Message.
func (m *DeadlockReport) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	return checkEdges(m.Edges, 0, l)
}

func (m *DeadlockReport) appendBody(b []byte) []byte {
	b = appendArrayLen(b, deadlockReportFields)
	b = appendUint(b, m.Epoch)
	b = appendUint(b, m.Seq)
	return appendEdges(b, m.Edges)
}

func (m *DeadlockReport) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(deadlockReportFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Seq, err = r.uint64(); err != nil {
		return err
	}
	m.Edges, err = d.edges(r, m.Edges)
	return err
}

// DeadlockConfirm: the detector asks a master whether each of these edges,
// which the master reported, still holds and has held without a break since
// (a request; reply DeadlockConfirmed).
type DeadlockConfirm struct {
	Epoch uint64     // ≥ 1: the view the edges were observed in
	Edges []WaitEdge // 1..MaxEdges
}

const deadlockConfirmFields = 2

// Type implements Message.
func (*DeadlockConfirm) Type() Type { return TypeDeadlockConfirm }

func (*DeadlockConfirm) name() string { return "deadlock_confirm" }

// Validate implements Message.
func (m *DeadlockConfirm) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	return checkEdges(m.Edges, 1, l)
}

func (m *DeadlockConfirm) appendBody(b []byte) []byte {
	b = appendArrayLen(b, deadlockConfirmFields)
	b = appendUint(b, m.Epoch)
	return appendEdges(b, m.Edges)
}

func (m *DeadlockConfirm) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(deadlockConfirmFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	m.Edges, err = d.edges(r, m.Edges)
	return err
}

// DeadlockConfirmed answers a DeadlockConfirm: Held[i] says whether its
// edge i holds. A master outside the epoch asked about holds none.
type DeadlockConfirmed struct {
	Epoch uint64 // ≥ 1: the epoch of the DeadlockConfirm
	Held  []bool // 1..MaxEdges, one per edge asked about
}

const deadlockConfirmedFields = 2

// Type implements Message.
func (*DeadlockConfirmed) Type() Type { return TypeDeadlockConfirmed }

func (*DeadlockConfirmed) name() string { return "deadlock_confirmed" }

// Validate implements Message.
func (m *DeadlockConfirmed) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if len(m.Held) == 0 || len(m.Held) > MaxEdges {
		return fmt.Errorf("%w: %d answers, must be 1..%d", ErrInvalid, len(m.Held), MaxEdges)
	}
	return nil
}

func (m *DeadlockConfirmed) appendBody(b []byte) []byte {
	b = appendArrayLen(b, deadlockConfirmedFields)
	b = appendUint(b, m.Epoch)
	b = appendArrayLen(b, len(m.Held))
	for _, h := range m.Held {
		b = appendBool(b, h)
	}
	return b
}

func (m *DeadlockConfirmed) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(deadlockConfirmedFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	n, err := r.arrayLen() // n ≤ bytes remaining: bounded before the make in reuse
	if err != nil {
		return err
	}
	if n > MaxEdges {
		return fmt.Errorf("%w: %d answers, limit %d", ErrInvalid, n, MaxEdges)
	}
	m.Held = reuse(m.Held, n)
	for i := range m.Held {
		if m.Held[i], err = r.bool(); err != nil {
			return err
		}
	}
	return nil
}

// DeadlockFail: the detector asks the master of a request on a confirmed
// cycle to fail it with a deadlock error (one-way). The master fails it
// only if it is still the queued request of generation Gen.
type DeadlockFail struct {
	Epoch     uint64 // ≥ 1: the view the cycle was confirmed in
	Lockspace string // 1..MaxLockspace
	Resource  string // 1..Limits.MaxName
	Node      uint32 // numeric node id of the lock (any value)
	Lock      uint64 // ≠ 0
	Gen       uint64 // ≠ 0: generation of the request to fail
	Detail    string // what the cycle was, for the error, ≤ MaxErr bytes (may be empty)
}

const deadlockFailFields = 7

// Type implements Message.
func (*DeadlockFail) Type() Type { return TypeDeadlockFail }

func (*DeadlockFail) name() string { return "deadlock_fail" }

// Validate implements Message.
func (m *DeadlockFail) Validate(l *Limits) error {
	if err := checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l); err != nil {
		return err
	}
	if m.Gen == 0 {
		return fmt.Errorf("%w: request generation 0", ErrInvalid)
	}
	if len(m.Detail) > MaxErr {
		return fmt.Errorf("%w: detail of %d bytes, limit %d", ErrInvalid, len(m.Detail), MaxErr)
	}
	return nil
}

func (m *DeadlockFail) appendBody(b []byte) []byte {
	b = appendArrayLen(b, deadlockFailFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendStr(b, m.Resource)
	b = appendUint(b, uint64(m.Node))
	b = appendUint(b, m.Lock)
	b = appendUint(b, m.Gen)
	return appendStr(b, m.Detail)
}

func (m *DeadlockFail) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(deadlockFailFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if m.Resource, err = d.stringField(r, "resource", d.limits.MaxName); err != nil {
		return err
	}
	if m.Node, err = r.uint32(); err != nil {
		return err
	}
	if m.Lock, err = r.uint64(); err != nil {
		return err
	}
	if m.Gen, err = r.uint64(); err != nil {
		return err
	}
	m.Detail, err = d.stringField(r, "detail", MaxErr)
	return err
}
