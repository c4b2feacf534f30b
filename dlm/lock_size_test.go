package dlm

import (
	"testing"
	"unsafe"
)

// TestLockSize pins the size of a Lock: 320 bytes fill an allocation size
// class exactly, and one field more would cost 32 bytes a lock. What few
// locks need goes in lockExt.
func TestLockSize(t *testing.T) {
	if s := unsafe.Sizeof(Lock{}); s != 320 {
		t.Errorf("Lock is %d bytes, want 320", s)
	}
}
