package wire

// This file holds the barrier messages of recovery: after a Commit, the
// coordinator steps the members through numbered phases. Both messages are
// one-way and repeated until they take effect, so both carry the epoch they
// belong to, by which a receiver tells a stale one from a current one.

// RecoveryStatus: a member tells the coordinator it completed a recovery
// phase (one-way, repeated until the next phase arrives).
type RecoveryStatus struct {
	Epoch uint64 // ≥ 1
	Phase uint8  // 1..MaxPhase: the phase completed
}

const recoveryStatusFields = 2

// Type implements Message.
func (*RecoveryStatus) Type() Type { return TypeRecoveryStatus }

func (*RecoveryStatus) name() string { return "recovery_status" }

// Validate implements Message.
func (m *RecoveryStatus) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	return checkPhase(m.Phase)
}

func (m *RecoveryStatus) appendBody(b []byte) []byte {
	b = appendArrayLen(b, recoveryStatusFields)
	b = appendUint(b, m.Epoch)
	return appendUint(b, uint64(m.Phase))
}

func (m *RecoveryStatus) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(recoveryStatusFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	m.Phase, err = r.uint8()
	return err
}

// RecoveryPhase: the coordinator tells members to run a phase (one-way).
type RecoveryPhase struct {
	Epoch uint64 // ≥ 1
	Phase uint8  // 1..MaxPhase
}

const recoveryPhaseFields = 2

// Type implements Message.
func (*RecoveryPhase) Type() Type { return TypeRecoveryPhase }

func (*RecoveryPhase) name() string { return "recovery_phase" }

// Validate implements Message.
func (m *RecoveryPhase) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	return checkPhase(m.Phase)
}

func (m *RecoveryPhase) appendBody(b []byte) []byte {
	b = appendArrayLen(b, recoveryPhaseFields)
	b = appendUint(b, m.Epoch)
	return appendUint(b, uint64(m.Phase))
}

func (m *RecoveryPhase) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(recoveryPhaseFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	m.Phase, err = r.uint8()
	return err
}
