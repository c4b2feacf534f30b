package clientport

import (
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestResumeLastRequest: a Welcome's last_request is the highest id of a
// request the agent read in the session, not counting hellos, so that a
// client whose Welcome was lost (the connection broke right after its
// hello) still learns which of its earlier requests never arrived; and the
// next request must go above every id read, hellos included.
func TestResumeLastRequest(t *testing.T) {
	p := startPort(t, 1, nil)
	welcome := func(r *raw, id uint64, h *wire.ClientHello) *wire.ClientWelcome {
		t.Helper()
		r.sendID(id, h)
		w, ok := r.reply(id).(*wire.ClientWelcome)
		if !ok {
			t.Fatalf("hello %d: no welcome", id)
		}
		return w
	}
	r1 := p.dialRaw()
	w := welcome(r1, 1, &wire.ClientHello{Name: "test"})
	resume := &wire.ClientHello{Name: "test", Session: w.Session, Key: w.Key}
	r1.sendID(2, &wire.ClientKeepAlive{})
	if _, ok := r1.reply(2).(*wire.ClientAlive); !ok {
		t.Fatal("no answer to the keep-alive")
	}
	_ = r1.nc.Close()

	// A resume whose Welcome the client never reads, then another.
	r2 := p.dialRaw()
	if w2 := welcome(r2, 3, resume); !w2.Resumed || w2.LastRequest != 2 {
		t.Fatalf("first resume: resumed %v, last request %d, want 2", w2.Resumed, w2.LastRequest)
	}
	_ = r2.nc.Close()
	r3 := p.dialRaw()
	if w3 := welcome(r3, 4, resume); !w3.Resumed || w3.LastRequest != 2 {
		t.Fatalf("second resume: resumed %v, last request %d, want 2 (the hellos are not requests it read)", w3.Resumed, w3.LastRequest)
	}
	r3.sendID(5, &wire.ClientKeepAlive{})
	if _, ok := r3.reply(5).(*wire.ClientAlive); !ok {
		t.Fatal("no answer to a request above the hello's id")
	}
	// An id not above the last hello's is refused, though no request used it.
	r4 := p.dialRaw()
	welcome(r4, 6, resume)
	r4.sendID(6, &wire.ClientKeepAlive{})
	if e := r4.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeProtocol {
		t.Fatalf("request with the hello's id: closed with %v, want a protocol error", e)
	}
}
