package recovery

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func set(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

func TestJointQuorumNeedsBothMajorities(t *testing.T) {
	old := NewConfiguration(0, []string{"a", "b", "c"})
	joint := Configuration{Version: 1, Members: []string{"a", "d", "e"}, Old: old.Members}
	for _, tc := range []struct {
		up   []string
		want bool
	}{
		{[]string{"a", "b"}, false},          // old majority only
		{[]string{"a", "d"}, false},          // new majority only
		{[]string{"a", "b", "d"}, true},      // both
		{[]string{"b", "c", "d", "e"}, true}, // both, without the shared member
		{[]string{"b", "c", "e"}, false},     // old majority, one of the new
	} {
		if got := joint.Quorate(set(tc.up...)); got != tc.want {
			t.Errorf("joint quorate(%v) = %v, want %v", tc.up, got, tc.want)
		}
	}
	if !old.Quorate(set("b", "c")) || old.Quorate(set("a")) {
		t.Error("plain majority wrong")
	}
	if got := joint.All(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("All = %v", got)
	}
}

func TestStateFileRoundTripAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := loadState(dir); ok || err != nil {
		t.Fatalf("empty dir: %v %v", ok, err)
	}
	c := Configuration{Version: 3, Members: []string{"a", "b", "d"}, Old: []string{"a", "b", "c"}}
	if err := saveState(dir, c); err != nil {
		t.Fatal(err)
	}
	got, ok, err := loadState(dir)
	if err != nil || !ok || !got.Equal(c) {
		t.Fatalf("loaded %+v %v %v, want %+v", got, ok, err, c)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	for _, bad := range []string{`{`, `{"version": 1, "members": []}`, `{"version": 1, "members": ["b", "a"]}`} {
		if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadState(dir); !errors.Is(err, ErrBadState) {
			t.Errorf("%s: %v, want ErrBadState", bad, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, StateFile)); string(b) != bad {
			t.Errorf("a bad state file was changed")
		}
	}
}
