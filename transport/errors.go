package transport

import "errors"

// Sentinel errors. Test for them with errors.Is: most are returned wrapped
// with the peer's name.
var (
	// ErrClosed: the Links was closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer: no peer of that name was set (or it was removed).
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrUnreachable: the peer is not connected and the last attempt to
	// connect failed. Nothing is queued while a peer is unreachable: the
	// caller decides whether to retry.
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrConnLost: the connection a call's request or reply travelled on
	// failed before the reply arrived. The request may or may not have been
	// processed.
	ErrConnLost = errors.New("transport: connection lost")
	// ErrPeerRemoved: the peer was removed while the call was pending.
	ErrPeerRemoved = errors.New("transport: peer removed")
	// ErrWriteBufferFull: the peer's write buffer went over
	// Config.WriteBufferLimit. The message was not queued and the link was
	// failed (pending calls fail, the connection is re-dialled), because a
	// peer that cannot keep up must not make the sender block or grow
	// without bound.
	ErrWriteBufferFull = errors.New("transport: write buffer full")
	// ErrHandshake: the connection's Hello exchange failed (another cluster,
	// another protocol version, an unexpected node name, no Hello).
	ErrHandshake = errors.New("transport: handshake refused")
	// ErrStaleReply: Reply was given a ReplyTo whose peer has restarted (its
	// boot ID changed), so no one is waiting for the reply.
	ErrStaleReply = errors.New("transport: reply to a previous boot of the peer")
	// ErrReserved: Ping and Hello belong to the links themselves and cannot
	// be sent through Send, Call, Go or Reply.
	ErrReserved = errors.New("transport: message type reserved for the links")
	// ErrWrongReply: the reply to a CallInto is of another type than the
	// message given to hold it. The request was processed.
	ErrWrongReply = errors.New("transport: reply of another type")
	// ErrNotRequest: Reply was given the ReplyTo of a one-way message.
	ErrNotRequest = errors.New("transport: message is not a request")
)
