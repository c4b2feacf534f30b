package wire

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// testDecoder decodes the messages of both protocols, for tests that go
// through every type.
func testDecoder(l Limits) *Decoder {
	d := NewDecoder(l)
	d.kinds = kindLink | kindClient
	return d
}

// A link's decoder refuses the client protocol's messages and a client
// port's decoder the links', so neither end can be made to handle the
// other's.
func TestClientAndLinkDecodersAreSeparate(t *testing.T) {
	l := DefaultLimits()
	for _, m := range samples() {
		frame := mustFrame(t, Header{ID: 1}, m)
		_, _, lerr := NewDecoder(l).DecodeFrame(frame)
		_, _, cerr := NewClientDecoder(l).DecodeFrame(frame)
		if m.Type().Client() {
			if !errors.Is(lerr, ErrUnknownType) || cerr != nil {
				t.Errorf("%v: link decoder %v, client decoder %v", m.Type(), lerr, cerr)
			}
		} else if lerr != nil || !errors.Is(cerr, ErrUnknownType) {
			t.Errorf("%v: link decoder %v, client decoder %v", m.Type(), lerr, cerr)
		}
	}
}

// knownTypes lists every type this build decodes, of both protocols.
func knownTypes() []Type {
	var ts []Type
	for ty := Type(1); ty < clientTypeEnd; ty++ {
		if ty.Known() {
			ts = append(ts, ty)
		}
	}
	return ts
}

func genText(max int) *rapid.Generator[string] {
	return rapid.StringN(0, max, max).Filter(func(s string) bool { return len(s) <= max })
}

func genCode() *rapid.Generator[ClientCode] {
	return rapid.Custom(func(t *rapid.T) ClientCode { return ClientCode(rapid.Uint8Range(1, uint8(codeEnd)-1).Draw(t, "code")) })
}

// genClientMessage draws a valid client protocol message of type ty.
func genClientMessage(t *rapid.T, l Limits, ty Type) Message {
	ls := genName(MaxLockspace).Draw(t, "lockspace")
	res := genName(l.MaxName).Draw(t, "resource")
	lock := genLock().Draw(t, "lock")
	dur := rapid.Int64Min(0)
	switch ty {
	case TypeClientHello:
		m := &ClientHello{Name: genText(MaxNodeName).Draw(t, "name"), Token: genText(MaxToken).Draw(t, "token"), TTL: dur.Draw(t, "ttl")}
		if rapid.Bool().Draw(t, "resume") {
			m.Session, m.Key = rapid.Uint64Min(1).Draw(t, "session"), rapid.Uint64Min(1).Draw(t, "key")
		}
		if rapid.Bool().Draw(t, "v2") {
			m.Version = ClientProtocol
			if m.Session != 0 {
				m.Read = rapid.Uint64().Draw(t, "read")
				m.Pushes = rapid.Uint64().Draw(t, "pushes")
				ids := rapid.SliceOfNDistinct(rapid.Uint64Min(1), 0, 64, rapid.ID[uint64]).Draw(t, "waiting")
				slices.Sort(ids)
				if len(ids) > 0 {
					m.Waiting = ids
				}
			}
		}
		return m
	case TypeClientAck:
		return &ClientAck{Read: rapid.Uint64Min(1).Draw(t, "read")}
	case TypeClientWelcome:
		return &ClientWelcome{Session: rapid.Uint64Min(1).Draw(t, "session"), Key: rapid.Uint64Min(1).Draw(t, "key"),
			TTL: rapid.Int64Min(1).Draw(t, "ttl"), Lease: rapid.Int64Min(1).Draw(t, "lease"), Node: genName(MaxNodeName).Draw(t, "node"),
			Resumed: rapid.Bool().Draw(t, "resumed"), LastRequest: rapid.Uint64().Draw(t, "last"), MaxLocks: rapid.Uint32().Draw(t, "locks"),
			MaxPending: rapid.Uint32().Draw(t, "pending"), MaxFrame: rapid.Uint32().Draw(t, "frame")}
	case TypeClientKeepAlive:
		return &ClientKeepAlive{Lock: rapid.Uint64().Draw(t, "lock")}
	case TypeClientAlive:
		return &ClientAlive{Lease: rapid.Int64Min(1).Draw(t, "lease")}
	case TypeClientLock:
		return &ClientLock{Lockspace: ls, Resource: res, Mode: genMode().Draw(t, "mode"), Flags: rapid.Uint32Range(0, clientLockFlags).Draw(t, "flags") & clientLockFlags,
			Timeout: dur.Draw(t, "timeout"), TTL: dur.Draw(t, "ttl"), Owner: rapid.Uint64().Draw(t, "owner")}
	case TypeClientConvert:
		return &ClientConvert{Lock: lock, Mode: genMode().Draw(t, "mode"), Flags: rapid.Uint32Range(0, clientConvFlags).Draw(t, "flags") & clientConvFlags, Timeout: dur.Draw(t, "timeout")}
	case TypeClientUnlock:
		return &ClientUnlock{Lock: lock}
	case TypeClientCancel:
		return &ClientCancel{Request: rapid.Uint64Min(1).Draw(t, "request")}
	case TypeClientGrant:
		lvb, flags := genLVBBlock(t, l)
		return &ClientGrant{Lock: lock, Mode: genMode().Draw(t, "mode"), Token: rapid.Uint64().Draw(t, "token"), Demoted: rapid.Bool().Draw(t, "demoted"),
			LVB: lvb, LVBSeq: rapid.Uint64().Draw(t, "seq"), LVBFlags: flags}
	case TypeClientValue:
		return &ClientValue{Lock: lock}
	case TypeClientSetValue:
		lvb, op := genLVB(t, l)
		if op == LVBNone {
			op = LVBInvalidate
		}
		return &ClientSetValue{Lock: lock, LVBOp: op, LVB: lvb}
	case TypeClientDescribe:
		return &ClientDescribe{Lockspace: ls, Resource: res, Timeout: dur.Draw(t, "timeout")}
	case TypeClientResource:
		m := &ClientResource{Master: genName(MaxNodeName).Draw(t, "master")}
		if rapid.Bool().Draw(t, "known") {
			m.Known = true
			m.LVB, m.LVBFlags = genLVBBlock(t, l)
			m.LVBSeq = rapid.Uint64().Draw(t, "seq")
			m.Permits = rapid.Uint32Range(0, MaxPermits).Draw(t, "permits")
			m.Omitted = rapid.Uint32().Draw(t, "omitted")
			m.Locks = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ClientDescribedLock {
				q, granted := genQueued(t)
				return ClientDescribedLock{Queue: q, Granted: granted, Requested: genMode().Draw(t, "requested"),
					Node: genName(MaxNodeName).Draw(t, "node"), Lock: rapid.Uint64Min(1).Draw(t, "lock"), Owner: rapid.Uint64().Draw(t, "owner"),
					Token: rapid.Uint64().Draw(t, "token"), Waited: dur.Draw(t, "waited"), TTL: dur.Draw(t, "ttl"),
					Count: rapid.Uint32Range(0, m.Permits).Draw(t, "count")}
			}), 0, 40).Draw(t, "locks")
			if len(m.Locks) == 0 {
				m.Locks = nil
			}
		}
		return m
	case TypeClientOK:
		return &ClientOK{}
	case TypeClientError:
		return &ClientError{Code: genCode().Draw(t, "code"), Text: genText(MaxErr).Draw(t, "text")}
	case TypeClientBlocking:
		return &ClientBlocking{Lock: lock, Mode: genMode().Draw(t, "mode")}
	case TypeClientBye:
		return &ClientBye{}
	case TypeClientAcquire:
		permits := rapid.Uint32Range(1, MaxPermits).Draw(t, "permits")
		return &ClientAcquire{Lockspace: ls, Semaphore: res, Permits: permits, Count: rapid.Uint32Range(1, permits).Draw(t, "count"),
			Flags: rapid.Uint32Range(0, clientAcquireFlags).Draw(t, "flags") & clientAcquireFlags, Timeout: dur.Draw(t, "timeout"),
			TTL: dur.Draw(t, "ttl"), Owner: rapid.Uint64().Draw(t, "owner")}
	case TypeClientLost:
		return &ClientLost{Lock: lock, Code: genCode().Draw(t, "code"), Text: genText(MaxErr).Draw(t, "text")}
	}
	panic("genClientMessage: no generator for " + ty.String())
}

// The hand-made seeds of ClientAcquire and ClientResource fail the way
// they are meant to: bombs before anything is sized by them, rule breaks
// (a lock without a node, more permits than the semaphore's, the old
// three-field lock) as invalid or malformed.
func TestClientSemaphoreSeedsFail(t *testing.T) {
	for _, typ := range []Type{TypeClientAcquire, TypeClientResource} {
		for name, body := range typeSeeds(typ) {
			_, m, err := NewClientDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(typ), 0, body))
			if m != nil || err == nil {
				t.Errorf("%v seed %s decoded: %v", typ, name, m)
				continue
			}
			switch {
			case strings.HasPrefix(name, "bomb"):
				if !errors.Is(err, ErrDeclaredLength) {
					t.Errorf("%v seed %s: %v, want ErrDeclaredLength", typ, name, err)
				}
			case name == "old-three-field-lock":
			default:
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("%v seed %s: %v, want ErrInvalid", typ, name, err)
				}
			}
		}
	}
}

// The hand-made seeds of ClientHello and ClientAck fail the way they are
// meant to: a resume that names a request twice, out of order, 0, or more
// than MaxResumeWaiting is invalid; so are protocol versions this build
// does not speak, which the error names.
func TestClientResumeSeedsFail(t *testing.T) {
	want := map[string]error{
		"v2-duplicate-waiting": ErrInvalid, "v2-unsorted-waiting": ErrInvalid, "v2-zero-waiting": ErrInvalid,
		"v2-too-many-waiting": ErrInvalid, "v2-bomb-waiting": ErrDeclaredLength, "v2-new-session-waits": ErrInvalid,
		"v3-hello": ErrInvalid, "v1-version-field": ErrInvalid, "v2-eight-fields": ErrInvalid, "v2-pushes-new-session": ErrInvalid, "four-fields": ErrMalformed,
		"v2-waiting-not-uint": ErrMalformed, "v2-waiting-map": ErrMalformed, "v2-read-without-resume": ErrInvalid,
		"zero": ErrInvalid, "negative": ErrMalformed, "two": ErrMalformed,
	}
	for _, typ := range []Type{TypeClientHello, TypeClientAck} {
		for name, body := range typeSeeds(typ) {
			_, m, err := NewClientDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(typ), 0, body))
			if m != nil || !errors.Is(err, want[name]) {
				t.Errorf("%v seed %s: %v, %v; want %v", typ, name, m, err, want[name])
			}
		}
	}
	_, _, err := NewClientDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(TypeClientHello), 0, typeSeeds(TypeClientHello)["v3-hello"]))
	if err == nil || !strings.Contains(err.Error(), "speaks 1 (5 fields) and 2 (9 fields)") {
		t.Errorf("a protocol 3 hello: %v, want the protocols this end speaks", err)
	}
}
