package dlm

import "github.com/seed-a6839e30/dlm/lockapi"

// Election is leader election on one lock (lockapi.Election, which says
// how it works): the resource "election/<name>" carries it, and candidates
// and observers may be embedded nodes or clients of agents alike.
type Election = lockapi.Election

// Leader is an elected leader as observers see it.
type Leader = lockapi.Leader

// Leadership is a won election.
type Leadership = lockapi.Leadership

// ErrNoLeader: nobody holds the election.
var ErrNoLeader = lockapi.ErrNoLeader

// Election returns the election called name in this lockspace.
func (ls *Lockspace) Election(name string) *Election { return lockapi.NewElection(ls, name) }
