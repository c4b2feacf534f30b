package dlm

import (
	"testing"
	"unsafe"
)

// TestLockSize bounds the size of a Lock: past 256 bytes (an allocation
// size class) it would cost 32 bytes a lock more. What few locks need goes
// in lockExt.
func TestLockSize(t *testing.T) {
	if s := unsafe.Sizeof(Lock{}); s > 256 {
		t.Errorf("Lock is %d bytes, want at most 256", s)
	}
}
