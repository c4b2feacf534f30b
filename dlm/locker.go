package dlm

import "github.com/seed-a6839e30/dlm/lockapi"

// Mutex adapts an EX lock on one resource to sync.Locker (lockapi.Mutex).
type Mutex = lockapi.Mutex

// Mutex returns a sync.Locker for resource in this lockspace.
func (ls *Lockspace) Mutex(resource string) *Mutex { return lockapi.NewMutex(ls, resource) }
