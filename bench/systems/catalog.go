package systems

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// ErrUnknownSystem is returned by Select for a name no Entry has.
var ErrUnknownSystem = errors.New("systems: unknown system")

// Entry registers one system.
type Entry struct {
	// Name is the command-line name.
	Name string
	// Rank orders the default list, lowest first.
	Rank int
	// New builds the system (without starting it) from the harness's Env
	// and the system's default configuration.
	New func(env lockbench.Env) (lockbench.System, error)
}

// catalog carries one method per system, each in that system's file; see
// the package documentation.
type catalog struct{}

var entryType = reflect.TypeFor[Entry]()

// All returns every registered system ordered by Rank, then Name.
func All() []Entry {
	v := reflect.ValueOf(catalog{})
	var out []Entry
	for i := range v.NumMethod() {
		m := v.Method(i)
		if m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0) != entryType {
			continue // not a registration; TestCatalog rejects such methods
		}
		out = append(out, m.Call(nil)[0].Interface().(Entry))
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Names returns the names of All, in order.
func Names() []string {
	var names []string
	for _, e := range All() {
		names = append(names, e.Name)
	}
	return names
}

// Select parses a comma-separated list of names ("all" or empty for every
// system) and returns the entries in the order given.
func Select(list string) ([]Entry, error) {
	all := All()
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return all, nil
	}
	var out []Entry
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(e Entry) bool { return e.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownSystem, name, strings.Join(Names(), ", "))
		}
		if !slices.ContainsFunc(out, func(e Entry) bool { return e.Name == name }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}
