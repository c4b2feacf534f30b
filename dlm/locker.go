package dlm

import "github.com/seed-a6839e30/dlm/lockapi"

// Mutex adapts an EX lock on one resource to sync.Locker (lockapi.Mutex):
// Lock waits as long as it takes, LockContext within a context, Token is
// the held lock's fencing token.
type Mutex = lockapi.Mutex

// Mutex returns a sync.Locker for resource in this lockspace; the node's
// logger hears what its Lock and Unlock cannot return.
func (ls *Lockspace) Mutex(resource string) *Mutex {
	return lockapi.NewMutex(ls, resource, ls.node.log)
}
