package wire

import "fmt"

// The client protocol: what a program that runs no node speaks with an
// agent's client port (docs/protocol.md describes it byte by byte). Its
// frames are the links' frames (length, version, type, request id, msgpack
// body) with types of their own, numbered from 64; a client port decodes
// only these (NewClientDecoder) and a link only the others, so neither
// side can be made to handle the other's messages.
//
// Every message a client sends is a request (a non-zero id) answered by
// one reply with that id: ClientGrant, ClientOK, ClientAlive,
// ClientResource or ClientError (ClientAcquire, for permits of a
// semaphore, is answered as ClientLock is). ClientBye, answered by ClientOK, ends the
// session. The agent's one-way messages (id 0) are
// ClientBlocking, ClientLost, and a ClientError that explains why it is
// about to close the connection.

// Client message types. Values are part of the protocol: never renumber
// one, only append.
const (
	TypeClientHello     Type = 64 // first request of a connection
	TypeClientWelcome   Type = 65 // reply to ClientHello
	TypeClientKeepAlive Type = 66
	TypeClientAlive     Type = 67 // reply to ClientKeepAlive
	TypeClientLock      Type = 68
	TypeClientConvert   Type = 69
	TypeClientUnlock    Type = 70
	TypeClientCancel    Type = 71
	TypeClientGrant     Type = 72 // reply to ClientLock, ClientConvert, ClientValue
	TypeClientValue     Type = 73
	TypeClientSetValue  Type = 74
	TypeClientDescribe  Type = 75
	TypeClientResource  Type = 76 // reply to ClientDescribe
	TypeClientOK        Type = 77 // reply to ClientUnlock, ClientCancel, ClientSetValue
	TypeClientError     Type = 78 // a request refused, or (one-way) why the connection ends
	TypeClientBlocking  Type = 79 // one-way: a lock blocks another request
	TypeClientLost      Type = 80 // one-way: a lock can no longer be trusted
	TypeClientBye       Type = 81 // ends the session, releasing its locks
	TypeClientAcquire   Type = 82 // permits of a semaphore, answered as a ClientLock
	TypeClientAck       Type = 83 // protocol 2: the client read up to a reply; answered by ClientOK

	// clientTypeEnd is one past the last client type.
	clientTypeEnd Type = 84
)

// newClientMessage is newMessage for the client protocol's types.
func newClientMessage(t Type) Message {
	switch t {
	case TypeClientHello:
		return new(ClientHello)
	case TypeClientWelcome:
		return new(ClientWelcome)
	case TypeClientKeepAlive:
		return new(ClientKeepAlive)
	case TypeClientAlive:
		return new(ClientAlive)
	case TypeClientLock:
		return new(ClientLock)
	case TypeClientConvert:
		return new(ClientConvert)
	case TypeClientUnlock:
		return new(ClientUnlock)
	case TypeClientCancel:
		return new(ClientCancel)
	case TypeClientGrant:
		return new(ClientGrant)
	case TypeClientValue:
		return new(ClientValue)
	case TypeClientSetValue:
		return new(ClientSetValue)
	case TypeClientDescribe:
		return new(ClientDescribe)
	case TypeClientResource:
		return new(ClientResource)
	case TypeClientOK:
		return new(ClientOK)
	case TypeClientError:
		return new(ClientError)
	case TypeClientBlocking:
		return new(ClientBlocking)
	case TypeClientLost:
		return new(ClientLost)
	case TypeClientBye:
		return new(ClientBye)
	case TypeClientAcquire:
		return new(ClientAcquire)
	case TypeClientAck:
		return new(ClientAck)
	}
	return nil
}

// Client reports whether t is a message of the client protocol.
func (t Type) Client() bool { return t >= TypeClientHello && t < clientTypeEnd }

// NewClientDecoder returns a decoder for a client connection (either end):
// it decodes the client protocol's messages only, refusing the links' as
// ErrUnknownType.
func NewClientDecoder(l Limits) *Decoder {
	d := NewDecoder(l)
	d.kinds = kindClient
	return d
}

// kinds is a set of protocols, by the types a Decoder accepts.
type kinds uint8

const (
	kindLink   kinds = 1 << 0
	kindClient kinds = 1 << 1
)

// first is the lowest type of the protocols in k; span how many types
// from it a table indexed by type needs.
func (k kinds) first() Type {
	if k&kindLink != 0 {
		return 0
	}
	return TypeClientHello
}

func (k kinds) span() int {
	if k&kindClient != 0 {
		return int(clientTypeEnd - k.first())
	}
	return int(typeEnd)
}

func (t Type) kind() kinds {
	if t.Client() {
		return kindClient
	}
	return kindLink
}

// Client request flags (ClientLock.Flags, ClientConvert.Flags,
// ClientAcquire.Flags).
const (
	ClientTry      uint32 = 1 << 0 // grant now or fail with CodeNotQueued
	ClientExpedite uint32 = 1 << 1 // ClientLock of NL only: ahead of any queue
	ClientNotify   uint32 = 1 << 2 // ClientLock: send ClientBlocking for this lock
	ClientQueue    uint32 = 1 << 3 // ClientConvert: QUECVT, wait behind queued conversions
	ClientDemote   uint32 = 1 << 4 // ClientConvert: CONVDEADLK, demote to NL on deadlock
	ClientCached   uint32 = 1 << 5 // ClientLock in PR: a hold on the agent's shared-lock cache
	// ClientFailFast (ClientLock, ClientAcquire): refused at once with
	// CodeNoQuorum while the agent has no quorum, instead of waiting for
	// it; (ClientConvert) refused at once when the lock's master refuses
	// the conversion for want of quorum, instead of asking again.
	ClientFailFast     uint32 = 1 << 6
	clientLockFlags           = ClientTry | ClientExpedite | ClientNotify | ClientCached | ClientFailFast
	clientConvFlags           = ClientTry | ClientQueue | ClientDemote | ClientFailFast
	clientAcquireFlags        = ClientTry | ClientFailFast
)

// ClientCode says why a client request failed or a lock was lost
// (ClientError, ClientLost). 0 is not a code.
type ClientCode uint8

// Client codes; each is one of the dlm sentinel errors (lockapi) except
// unauthorized, protocol and session ended, which are the client port's
// own.
const (
	CodeOther           ClientCode = 1  // anything else; the text says what
	CodeNotQueued       ClientCode = 2  // a try could not be granted at once
	CodeDeadlock        ClientCode = 3  // chosen to break a deadlock
	CodeLockLost        ClientCode = 4  // the lock can no longer be trusted
	CodeNoQuorum        ClientCode = 5  // the agent cannot reach a majority
	CodeClosed          ClientCode = 6  // the agent, the session or the lock was closed
	CodeNotHeld         ClientCode = 7  // no such lock held in this session
	CodeBusy            ClientCode = 8  // another operation on the lock is in progress
	CodeInvalidMode     ClientCode = 9  // mode outside NL..EX
	CodeInvalidName     ClientCode = 10 // empty or over-long lockspace or resource
	CodeInvalidArgument ClientCode = 11 // an option or argument that makes no sense
	CodeLimit           ClientCode = 12 // a limit of the agent or the lockspace
	CodeUnavailable     ClientCode = 13 // the resource's master cannot be reached
	CodeTimeout         ClientCode = 14 // the request's timeout passed
	CodeCancelled       ClientCode = 15 // withdrawn by ClientCancel
	CodeUnauthorized    ClientCode = 16 // ClientHello without the right token
	CodeProtocol        ClientCode = 17 // a frame the agent could not accept
	CodeSessionEnded    ClientCode = 18 // the session expired or was closed
	CodeWrongKind       ClientCode = 19 // locks on a semaphore, or permits on a locked name
	CodePermitsMismatch ClientCode = 20 // permits asked with another count than the semaphore's
	// CodeUnknownRequest answers a request id a resuming ClientHello names
	// that the agent has no answer of: it read it, but never had it, or
	// forgot its answer once acknowledged (ClientAck).
	CodeUnknownRequest ClientCode = 21

	codeEnd ClientCode = 22
)

// Valid reports whether c is one of the codes above.
func (c ClientCode) Valid() bool { return c >= CodeOther && c < codeEnd }

func checkCode(c ClientCode) error {
	if !c.Valid() {
		return fmt.Errorf("%w: unknown client code %d", ErrInvalid, uint8(c))
	}
	return nil
}

// MaxToken is the longest shared token a ClientHello may carry, in bytes.
const MaxToken = 256

// MaxDescribed is the most locks a ClientResource lists.
const MaxDescribed = 1024
