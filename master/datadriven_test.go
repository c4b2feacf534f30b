package master

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestDataDriven replays the scripts in testdata/rules. Each command prints what
// it returned, the effects it caused, and the whole table afterwards. Run
// with -rewrite to regenerate the expected output after a deliberate change,
// then read the diff.
//
// The language, one command per line with key=value arguments:
//
//	new [max-lvb=N] [max-name=N] [max-locks=N] [max-waiters=N]
//	request res=NAME lock=N/ID [owner=O] mode=M [flags=a,b] [timeout=T] [ttl=T]
//	        [session=S] [permits=P count=C]    (C permits of a semaphore of P)
//	convert lock=N/ID [owner=O] mode=M [flags=a,b] [timeout=T] [lvb=write:TEXT|invalidate]
//	release lock=N/ID [owner=O] [lvb=write:TEXT|invalidate]
//	cancel  lock=N/ID [owner=O]
//	renew   lock=N/ID
//	renew-session node=N session=S
//	tick now=T
//	purge node=N
//	restore res=NAME lock=N/ID [owner=O] queue=granted|converting|waiting
//	        [granted=M] requested=M [token=K] [ttl=T] [session=S] [lvb=SEQ:TEXT [lvb-invalid]]
//	        [permits=P count=C]    (requested defaults to NL with permits)
//	restore-value res=NAME seq=SEQ data=TEXT [invalid]
//	finish-recovery
//	floor value=K
//	edges [by=T]                (edges of requests queued at or before tick T)
//	observe                     (remember the edges there are now)
//	confirm                     (which remembered edges still hold: EdgeHolds)
//	fail-request lock=N/ID gen=G
//	dump
//
// Flags: noqueue, expedite, quecvt, convdeadlk. Modes: NL CR CW PR PW EX.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/rules", func(t *testing.T, path string) {
		var tbl *Table
		var observed []WaitEdge
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := parseArgs(t, d)
			switch d.Cmd {
			case "new":
				tbl = New(a.config())
				return "ok"
			case "observe":
				observed = slices.Collect(tbl.WaitEdges())
				return edgesText(observed)
			case "confirm":
				var lines []string
				for _, e := range observed {
					lines = append(lines, fmt.Sprintf("%v: %s", tbl.EdgeHolds(e), edgeText(e)))
				}
				slicesSort(lines)
				return strings.Join(lines, "\n") + "\n"
			}
			if tbl == nil {
				t.Fatalf("%s: no table; start with 'new'", d.Pos)
			}
			out := runCommand(t, tbl, d.Cmd, a)
			if d.Cmd == "dump" || d.Cmd == "edges" {
				return out
			}
			return out + effectsText(tbl) + "table:\n" + tbl.Dump()
		})
	})
}

type args map[string]string

func parseArgs(t *testing.T, d *datadriven.TestData) args {
	a := args{}
	for _, arg := range d.CmdArgs {
		a[arg.Key] = strings.Join(arg.Vals, ",")
	}
	return a
}

func (a args) str(t *testing.T, k string) string {
	v, ok := a[k]
	if !ok {
		t.Fatalf("missing argument %s", k)
	}
	return v
}

func (a args) num(t *testing.T, k string) uint64 {
	v, ok := a[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", k, v, err)
	}
	return n
}

func (a args) mode(t *testing.T, k string) modes.Mode {
	v := a.str(t, k)
	if n, err := strconv.Atoi(v); err == nil {
		return modes.Mode(n) // lets scripts try invalid modes
	}
	m, err := modes.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (a args) lock(t *testing.T) LockID {
	v := strings.TrimPrefix(a.str(t, "lock"), "n")
	n, id, ok := strings.Cut(v, "/")
	if !ok {
		t.Fatalf("lock=%q: want NODE/ID", v)
	}
	node, err1 := strconv.ParseUint(n, 10, 32)
	i, err2 := strconv.ParseUint(id, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("lock=%q: want NODE/ID", v)
	}
	return LockID{Node: NodeID(node), ID: i}
}

func (a args) flags(t *testing.T) Flags {
	var f Flags
	for name := range strings.SplitSeq(a["flags"], ",") {
		switch name {
		case "":
		case "noqueue":
			f |= NoQueue
		case "expedite":
			f |= Expedite
		case "quecvt":
			f |= QueueConvert
		case "convdeadlk":
			f |= ConvDeadlock
		default:
			t.Fatalf("unknown flag %q", name)
		}
	}
	return f
}

func (a args) lvb(t *testing.T) (LVBOp, []byte) {
	v, ok := a["lvb"]
	switch {
	case !ok:
		return LVBKeep, nil
	case v == "invalidate":
		return LVBInvalidate, nil
	case strings.HasPrefix(v, "write:"):
		return LVBWrite, []byte(strings.TrimPrefix(v, "write:"))
	}
	t.Fatalf("lvb=%q: want write:TEXT or invalidate", v)
	return 0, nil
}

func (a args) config() Config {
	c := DefaultConfig()
	for k, p := range map[string]*int{
		"max-lvb": &c.MaxLVB, "max-name": &c.MaxNameLen,
		"max-locks": &c.MaxLocksPerNode, "max-waiters": &c.MaxWaitersPerResource,
	} {
		if v, ok := a[k]; ok {
			n, _ := strconv.Atoi(v)
			*p = n
		}
	}
	return c
}

func runCommand(t *testing.T, tbl *Table, cmd string, a args) string {
	switch cmd {
	case "request":
		res, err := tbl.Request(Request{
			Resource: a["res"], Lock: a.lock(t), Owner: OwnerID(a.num(t, "owner")),
			Mode: a.mode(t, "mode"), Flags: a.flags(t),
			Timeout: Tick(a.num(t, "timeout")), TTL: Tick(a.num(t, "ttl")), Session: a.num(t, "session"),
			Permits: uint32(a.num(t, "permits")), Count: uint32(a.num(t, "count")),
		})
		return resultText(res, err)
	case "convert":
		op, data := a.lvb(t)
		res, err := tbl.Convert(Convert{
			Lock: a.lock(t), Owner: OwnerID(a.num(t, "owner")), Mode: a.mode(t, "mode"),
			Flags: a.flags(t), Timeout: Tick(a.num(t, "timeout")), LVBOp: op, LVB: data,
		})
		return resultText(res, err)
	case "release":
		op, data := a.lvb(t)
		return errText(tbl.Release(Release{Lock: a.lock(t), Owner: OwnerID(a.num(t, "owner")), LVBOp: op, LVB: data}))
	case "cancel":
		return errText(tbl.Cancel(a.lock(t), OwnerID(a.num(t, "owner"))))
	case "renew":
		return errText(tbl.Renew(a.lock(t)))
	case "renew-session":
		return fmt.Sprintf("renewed=%v\n", tbl.RenewSession(NodeID(a.num(t, "node")), a.num(t, "session")))
	case "tick":
		tbl.Tick(Tick(a.num(t, "now")))
		return fmt.Sprintf("now=%d\n", tbl.Now())
	case "purge":
		return fmt.Sprintf("purged %d\n", tbl.PurgeNode(NodeID(a.num(t, "node"))))
	case "restore":
		return errText(tbl.Restore(a.lockState(t)))
	case "restore-value":
		_, invalid := a["invalid"]
		return errText(tbl.RestoreValue(a.str(t, "res"), LVB{Data: []byte(a["data"]), Seq: a.num(t, "seq"), Valid: !invalid}))
	case "drop":
		return fmt.Sprintf("dropped %d\n", tbl.Drop(a.str(t, "res")))
	case "finish-recovery":
		tbl.FinishRecovery()
		return "ok\n"
	case "floor":
		tbl.RaiseTokenFloor(a.num(t, "value"))
		return fmt.Sprintf("floor=%d\n", tbl.TokenFloor())
	case "edges":
		if _, ok := a["by"]; ok {
			return edgesText(slices.Collect(tbl.WaitEdgesQueuedBy(Tick(a.num(t, "by")))))
		}
		return edgesText(slices.Collect(tbl.WaitEdges()))
	case "fail-request":
		return errText(tbl.FailRequest(a.lock(t), a.num(t, "gen"), fmt.Errorf("%w: chosen as the victim of a cycle", ErrDeadlock)))
	case "dump":
		return tbl.Dump()
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func (a args) lockState(t *testing.T) LockState {
	ls := LockState{
		Resource: a["res"], Lock: a.lock(t), Owner: OwnerID(a.num(t, "owner")),
		Token: a.num(t, "token"), TTL: Tick(a.num(t, "ttl")), Session: a.num(t, "session"),
		Permits: uint32(a.num(t, "permits")), Count: uint32(a.num(t, "count")),
	}
	if _, ok := a["requested"]; ok || ls.Permits == 0 {
		ls.Requested = a.mode(t, "requested")
	}
	ls.Granted = ls.Requested
	if _, ok := a["granted"]; ok {
		ls.Granted = a.mode(t, "granted")
	}
	switch a.str(t, "queue") {
	case "granted":
		ls.Queue = QueueGranted
	case "converting":
		ls.Queue = QueueConverting
	case "waiting":
		ls.Queue = QueueWaiting
	default:
		t.Fatalf("queue=%q", a["queue"])
	}
	if v, ok := a["lvb"]; ok {
		seq, data, _ := strings.Cut(v, ":")
		n, _ := strconv.ParseUint(seq, 10, 64)
		_, invalid := a["lvb-invalid"]
		ls.LVB = &LVB{Data: []byte(data), Seq: n, Valid: !invalid}
	}
	return ls
}

func resultText(res Result, err error) string {
	if err != nil {
		s := errText(err)
		if res.Demoted {
			s = "demoted to NL; " + s
		}
		return s
	}
	s := fmt.Sprintf("%v %v tok=%d", res.Status, res.Mode, res.Token)
	if res.Demoted {
		s += " demoted"
	}
	if res.LVBRead {
		s += fmt.Sprintf(" lvb(%v)", res.LVB)
	}
	return s + "\n"
}

func errText(err error) string {
	if err == nil {
		return "ok\n"
	}
	return "error: " + err.Error() + "\n"
}

func effectsText(tbl *Table) string {
	var b strings.Builder
	for _, e := range tbl.Effects() {
		fmt.Fprintf(&b, "effect: %v\n", e)
	}
	return b.String()
}

// edgesText renders edges sorted, one per line, with their identities: the
// waiter's request generation and the tick it was queued at, and the
// blocker's token (holder) or request generation (ahead).
func edgesText(edges []WaitEdge) string {
	var lines []string
	for _, e := range edges {
		lines = append(lines, edgeText(e))
	}
	if len(lines) == 0 {
		return "(none)\n"
	}
	slicesSort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func edgeText(e WaitEdge) string {
	stamp := fmt.Sprintf("tok=%d", e.Stamp)
	if e.Kind == BlockAhead {
		stamp = fmt.Sprintf("gen=%d", e.Stamp)
	}
	return fmt.Sprintf("%s: %v(o%d) wants %v [gen=%d since=%d], waits for %v(o%d) %v %s",
		e.Resource, e.Waiter.Lock, e.Waiter.Owner, e.Mode, e.WaiterGen, e.Since, e.Blocker.Lock, e.Blocker.Owner, e.Kind, stamp)
}
