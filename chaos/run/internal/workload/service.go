// Package workload is what a chaos run's clients do while the nemeses
// strike, and what they record: a fenced register under EX, a VMS-mode mix
// with conversions, a counter in a lock value block, an election, and
// probes that measure availability. Every operation goes into the run's
// check.History with the node it went through.
package workload

import (
	"context"
	"errors"

	dlmclient "github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// Lockspace is the lock service as a client sees it: a lockspace of an
// embedded member or of an agent reached through the client protocol.
type Lockspace interface {
	Acquire(ctx context.Context, resource string, mode modes.Mode) (Lock, error)
	// Campaign and Leader are the election on the lock election/NAME.
	Campaign(ctx context.Context, name string, value []byte) (Leadership, error)
	Leader(ctx context.Context, name string) (Leader, error)
}

// Lock is a granted lock.
type Lock interface {
	Mode() modes.Mode
	Token() uint64
	Convert(ctx context.Context, mode modes.Mode) error
	Unlock() error
	Value() ([]byte, bool)
	SetValue(v []byte) error
	Lost() <-chan struct{}
}

// Leadership is a won election.
type Leadership interface {
	Token() uint64
	Lost() <-chan struct{}
	Resign(ctx context.Context) error
}

// Leader is a reader's view of an election.
type Leader struct {
	Token uint64
	Valid bool
}

// ErrNoLeader: nobody holds the election.
var ErrNoLeader = errors.New("workload: no leader")

// Embedded adapts a lockspace of a dlm node in this process.
func Embedded(ls *dlm.Lockspace) Lockspace { return embedded{ls} }

type embedded struct{ ls *dlm.Lockspace }

func (e embedded) Acquire(ctx context.Context, resource string, mode modes.Mode) (Lock, error) {
	lk, err := e.ls.Lock(ctx, resource, mode)
	if err != nil {
		return nil, err
	}
	return embeddedLock{lk}, nil
}

func (e embedded) Campaign(ctx context.Context, name string, value []byte) (Leadership, error) {
	l, err := e.ls.Election(name).Campaign(ctx, value)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (e embedded) Leader(ctx context.Context, name string) (Leader, error) {
	l, err := e.ls.Election(name).Leader(ctx)
	if errors.Is(err, dlm.ErrNoLeader) {
		return Leader{}, ErrNoLeader
	}
	return Leader{Token: l.Token, Valid: l.Valid}, err
}

type embeddedLock struct{ *dlm.Lock }

func (l embeddedLock) Convert(ctx context.Context, mode modes.Mode) error {
	return l.Lock.Convert(ctx, mode)
}

// Client adapts a lockspace reached through an agent's client port
// (package client): its locks live in the client's session at the agent,
// and are lost (Lost closes) when the client can no longer trust them.
func Client(ls *dlmclient.Lockspace) Lockspace { return remote{ls} }

// remote is a lockspace behind lockapi's interface.
type remote struct{ ls lockapi.Lockspace }

func (r remote) Acquire(ctx context.Context, resource string, mode modes.Mode) (Lock, error) {
	lk, err := r.ls.Acquire(ctx, resource, mode)
	if err != nil {
		return nil, err
	}
	return remoteLock{lk}, nil
}

func (r remote) Campaign(ctx context.Context, name string, value []byte) (Leadership, error) {
	l, err := lockapi.NewElection(r.ls, name).Campaign(ctx, value)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (r remote) Leader(ctx context.Context, name string) (Leader, error) {
	l, err := lockapi.NewElection(r.ls, name).Leader(ctx)
	if errors.Is(err, lockapi.ErrNoLeader) {
		return Leader{}, ErrNoLeader
	}
	return Leader{Token: l.Token, Valid: l.Valid}, err
}

type remoteLock struct{ lockapi.Lock }

func (l remoteLock) Convert(ctx context.Context, mode modes.Mode) error {
	return l.Lock.Convert(ctx, mode)
}
