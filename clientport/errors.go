package clientport

import (
	"errors"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// codes maps the dlm sentinels to the client protocol's codes; the first
// match wins, so the more specific come first (ErrSessionEnded wraps
// ErrLockLost when a session expired).
var codes = []struct {
	err  error
	code wire.ClientCode
}{
	{dlm.ErrSessionEnded, wire.CodeSessionEnded},
	{dlm.ErrWrongKind, wire.CodeWrongKind},
	{dlm.ErrPermitsMismatch, wire.CodePermitsMismatch},
	{dlm.ErrNotQueued, wire.CodeNotQueued},
	{dlm.ErrDeadlock, wire.CodeDeadlock},
	{dlm.ErrLockLost, wire.CodeLockLost},
	// A request that timed out waiting for quorum matches both; it timed out.
	{dlm.ErrTimeout, wire.CodeTimeout},
	{dlm.ErrCancelled, wire.CodeCancelled},
	{dlm.ErrNoQuorum, wire.CodeNoQuorum},
	{dlm.ErrClosed, wire.CodeClosed},
	{dlm.ErrNotHeld, wire.CodeNotHeld},
	{dlm.ErrBusy, wire.CodeBusy},
	{dlm.ErrInvalidMode, wire.CodeInvalidMode},
	{dlm.ErrInvalidName, wire.CodeInvalidName},
	{dlm.ErrInvalidArgument, wire.CodeInvalidArgument},
	{dlm.ErrReentrantMode, wire.CodeInvalidArgument},
	{dlm.ErrLimit, wire.CodeLimit},
	{dlm.ErrUnavailable, wire.CodeUnavailable},
	{errProtocolMismatch, wire.CodeProtocol},
}

// codeOf returns the code a client is told for err.
func codeOf(err error) wire.ClientCode {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return wire.CodeOther
}

// errorMsg is the ClientError for err, its text cut to what the protocol
// carries.
func errorMsg(err error) *wire.ClientError {
	return &wire.ClientError{Code: codeOf(err), Text: truncate(err.Error())}
}

func truncate(s string) string {
	if len(s) > wire.MaxErr {
		return s[:wire.MaxErr]
	}
	return s
}
