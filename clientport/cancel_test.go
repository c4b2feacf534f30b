package clientport

import (
	"fmt"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A grant that reaches the agent after it read the client's ClientCancel
// for the request is not handed to the client, which gave up on it: the
// agent gives it back at once and answers the request cancelled. The
// grant is made to lose the race: the master is another node; the unlock
// that grants the request and the cancel arrive in one write, so the
// agent reads the cancel right behind the unlock, a round trip to the
// master before the grant can come back; and both go to the master in
// that order on the one link, so the cancel finds the request granted.
func TestGrantAfterCancelGivenBackByAgent(t *testing.T) {
	p := startPort(t, 2, nil)
	ls, err := p.nodes[0].Lockspace("ls")
	if err != nil {
		t.Fatal(err)
	}
	res := ""
	for i := 0; res == ""; i++ {
		if name := fmt.Sprintf("r%d", i); ls.MasterOf(name) == p.nodes[1].Name() {
			res = name
		}
	}
	r := p.hello("")
	held, ok := r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: res, Mode: modes.EX})).(*wire.ClientGrant)
	if !ok {
		t.Fatal("no grant")
	}
	waiting := r.send(&wire.ClientLock{Lockspace: "ls", Resource: res, Mode: modes.EX})
	var frames []byte
	for _, m := range []wire.Message{&wire.ClientUnlock{Lock: held.Lock}, &wire.ClientCancel{Request: waiting}} {
		r.next++
		if frames, err = wire.AppendFrame(frames, wire.Header{ID: r.next}, m, &r.l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	if m := r.reply(waiting); codeOfReply(t, m) != wire.CodeCancelled {
		t.Fatalf("cancelled request answered %+v, want code %d (cancelled)", m, wire.CodeCancelled)
	}
	// Given back: the resource is free, and the session holds nothing.
	try := r.send(&wire.ClientLock{Lockspace: "ls", Resource: res, Mode: modes.EX, Flags: wire.ClientTry})
	if m := r.reply(try); codeOfReply(t, m) != 0 {
		t.Fatalf("try-lock after the cancel: %+v, want a grant (the cancelled grant given back)", m)
	}
}
