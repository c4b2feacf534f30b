package master

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// String renders a lock state on one line, as dumps and logs show it.
func (ls LockState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", ls.Lock)
	if ls.Owner != 0 {
		fmt.Fprintf(&b, " o%d", ls.Owner)
	}
	switch {
	case ls.Permits != 0 && ls.Queue == QueueWaiting:
		fmt.Fprintf(&b, " --->x%d", ls.Count)
	case ls.Permits != 0:
		fmt.Fprintf(&b, " x%d", ls.Count)
	case ls.Queue == QueueWaiting:
		fmt.Fprintf(&b, " --->%v", ls.Requested)
	case ls.Queue == QueueConverting:
		fmt.Fprintf(&b, " %v->%v", ls.Granted, ls.Requested)
	default:
		fmt.Fprintf(&b, " %v", ls.Granted)
	}
	if ls.Queue != QueueWaiting {
		fmt.Fprintf(&b, " tok=%d", ls.Token)
	}
	if ls.Deadline != 0 {
		fmt.Fprintf(&b, " deadline=%d", ls.Deadline)
	}
	if ls.Expires != 0 {
		fmt.Fprintf(&b, " expires=%d", ls.Expires)
	}
	if ls.Session != 0 {
		fmt.Fprintf(&b, " session=%d", ls.Session)
	}
	return b.String()
}

// String renders a value block compactly: its sequence, validity and data.
func (v LVB) String() string {
	valid := "valid"
	if !v.Valid {
		valid = "NOT-VALID"
	}
	return fmt.Sprintf("seq=%d %s %q", v.Seq, valid, v.Data)
}

// String renders an effect on one line.
func (e Effect) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %v %q", e.Lock, e.Kind, e.Resource)
	switch e.Kind {
	case EffectGranted:
		fmt.Fprintf(&b, " %v tok=%d", e.Mode, e.Token)
	case EffectBlocking:
		fmt.Fprintf(&b, " wants %v", e.Mode)
	}
	if e.Demoted {
		b.WriteString(" demoted")
	}
	if e.LVBRead {
		fmt.Fprintf(&b, " lvb(%v)", e.LVB)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " err=%v", e.Err)
	}
	return b.String()
}

// Dump renders the whole table, resources in name order, each with its value
// block and its three queues. It is the format of the golden tests and of
// lock dumps.
func (t *Table) Dump() string {
	names := slices.Collect(t.Resources())
	slices.SortFunc(names, cmp.Compare)
	var b strings.Builder
	if len(names) == 0 {
		b.WriteString("(empty)\n")
	}
	for _, name := range names {
		rs, _ := t.Resource(name)
		if r := t.res[name]; r.isSem() {
			fmt.Fprintf(&b, "%q semaphore(%d of %d permits granted)\n", name, r.semUsed(), r.semPermits())
		} else {
			fmt.Fprintf(&b, "%q lvb(%v)\n", name, rs.LVB)
		}
		t.dumpQueue(&b, rs, QueueGranted)
		t.dumpQueue(&b, rs, QueueConverting)
		t.dumpQueue(&b, rs, QueueWaiting)
	}
	t.dumpLeases(&b)
	return b.String()
}

// dumpLeases renders the sessions' leases, by node and session, each with
// the ids of its locks granted, in order.
func (t *Table) dumpLeases(b *strings.Builder) {
	for _, node := range slices.Sorted(maps.Keys(t.nodes)) {
		ns := t.nodes[node]
		for _, session := range slices.Sorted(maps.Keys(ns.leases)) {
			ls := ns.leases[session]
			ids := slices.Compact(slices.Sorted(slices.Values(ls.ids)))
			ids = slices.DeleteFunc(ids, func(id uint64) bool { return !ls.holds(ns.locks[id]) })
			fmt.Fprintf(b, "session n%d/%d ttl=%d expires=%d locks=%v", node, session, ls.tm.ttl, ls.tm.expires, ids)
			if ls.waiting > 0 {
				fmt.Fprintf(b, " waiting=%d", ls.waiting)
			}
			b.WriteString("\n")
		}
	}
}

func (t *Table) dumpQueue(b *strings.Builder, rs ResourceState, q Queue) {
	var items []string
	for _, ls := range rs.Locks {
		if ls.Queue == q {
			items = append(items, ls.String())
		}
	}
	if len(items) > 0 {
		fmt.Fprintf(b, "  %-10s %s\n", q.String()+":", strings.Join(items, " | "))
	}
}
