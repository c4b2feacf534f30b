package modes

import (
	"errors"
	"fmt"
	"strings"
)

// Mode is a lock mode. The zero value is NL.
type Mode uint8

// The six lock modes, numbered as in VMS (LCK$K_*MODE) and the Linux DLM
// (DLM_LOCK_*).
const (
	NL Mode = iota // Null
	CR             // Concurrent Read
	CW             // Concurrent Write
	PR             // Protected Read
	PW             // Protected Write
	EX             // Exclusive
)

// Count is the number of valid modes.
const Count = 6

// ErrInvalidMode is returned (wrapped) for a mode outside NL..EX or a name that
// is not a mode.
var ErrInvalidMode = errors.New("modes: invalid lock mode")

// compat[held][requested] is the VMS compatibility matrix; see the package
// documentation for the same table drawn out.
var compat = [Count][Count]bool{
	//        NL    CR     CW     PR     PW     EX
	NL: {true, true, true, true, true, true},
	CR: {true, true, true, true, true, false},
	CW: {true, true, true, false, false, false},
	PR: {true, true, false, true, false, false},
	PW: {true, true, false, false, false, false},
	EX: {true, false, false, false, false, false},
}

// compatSet[m] has bit n set when m is compatible with mode n. It turns the
// "stronger" relation into a subset test.
var compatSet = func() (s [Count]uint8) {
	for a := range Count {
		for b := range Count {
			if compat[a][b] {
				s[a] |= 1 << b
			}
		}
	}
	return s
}()

var names = [Count]string{"NL", "CR", "CW", "PR", "PW", "EX"}

var longNames = [Count]string{"null", "concurrent-read", "concurrent-write", "protected-read", "protected-write", "exclusive"}

// Valid reports whether m is one of the six modes.
func (m Mode) Valid() bool { return m < Count }

// String returns the two-letter name of m, or "Mode(n)" for an invalid mode.
func (m Mode) String() string {
	if m.Valid() {
		return names[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Long returns the spelled-out name of m ("protected-read").
func (m Mode) Long() string {
	if m.Valid() {
		return longNames[m]
	}
	return m.String()
}

// Validate returns nil for a valid mode and an error wrapping ErrInvalidMode
// otherwise.
func (m Mode) Validate() error {
	if m.Valid() {
		return nil
	}
	return fmt.Errorf("%w: %d", ErrInvalidMode, uint8(m))
}

// Parse turns a mode name into a Mode. It accepts the two-letter names in any
// case ("EX", "pr") and the long names ("exclusive", "protected-read"; an
// underscore or space may stand for the hyphen).
func Parse(s string) (Mode, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.NewReplacer("_", "-", " ", "-").Replace(t)
	for m := range Mode(Count) {
		if t == strings.ToLower(names[m]) || t == longNames[m] {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrInvalidMode, s)
}

// MarshalText implements encoding.TextMarshaler with the two-letter name.
func (m Mode) MarshalText() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return []byte(names[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what Parse
// accepts.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Compatible reports whether a lock held in mode held and a lock requested in
// mode requested can be granted at once on the same resource. The relation is
// symmetric. Invalid modes are compatible with nothing.
func Compatible(held, requested Mode) bool {
	if !held.Valid() || !requested.Valid() {
		return false
	}
	return compat[held][requested]
}

// Stronger reports whether a shuts out strictly more modes than b: every mode
// compatible with a is compatible with b, and a != b. PR and CW are not
// stronger than each other.
func Stronger(a, b Mode) bool {
	if !a.Valid() || !b.Valid() || a == b {
		return false
	}
	return compatSet[a]&^compatSet[b] == 0
}

// IsDown reports whether converting from -> to is a down-conversion: to is
// strictly weaker than from. A down-conversion never has to wait.
func IsDown(from, to Mode) bool { return Stronger(from, to) }

// IsUp reports whether converting from -> to can add a conflict, so the
// conversion may have to wait: to is stronger than from, or the conversion is
// the middle one between PR and CW. It is false for from == to.
func IsUp(from, to Mode) bool {
	return from.Valid() && to.Valid() && from != to && !IsDown(from, to)
}

// IsMiddle reports whether from -> to is a conversion between PR and CW, where
// neither mode is stronger than the other.
func IsMiddle(from, to Mode) bool {
	return (from == PR && to == CW) || (from == CW && to == PR)
}

// Max returns the stronger of a and b by numeric order (the order the Linux
// DLM uses to pick the "highest" blocked mode). For PR and CW it returns PR.
func Max(a, b Mode) Mode {
	if a > b {
		return a
	}
	return b
}

// All returns the six modes in numeric order, for tables and tests.
func All() [Count]Mode { return [Count]Mode{NL, CR, CW, PR, PW, EX} }
