package clientport

import (
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

func TestRenewDue(t *testing.T) {
	now := time.Unix(1000, 0)
	const ttl = 9 * time.Second
	for _, c := range []struct {
		left time.Duration
		want bool
	}{
		{ttl, false},                    // just renewed
		{6 * time.Second, false},        // two thirds left: not yet
		{6*time.Second - 1, true},       // less than two thirds
		{time.Second, true},             // nearly out
		{-time.Second, true},            // out (the session is ending)
		{-time.Duration(1 << 62), true}, // no lease
	} {
		if got := renewDue(now, now.Add(c.left), ttl); got != c.want {
			t.Errorf("renewDue with %v of %v left: %v, want %v", c.left, ttl, got, c.want)
		}
	}
}

// TestKeepAliveSkipsRenewalWhileFresh: keep-alives right after a session
// opened restart no TTL at the masters (its lease there stays as it was),
// and each answers with the lease left.
func TestKeepAliveSkipsRenewalWhileFresh(t *testing.T) {
	p := startPort(t, 3, nil)
	r, w := p.hello2()
	p.srv.mu.Lock()
	ss := p.srv.sessions[w.Session]
	p.srv.mu.Unlock()
	if ss == nil {
		t.Fatal("no session")
	}
	ends := ss.ds.LeaseEnds()
	for k := range 5 {
		sent := time.Now()
		a, ok := r.reply(r.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive)
		if !ok {
			t.Fatalf("keep-alive %d: no ClientAlive", k)
		}
		if lease := time.Duration(a.Lease); lease <= 0 || lease > ends.Sub(sent) {
			t.Errorf("keep-alive %d: lease %v, want at most the %v left", k, lease, ends.Sub(sent))
		}
	}
	if got := ss.ds.LeaseEnds(); !got.Equal(ends) {
		t.Errorf("keep-alives of a fresh session renewed it: its lease ends %v later", got.Sub(ends))
	}
}
