package wire

import (
	"errors"
	"reflect"
	"testing"
)

// A Propose, Promise or Commit from a sender that leaves the configuration
// out decodes with the zero ViewConfig; one with it round-trips.
func TestViewConfigOptional(t *testing.T) {
	cfg := ViewConfig{Version: 7, Members: []string{"a", "b", "c"}, Old: []string{"a", "b"}}
	members := []ViewMember{{Name: "a", BootID: 1}}
	for _, m := range []Message{
		&Propose{Epoch: 2, Coordinator: "a", PrevEpoch: 1, Members: members, Config: cfg},
		&Promise{Epoch: 2, OK: true, Promised: 2, Committed: 1, Config: cfg},
		&Commit{Epoch: 2, Coordinator: "a", Members: members, Config: cfg},
	} {
		_, got, err := NewDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(m.Type()), 0, m.appendBody(nil)))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: decoded %+v, %v; want %+v", m, got, err, m)
		}
		// The same body without its last field (the configuration).
		var short []byte
		switch m := m.(type) {
		case *Propose:
			short = appendMembers(appendUint(appendStr(appendUint(appendArrayLen(nil, proposeFields-1), m.Epoch), m.Coordinator), m.PrevEpoch), m.Members)
		case *Promise:
			short = appendStr(appendUint(appendUint(appendBool(appendUint(appendArrayLen(nil, promiseFields-1), m.Epoch), m.OK), m.Promised), m.Committed), m.Reason)
		case *Commit:
			short = appendMembers(appendStr(appendUint(appendArrayLen(nil, commitFields-1), m.Epoch), m.Coordinator), m.Members)
		}
		_, old, err := NewDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(m.Type()), 0, short))
		if err != nil {
			t.Fatalf("%T without a configuration: %v", m, err)
		}
		if c := reflect.ValueOf(old).Elem().FieldByName("Config").Interface().(ViewConfig); !c.IsZero() {
			t.Errorf("%T without a configuration decoded %+v", m, c)
		}
	}
}

func TestViewConfigValidate(t *testing.T) {
	members := []ViewMember{{Name: "a", BootID: 1}}
	for _, c := range []ViewConfig{
		{Version: 1},
		{Version: 1, Members: []string{"b", "a"}},
		{Version: 1, Members: []string{"a", "a"}},
		{Version: 1, Members: []string{"a"}, Old: []string{""}},
	} {
		m := &Commit{Epoch: 1, Coordinator: "a", Members: members, Config: c}
		if err := m.Validate(nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: Validate = %v, want ErrInvalid", c, err)
		}
	}
}
