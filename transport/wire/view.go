package wire

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds the messages that agree on membership: quorum lease
// heartbeats and the two-phase view change (Propose/Promise, then Commit).
// The coordinator's name is interned, as a Hello's node name is. Member names
// are not: one view can list more names than the Decoder's intern table holds
// (MaxMembers > maxInterned), and a table filled by views would leave the
// lockspace names of lock traffic, which come later, uninterned for the life
// of the connection; building the table's map in one frame would also cost
// some 40 KiB for a 1 KiB frame. Views are rare, so their strings cost
// nothing that matters.

// ViewMember is one member of a view: a node and the boot it runs.
type ViewMember struct {
	Name   string // 1..MaxNodeName bytes
	BootID uint64 // ≠ 0
}

const viewMemberFields = 2

// SortMembers sorts ms by Name, the order Propose and Commit require.
func SortMembers(ms []ViewMember) {
	slices.SortFunc(ms, func(a, b ViewMember) int { return strings.Compare(a.Name, b.Name) })
}

// checkMembers validates a view's member list: 1..MaxMembers members, sorted
// by Name (byte order, as SortMembers and Go's < on strings) with no name
// twice, so that every node derives the same member order from the same view.
func checkMembers(ms []ViewMember) error {
	if len(ms) == 0 || len(ms) > MaxMembers {
		return fmt.Errorf("%w: view of %d members, must be 1..%d", ErrInvalid, len(ms), MaxMembers)
	}
	for i := range ms {
		if err := checkName("member name", ms[i].Name, MaxNodeName); err != nil {
			return fmt.Errorf("member %d: %w", i, err)
		}
		if ms[i].BootID == 0 {
			return fmt.Errorf("member %d: %w: boot id 0", i, ErrInvalid)
		}
		if i > 0 && ms[i-1].Name >= ms[i].Name {
			return fmt.Errorf("member %d: %w: %q after %q: members must be sorted by name, each once", i, ErrInvalid, ms[i].Name, ms[i-1].Name)
		}
	}
	return nil
}

func appendMembers(b []byte, ms []ViewMember) []byte {
	b = appendArrayLen(b, len(ms))
	for i := range ms {
		b = appendArrayLen(b, viewMemberFields)
		b = appendStr(b, ms[i].Name)
		b = appendUint(b, ms[i].BootID)
	}
	return b
}

// members reads a member list into ms, reusing its array. It returns the
// slice even on error, so that the message keeps the array for the next
// decode.
func (d *Decoder) members(r *reader, ms []ViewMember) ([]ViewMember, error) {
	n, err := r.structArrayLen("members", viewMemberFields)
	if err != nil {
		return ms, err
	}
	if n > MaxMembers {
		return ms, fmt.Errorf("%w: view of %d members, limit %d", ErrInvalid, n, MaxMembers)
	}
	ms = reuse(ms, n)
	for i := range ms {
		e := &ms[i]
		if err = r.expectArray(viewMemberFields); err != nil {
			return ms, err
		}
		if e.Name, err = d.stringField(r, "member name", MaxNodeName); err != nil {
			return ms, err
		}
		if e.BootID, err = r.uint64(); err != nil {
			return ms, err
		}
	}
	return ms, nil
}

// Heartbeat is sent as a request (with a request id) every heartbeat interval
// to every peer; the reply is a HeartbeatAck. It renews the sender's quorum
// lease.
type Heartbeat struct {
	Epoch uint64 // sender's committed view epoch; 0 before its first view (allowed)
}

const heartbeatFields = 1

// Type implements Message.
func (*Heartbeat) Type() Type { return TypeHeartbeat }

func (*Heartbeat) name() string { return "heartbeat" }

// Validate implements Message. Every Heartbeat is valid: epoch 0 is a node
// that has no view yet, which heartbeats too.
func (*Heartbeat) Validate(*Limits) error { return nil }

func (m *Heartbeat) appendBody(b []byte) []byte {
	b = appendArrayLen(b, heartbeatFields)
	return appendUint(b, m.Epoch)
}

func (m *Heartbeat) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(heartbeatFields); err != nil {
		return err
	}
	m.Epoch, err = r.uint64()
	return err
}

// HeartbeatAck answers a Heartbeat.
type HeartbeatAck struct {
	Epoch  uint64 // the acker's committed epoch (0 = none yet)
	Member bool   // the heartbeat's sender is a member of the acker's current view: only then does the ack count toward the sender's lease
}

const heartbeatAckFields = 2

// Type implements Message.
func (*HeartbeatAck) Type() Type { return TypeHeartbeatAck }

func (*HeartbeatAck) name() string { return "heartbeat_ack" }

// Validate implements Message; every HeartbeatAck is valid (see Heartbeat).
func (*HeartbeatAck) Validate(*Limits) error { return nil }

func (m *HeartbeatAck) appendBody(b []byte) []byte {
	b = appendArrayLen(b, heartbeatAckFields)
	b = appendUint(b, m.Epoch)
	return appendBool(b, m.Member)
}

func (m *HeartbeatAck) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(heartbeatAckFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	m.Member, err = r.bool()
	return err
}

// Propose proposes a new view (a request; the reply is a Promise).
type Propose struct {
	Epoch       uint64       // proposed epoch, ≥ 1
	Coordinator string       // proposer's node name, 1..MaxNodeName
	PrevEpoch   uint64       // proposer's last committed epoch (0 = none)
	Members     []ViewMember // 1..MaxMembers, sorted by Name, names unique
	Config      ViewConfig   // the configuration the view is proposed under
}

const proposeFields = 5

// Type implements Message.
func (*Propose) Type() Type { return TypePropose }

func (*Propose) name() string { return "propose" }

// Validate implements Message.
func (m *Propose) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("coordinator", m.Coordinator, MaxNodeName); err != nil {
		return err
	}
	if err := checkMembers(m.Members); err != nil {
		return err
	}
	return m.Config.validate()
}

func (m *Propose) appendBody(b []byte) []byte {
	b = appendArrayLen(b, proposeFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Coordinator)
	b = appendUint(b, m.PrevEpoch)
	b = appendMembers(b, m.Members)
	return appendViewConfig(b, m.Config)
}

func (m *Propose) decodeBody(r *reader, d *Decoder) (err error) {
	hasConfig, err := r.fieldsOrOne(proposeFields)
	if err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Coordinator, err = d.internField(r, "coordinator", MaxNodeName); err != nil {
		return err
	}
	if m.PrevEpoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Members, err = d.members(r, m.Members); err != nil || !hasConfig {
		m.Config = ViewConfig{}
		return err
	}
	m.Config, err = d.viewConfig(r)
	return err
}

// Promise answers a Propose.
type Promise struct {
	Epoch     uint64 // the proposal's epoch, ≥ 1
	OK        bool
	Promised  uint64     // highest epoch this node has promised
	Committed uint64     // this node's committed epoch
	Reason    string     // why not, ≤ MaxErr bytes (may be empty)
	Config    ViewConfig // the configuration this node runs with
}

const promiseFields = 6

// Type implements Message.
func (*Promise) Type() Type { return TypePromise }

func (*Promise) name() string { return "promise" }

// Validate implements Message.
func (m *Promise) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if len(m.Reason) > MaxErr {
		return fmt.Errorf("%w: reason of %d bytes, limit %d", ErrInvalid, len(m.Reason), MaxErr)
	}
	return m.Config.validate()
}

func (m *Promise) appendBody(b []byte) []byte {
	b = appendArrayLen(b, promiseFields)
	b = appendUint(b, m.Epoch)
	b = appendBool(b, m.OK)
	b = appendUint(b, m.Promised)
	b = appendUint(b, m.Committed)
	b = appendStr(b, m.Reason)
	return appendViewConfig(b, m.Config)
}

func (m *Promise) decodeBody(r *reader, d *Decoder) (err error) {
	hasConfig, err := r.fieldsOrOne(promiseFields)
	if err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.OK, err = r.bool(); err != nil {
		return err
	}
	if m.Promised, err = r.uint64(); err != nil {
		return err
	}
	if m.Committed, err = r.uint64(); err != nil {
		return err
	}
	if m.Reason, err = d.stringField(r, "reason", MaxErr); err != nil || !hasConfig {
		m.Config = ViewConfig{}
		return err
	}
	m.Config, err = d.viewConfig(r)
	return err
}

// Commit installs an agreed view (one-way, coordinator to every member).
type Commit struct {
	Epoch       uint64       // ≥ 1
	Coordinator string       // 1..MaxNodeName
	Members     []ViewMember // as in Propose
	Config      ViewConfig   // as in Propose
}

const commitFields = 4

// Type implements Message.
func (*Commit) Type() Type { return TypeCommit }

func (*Commit) name() string { return "commit" }

// Validate implements Message.
func (m *Commit) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("coordinator", m.Coordinator, MaxNodeName); err != nil {
		return err
	}
	if err := checkMembers(m.Members); err != nil {
		return err
	}
	return m.Config.validate()
}

func (m *Commit) appendBody(b []byte) []byte {
	b = appendArrayLen(b, commitFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Coordinator)
	b = appendMembers(b, m.Members)
	return appendViewConfig(b, m.Config)
}

func (m *Commit) decodeBody(r *reader, d *Decoder) (err error) {
	hasConfig, err := r.fieldsOrOne(commitFields)
	if err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Coordinator, err = d.internField(r, "coordinator", MaxNodeName); err != nil {
		return err
	}
	if m.Members, err = d.members(r, m.Members); err != nil || !hasConfig {
		m.Config = ViewConfig{}
		return err
	}
	m.Config, err = d.viewConfig(r)
	return err
}
