package dlm

import (
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A semaphore is rebuilt in recovery as any resource is (recovery.go):
// every node reports the permits it holds or waits for to the semaphore's
// master in the new view, in PermitReports, with the semaphore's permit
// count; the new master restores them (master.Table.Restore), in the old
// master's queue order where it is known, and grants what the restored
// permits allow. Permits of a node that left the view are not reported:
// they come back when the rebuild happens, after the lock-delay.

// reportedPermit is the PermitReport entry of a semaphore lock, from the
// report reportLocked made of it.
func (lk *Lock) reportedPermit(rl wire.ReportedLock) wire.ReportedPermit {
	return wire.ReportedPermit{
		Resource: rl.Resource, Lock: rl.Lock, Owner: rl.Owner, Queue: rl.Queue,
		Permits: lk.semPermits(), Count: lk.semCount(), Token: rl.Token, TTL: rl.TTL,
	}
}

// addPermitReport files one entry into the report for k.
func addPermitReport(out map[reportKey]*wire.PermitReport, k reportKey, epoch uint64, p wire.ReportedPermit) {
	r := out[k]
	if r == nil {
		r = &wire.PermitReport{Epoch: epoch, Lockspace: k.lockspace}
		out[k] = r
	}
	r.Permits = append(r.Permits, p)
}

// splitPermitReport splits a report into messages of at most reportLocks
// entries and about reportBytes.
func splitPermitReport(to string, r *wire.PermitReport) []routed {
	var out []routed
	for len(r.Permits) > 0 {
		n, size := 0, 0
		for n < len(r.Permits) && n < reportLocks && size < reportBytes {
			size += len(r.Permits[n].Resource) + 48
			n++
		}
		out = append(out, routed{to, &wire.PermitReport{Epoch: r.Epoch, Lockspace: r.Lockspace, Permits: r.Permits[:n]}})
		r.Permits = r.Permits[n:]
	}
	return out
}

// permitState is a reported semaphore lock as the new master restores it.
func permitState(node master.NodeID, p wire.ReportedPermit) master.LockState {
	return master.LockState{
		Resource: p.Resource, Lock: master.LockID{Node: node, ID: p.Lock}, Owner: master.OwnerID(p.Owner),
		Queue: master.Queue(p.Queue), Granted: modes.NL, Requested: modes.NL, Token: p.Token,
		TTL: ticks(time.Duration(p.TTL)), Permits: p.Permits, Count: p.Count,
	}
}
