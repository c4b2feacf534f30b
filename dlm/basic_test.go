package dlm

import (
	"errors"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

func TestClusterModeMatrix(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		// The first lock is always on node 1, the second on node 2; the
		// master moves between node 1, node 2 and a third node.
		for _, masterIdx := range []int{0, 1, 2} {
			for _, held := range modes.All() {
				for _, want := range modes.All() {
					res := c.resourceOn(masterIdx, "m-"+held.String()+want.String())
					a := mustLock(t, c.ls[0], res, held)
					b, err := c.ls[1].TryLock(bg, res, want)
					compatible := modes.Compatible(held, want)
					switch {
					case compatible && err != nil:
						t.Errorf("master %d: %v held, %v refused: %v", masterIdx, held, want, err)
					case !compatible && !errors.Is(err, ErrNotQueued):
						t.Errorf("master %d: %v held, %v: got %v, want ErrNotQueued", masterIdx, held, want, err)
					}
					if b != nil {
						mustUnlock(t, b)
					}
					mustUnlock(t, a)
				}
			}
		}
	})
}
