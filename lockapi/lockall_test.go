package lockapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// logSpace records what LockAll asks of it, and refuses resource fail.
type logSpace struct {
	fail string
	log  []string
}

func (s *logSpace) Name() string { return "log" }

func (s *logSpace) Acquire(_ context.Context, resource string, mode modes.Mode, _ ...Option) (Lock, error) {
	if resource == s.fail {
		s.log = append(s.log, "refused "+resource)
		return nil, ErrNotQueued
	}
	s.log = append(s.log, "lock "+resource)
	return &logLock{s: s, resource: resource, mode: mode}, nil
}

type logLock struct {
	Lock
	s        *logSpace
	resource string
	mode     modes.Mode
}

func (l *logLock) Resource() string { return l.resource }

func (l *logLock) Unlock() error {
	l.s.log = append(l.s.log, "unlock "+l.resource)
	return nil
}

// TestLockAllOrder: LockAll takes locks by name whatever the order asked,
// returns them in the order asked, and on a failure releases what it
// took in reverse order; bad requests are refused before anything is
// locked.
func TestLockAllOrder(t *testing.T) {
	s := &logSpace{}
	locks, err := LockAll(context.Background(), s, []Request{{Resource: "c", Mode: modes.EX}, {Resource: "a", Mode: modes.PR}, {Resource: "b", Mode: modes.EX}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lock a", "lock b", "lock c"}; !slices.Equal(s.log, want) {
		t.Fatalf("took %v, want %v", s.log, want)
	}
	if locks[0].Resource() != "c" || locks[1].Resource() != "a" || locks[2].Resource() != "b" {
		t.Fatalf("locks out of the order asked: %v", locks)
	}

	s = &logSpace{fail: "c"}
	_, err = LockAll(context.Background(), s, []Request{{Resource: "d", Mode: modes.EX}, {Resource: "c", Mode: modes.EX}, {Resource: "a", Mode: modes.EX}, {Resource: "b", Mode: modes.EX}})
	if !errors.Is(err, ErrNotQueued) || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("a failure in the middle: %v", err)
	}
	if want := []string{"lock a", "lock b", "refused c", "unlock b", "unlock a"}; !slices.Equal(s.log, want) {
		t.Fatalf("log %v, want %v", s.log, want)
	}

	for name, reqs := range map[string][]Request{
		"twice":   {{Resource: "a", Mode: modes.EX}, {Resource: "b", Mode: modes.EX}, {Resource: "a", Mode: modes.NL}},
		"mode":    {{Resource: "a", Mode: modes.EX}, {Resource: "b", Mode: modes.Mode(6)}},
		"no name": {{Resource: "a", Mode: modes.EX}, {Resource: "", Mode: modes.EX}},
	} {
		s := &logSpace{}
		_, err := LockAll(context.Background(), s, reqs)
		if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrInvalidMode) && !errors.Is(err, ErrInvalidName) {
			t.Errorf("%s: %v", name, err)
		}
		if len(s.log) != 0 {
			t.Errorf("%s: locked %v before refusing", name, s.log)
		}
	}
}
