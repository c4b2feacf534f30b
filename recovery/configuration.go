package recovery

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Configuration is the cluster's member set, with the version that orders
// changes to it. During a change it is joint: Old is the set before, and a
// quorum is a majority of Members and a majority of Old, so that every
// quorum of the joint configuration overlaps every quorum of either set
// (Raft's joint consensus). See docs/design/membership-changes.md.
type Configuration struct {
	Version uint64   `json:"version"`
	Members []string `json:"members"`       // sorted, unique
	Old     []string `json:"old,omitempty"` // sorted, unique; set only while joint
}

// Joint reports whether the configuration is the middle step of a change.
func (c Configuration) Joint() bool { return len(c.Old) > 0 }

// All returns every node the configuration names (both sets while joint),
// sorted.
func (c Configuration) All() []string {
	out := slices.Concat(c.Members, c.Old)
	slices.Sort(out)
	return slices.Compact(out)
}

// Has reports whether the configuration names the node.
func (c Configuration) Has(name string) bool {
	return slices.Contains(c.Members, name) || slices.Contains(c.Old, name)
}

// Quorate reports whether the named nodes hold a quorum: a majority of
// Members, and while joint a majority of Old too.
func (c Configuration) Quorate(names func(string) bool) bool {
	majority := func(set []string) bool {
		n := 0
		for _, s := range set {
			if names(s) {
				n++
			}
		}
		return n >= len(set)/2+1
	}
	return majority(c.Members) && (!c.Joint() || majority(c.Old))
}

// Equal reports whether two configurations are the same.
func (c Configuration) Equal(o Configuration) bool {
	return c.Version == o.Version && slices.Equal(c.Members, o.Members) && slices.Equal(c.Old, o.Old)
}

func (c Configuration) String() string {
	s := fmt.Sprintf("v%d [%s]", c.Version, strings.Join(c.Members, " "))
	if c.Joint() {
		s += fmt.Sprintf(" joint with [%s]", strings.Join(c.Old, " "))
	}
	return s
}

// NewConfiguration returns the configuration of members at version, sorted.
func NewConfiguration(version uint64, members []string) Configuration {
	ms := slices.Clone(members)
	slices.Sort(ms)
	return Configuration{Version: version, Members: slices.Compact(ms)}
}

func (c Configuration) toWire() wire.ViewConfig {
	return wire.ViewConfig{Version: c.Version, Members: c.Members, Old: c.Old}
}

func configFromWire(w wire.ViewConfig) (Configuration, bool) {
	if w.IsZero() {
		return Configuration{}, false
	}
	return Configuration{Version: w.Version, Members: w.Members, Old: w.Old}, true
}

// validate checks a configuration read from a file or given by an operator.
func (c Configuration) validate() error {
	if len(c.Members) == 0 {
		return errors.New("no members")
	}
	for _, set := range [][]string{c.Members, c.Old} {
		for i, name := range set {
			if name == "" || len(name) > wire.MaxNodeName {
				return fmt.Errorf("member name %q must be 1..%d bytes", name, wire.MaxNodeName)
			}
			if i > 0 && set[i-1] >= name {
				return fmt.Errorf("members must be sorted and unique (%q after %q)", name, set[i-1])
			}
		}
	}
	return nil
}

// StateFile is the name of the file, in Config.StateDir, that holds the
// configuration this node last agreed to.
const StateFile = "membership.json"

// ErrBadState is wrapped by the error New returns for a state file it
// cannot use; the file is left as it is.
var ErrBadState = errors.New("recovery: bad membership state file")

// loadState reads the configuration stored in dir; ok is false if there is
// none yet.
func loadState(dir string) (c Configuration, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("%w: %s: %v", ErrBadState, filepath.Join(dir, StateFile), err)
	}
	if err := c.validate(); err != nil {
		return c, false, fmt.Errorf("%w: %s: %v", ErrBadState, filepath.Join(dir, StateFile), err)
	}
	return c, true, nil
}

// saveState stores c in dir so that it survives a crash at any point: a
// temporary file, synced, renamed over the old one, and the directory
// synced.
func saveState(dir string, c Configuration) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, StateFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: gone already
	if _, err = tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, StateFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// sortNames returns names sorted, without repeats.
func sortNames(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, cmp.Compare[string])
	return slices.Compact(out)
}
