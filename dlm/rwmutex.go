package dlm

import "github.com/seed-a6839e30/dlm/lockapi"

// RWMutex is a cluster-wide reader/writer lock on one resource (readers
// in PR, a writer in EX) with Upgrade (PR→EX in place, conversion
// deadlocks detected) and Downgrade (EX→PR in place): lockapi's, the same
// for an embedded node and a client. Its methods take lockapi options
// (lockapi.WithOwner takes an *Owner of this lockspace).
type RWMutex = lockapi.RWMutex

// RWMutex returns a reader/writer lock on resource in this lockspace.
func (ls *Lockspace) RWMutex(resource string) *RWMutex {
	return lockapi.NewRWMutex(ls, resource, ls.node.log)
}
