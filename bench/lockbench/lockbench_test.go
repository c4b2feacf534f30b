package lockbench

import (
	"errors"
	"testing"
	"time"
)

func TestUnavailable(t *testing.T) {
	err := Unavailable("redis-server not found; run bench/install-peers.sh")
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) {
		t.Fatalf("errors.Is: %v", err)
	}
	if got := "skipped redis: " + err.Error(); got != "skipped redis: redis-server not found; run bench/install-peers.sh" {
		t.Fatalf("message %q", got)
	}
}

func TestModeString(t *testing.T) {
	if Exclusive.String() != "exclusive" || Shared.String() != "shared" || Mode(7).String() != "Mode(7)" {
		t.Fatal(Exclusive, Shared, Mode(7))
	}
}

func TestEnvValidate(t *testing.T) {
	if err := DefaultEnv().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Env){
		func(e *Env) { e.Logger = nil },
		func(e *Env) { e.LookPath = nil },
		func(e *Env) { e.ReadyTimeout = -time.Second },
	} {
		e := DefaultEnv()
		mut(&e)
		if e.Validate() == nil {
			t.Errorf("%+v validated", e)
		}
	}
}
