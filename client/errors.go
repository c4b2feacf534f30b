package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Errors of the client itself; the lock errors are lockapi's.
var (
	// ErrUnauthorized: the agent refused the client's token or certificate.
	ErrUnauthorized = errors.New("client: refused by the agent")
	// ErrProtocol: the agent and the client do not understand each other
	// (a frame one of them refused).
	ErrProtocol = errors.New("client: protocol error")
	// ErrSessionEnded: the session ended (expired, or closed); its locks
	// are lost.
	ErrSessionEnded = errors.New("client: session ended")
)

// sentinelOf maps a client code to the error it stands for.
func sentinelOf(c wire.ClientCode) error {
	switch c {
	case wire.CodeNotQueued:
		return lockapi.ErrNotQueued
	case wire.CodeDeadlock:
		return lockapi.ErrDeadlock
	case wire.CodeLockLost:
		return lockapi.ErrLockLost
	case wire.CodeNoQuorum:
		return lockapi.ErrNoQuorum
	case wire.CodeClosed:
		return lockapi.ErrClosed
	case wire.CodeNotHeld:
		return lockapi.ErrNotHeld
	case wire.CodeBusy:
		return lockapi.ErrBusy
	case wire.CodeInvalidMode:
		return lockapi.ErrInvalidMode
	case wire.CodeInvalidName:
		return lockapi.ErrInvalidName
	case wire.CodeInvalidArgument:
		return lockapi.ErrInvalidArgument
	case wire.CodeLimit:
		return lockapi.ErrLimit
	case wire.CodeUnavailable:
		return lockapi.ErrUnavailable
	case wire.CodeTimeout:
		return lockapi.ErrTimeout
	case wire.CodeCancelled:
		return lockapi.ErrCancelled
	case wire.CodeUnauthorized:
		return ErrUnauthorized
	case wire.CodeProtocol:
		return ErrProtocol
	case wire.CodeSessionEnded:
		return ErrSessionEnded
	case wire.CodeWrongKind:
		return lockapi.ErrWrongKind
	case wire.CodePermitsMismatch:
		return lockapi.ErrPermitsMismatch
	}
	return nil
}

// agentError rebuilds the error an agent sent: its sentinel, with the
// agent's text. An expired session's locks are lost too.
func agentError(c wire.ClientCode, text string) error {
	s := sentinelOf(c)
	switch {
	case s == nil:
		return fmt.Errorf("client: agent: %s", text)
	case c == wire.CodeSessionEnded:
		return fmt.Errorf("%w: %w (agent: %s)", s, lockapi.ErrLockLost, text)
	case text == "" || text == s.Error():
		return s
	case strings.HasPrefix(text, s.Error()):
		return fmt.Errorf("%w%s", s, text[len(s.Error()):])
	}
	return fmt.Errorf("%w (agent: %s)", s, text)
}

// ctxError turns a context's error into the lock error, matching both.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", lockapi.ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", lockapi.ErrCancelled, err)
}
