package lockapi

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

// Election is leader election on one lock, built on a Lockspace alone, so
// that embedded and connected candidates and observers meet in the same
// election. The resource "election/<name>" carries it:
//
//   - a candidate takes it EX, writes its fencing token (8 bytes, big
//     endian) and its value into the value block and converts down to PW:
//     still exclusive among candidates, but observers may read it in CR;
//   - an observer holds CR. A new candidate's EX (or the leader resigning,
//     which converts back up to EX) makes the master send the observer a
//     blocking notification; it then lets go and asks for CR again, behind
//     the candidate, and so reads the new leader as soon as there is one;
//   - the leader's token is its EX grant's fencing token: a store that
//     checks it refuses a deposed leader's late writes.
type Election struct {
	ls       Lockspace
	resource string
}

// Leader is an elected leader as observers see it.
type Leader struct {
	// Value is what the leader campaigned with (its address, say).
	Value []byte
	// Token is the fencing token of the leader's grant.
	Token uint64
	// Valid is false when the leader was lost without resigning and the
	// value may be out of date.
	Valid bool
}

// NewElection returns the election called name in ls.
func NewElection(ls Lockspace, name string) *Election {
	return &Election{ls: ls, resource: "election/" + name}
}

// Leadership is a won election: the lock that makes its holder the leader.
type Leadership struct {
	lk    Lock
	value []byte
}

// Campaign waits until this caller is the leader (or ctx ends), then
// publishes value for observers. A value that does not fit the value block
// after the token is ErrLimit.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Leadership, error) {
	lk, err := e.ls.Acquire(ctx, e.resource, modes.EX)
	if err != nil {
		return nil, err
	}
	blob := binary.BigEndian.AppendUint64(nil, lk.Token())
	blob = append(blob, value...)
	err = lk.SetValue(blob)
	if err == nil {
		err = lk.Convert(ctx, modes.PW)
	}
	if err != nil {
		_ = lk.Unlock()
		return nil, err
	}
	return &Leadership{lk: lk, value: slices.Clone(value)}, nil
}

// Token returns the leader's fencing token.
func (l *Leadership) Token() uint64 { return l.lk.Token() }

// Value returns what the leader campaigned with.
func (l *Leadership) Value() []byte { return slices.Clone(l.value) }

// Lost is closed if the leadership can no longer be trusted.
func (l *Leadership) Lost() <-chan struct{} { return l.lk.Lost() }

// Resign gives the leadership up and tells observers there is no leader
// (unless another candidate takes over at once).
func (l *Leadership) Resign(ctx context.Context) error {
	// Back up to EX, which makes observers in CR let go, then clear the
	// value on unlock.
	if err := l.lk.Convert(ctx, modes.EX); err != nil {
		_ = l.lk.Unlock()
		return err
	}
	_ = l.lk.SetValue(nil)
	return l.lk.Unlock()
}

// Leader returns the current leader, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	// NL first (expedited past any queue), then up to CR: a conversion is
	// granted in place next to the leader's PW, even while candidates wait.
	lk, err := e.ls.Acquire(ctx, e.resource, modes.NL, Expedite())
	if err != nil {
		return Leader{}, err
	}
	defer lk.Unlock()
	if err := lk.Convert(ctx, modes.CR); err != nil {
		return Leader{}, err
	}
	return decodeLeader(lk)
}

func decodeLeader(lk Lock) (Leader, error) {
	v, ok := lk.Value()
	if len(v) < 8 {
		return Leader{}, ErrNoLeader
	}
	return Leader{Value: v[8:], Token: binary.BigEndian.Uint64(v), Valid: ok}, nil
}

// Observe reports every change of leader (and the absence of one as a zero
// Leader) on the returned channel until ctx ends, then closes it. The
// channel holds the latest news only: a slow reader skips intermediate
// leaders, never the last.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan Leader) {
	defer close(out)
	poke := make(chan struct{}, 1)
	onBlock := OnBlocking(func(modes.Mode) {
		select {
		case poke <- struct{}{}:
		default:
		}
	})
	var last *Leader
	for {
		lk, err := e.ls.Acquire(ctx, e.resource, modes.CR, onBlock)
		if err != nil {
			return // ctx ended, or the lockspace closed
		}
		cur, err := decodeLeader(lk)
		if err != nil {
			cur = Leader{}
		}
		if last == nil || cur.Token != last.Token || cur.Valid != last.Valid {
			last = &cur
			publish(out, cur)
		}
		select {
		case <-poke:
			_ = lk.Unlock() // a candidate or a resigning leader wants in
		case <-ctx.Done():
			_ = lk.Unlock()
			return
		}
	}
}

// publish replaces whatever news out holds with l.
func publish(out chan Leader, l Leader) {
	for {
		select {
		case out <- l:
			return
		default:
			select {
			case <-out:
			default:
			}
		}
	}
}
