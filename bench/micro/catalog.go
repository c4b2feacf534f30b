package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Target is a bound on the median of one unit of a benchmark (or of a
// ratio, whose unit is "×").
type Target struct {
	Unit  string  `json:"unit"`
	Op    string  `json:"op"` // "<=", "<" or ">="
	Limit float64 `json:"limit"`
}

func atMost(limit float64, unit string) Target  { return Target{Unit: unit, Op: "<=", Limit: limit} }
func below(limit float64, unit string) Target   { return Target{Unit: unit, Op: "<", Limit: limit} }
func atLeast(limit float64, unit string) Target { return Target{Unit: unit, Op: ">=", Limit: limit} }

// Met reports whether v satisfies the target.
func (t Target) Met(v float64) bool {
	switch t.Op {
	case "<=":
		return v <= t.Limit
	case "<":
		return v < t.Limit
	case ">=":
		return v >= t.Limit
	}
	return false
}

// String is the bound as a person writes it, without the unit (the table
// has a unit column): "≤ 250".
func (t Target) String() string {
	sym := map[string]string{"<=": "≤", "<": "<", ">=": "≥"}[t.Op]
	return sym + " " + formatNumber(t.Limit)
}

// benchSpec is one benchmark the command knows: its name as go test prints
// it, less the -GOMAXPROCS suffix, and its targets (none: reported only).
type benchSpec struct {
	Name    string
	Slow    bool
	Targets []Target
}

// ratioSpec divides one benchmark's median of Unit by another's, both from
// the same go test invocation, because the floor (a plain TCP ping-pong) moves
// with the machine's load as much as the figure measured against it does.
type ratioSpec struct {
	Num, Den string
	Unit     string
	Target   Target
}

// pkgSpec is one package's benchmarks; each package runs as one go test.
type pkgSpec struct {
	Dir     string // relative to the module root, as in ./transport/wire/
	Benches []benchSpec
	Ratios  []ratioSpec
}

// catalogue lists the lower layers' microbenchmarks and the targets the
// design set for them (docs/BENCHMARKS.md). It is a function so that every
// caller gets its own copy to filter.
func catalogue() []pkgSpec {
	return []pkgSpec{
		{Dir: "master", Benches: []benchSpec{
			{Name: "BenchmarkUncontendedLockUnlock", Targets: []Target{atMost(250, "ns/op"), atMost(1, "allocs/op")}},
			{Name: "BenchmarkContendedHandoff"},
			{Name: "BenchmarkMillionLocks", Targets: []Target{atMost(250, "bytes/lock")}},
		}},
		{Dir: "transport", Benches: []benchSpec{
			{Name: "BenchmarkTCPPingPong"},
			{Name: "BenchmarkLinkRoundTrip"},
			{Name: "BenchmarkLinkPipelined", Targets: []Target{atLeast(250_000, "pairs/s")}},
			{Name: "BenchmarkLockRequestCodec", Targets: []Target{atMost(400, "ns/op"), atMost(2, "allocs/op")}},
		}, Ratios: []ratioSpec{
			{Num: "BenchmarkLinkRoundTrip", Den: "BenchmarkTCPPingPong", Unit: "ns/op", Target: atMost(1.3, "×")},
		}},
		{Dir: "transport/wire", Benches: []benchSpec{
			{Name: "BenchmarkLockReportCodec"},
		}},
		{Dir: "dlm", Benches: []benchSpec{
			{Name: "BenchmarkTCPPingPong"},
			{Name: "BenchmarkLocalLockUnlock", Targets: []Target{atMost(1000, "ns/op")}},
			{Name: "BenchmarkRemoteLockUnlock"},
			{Name: "BenchmarkClusterThroughput"},
			{Name: "BenchmarkRecovery/locks=10000", Slow: true},
			{Name: "BenchmarkRecovery/locks=100000", Slow: true, Targets: []Target{below(500, "ms/recovery")}},
			{Name: "BenchmarkRecovery/locks=1000000", Slow: true},
			{Name: "BenchmarkFailoverTCP", Slow: true, Targets: []Target{below(3, "s/failover")}},
		}, Ratios: []ratioSpec{
			{Num: "BenchmarkRemoteLockUnlock", Den: "BenchmarkTCPPingPong", Unit: "ns/op", Target: atMost(2, "×")},
		}},
	}
}

// packageDirs lists the catalogue's packages, for messages.
func packageDirs(cat []pkgSpec) []string {
	var dirs []string
	for _, p := range cat {
		dirs = append(dirs, p.Dir)
	}
	return dirs
}

// selectBenchmarks narrows the catalogue to the packages named in packages
// ("all" or a comma-separated list, "./dlm/" and "dlm" alike), the
// benchmarks whose name filter matches (nil: all), and the slow ones only
// if slow is set. A selected benchmark that is one side of a ratio brings
// the other side with it: the ratio's target cannot be judged without both,
// and only a figure of the same run will do.
func selectBenchmarks(cat []pkgSpec, packages string, filter *regexp.Regexp, slow bool) ([]pkgSpec, error) {
	want := map[string]bool{}
	if strings.TrimSpace(packages) != "all" {
		for _, name := range strings.Split(packages, ",") {
			dir := strings.Trim(strings.TrimPrefix(strings.TrimSpace(name), "./"), "/")
			if !slices.Contains(packageDirs(cat), dir) {
				return nil, fmt.Errorf("--packages: unknown package %q; choose all, or some of %s", name, strings.Join(packageDirs(cat), ", "))
			}
			want[dir] = true
		}
	}
	var sel []pkgSpec
	var slowOnly bool
	for _, p := range cat {
		if len(want) > 0 && !want[p.Dir] {
			continue
		}
		picked := map[string]bool{}
		for _, b := range p.Benches {
			if filter != nil && !filter.MatchString(b.Name) {
				continue
			}
			if b.Slow && !slow {
				slowOnly = true
				continue
			}
			picked[b.Name] = true
		}
		for _, r := range p.Ratios {
			if picked[r.Num] || picked[r.Den] {
				picked[r.Num], picked[r.Den] = true, true
			}
		}
		q := pkgSpec{Dir: p.Dir}
		for _, b := range p.Benches {
			if picked[b.Name] {
				q.Benches = append(q.Benches, b)
			}
		}
		for _, r := range p.Ratios {
			if picked[r.Num] {
				q.Ratios = append(q.Ratios, r)
			}
		}
		if len(q.Benches) > 0 {
			sel = append(sel, q)
		}
	}
	if len(sel) == 0 {
		if slowOnly {
			return nil, fmt.Errorf("the selection has only slow benchmarks; add --slow to run them")
		}
		return nil, fmt.Errorf("no benchmark matches --packages and --filter")
	}
	return sel, nil
}

// command is one go test invocation.
type command struct {
	Dir     string   // package directory, relative to the module root
	Args    []string // after "go"
	Benches []benchSpec
}

// String is the command as it can be pasted into a shell at the module root.
func (c command) String() string {
	return shellJoin(append([]string{"go"}, c.Args...))
}

// plan turns a selection into go test commands: one per package, so that the
// figures a ratio divides come from the same run, and one more for the
// package's slow benchmarks, whose iterations take seconds each and so get
// their own -benchtime (an iteration count). A benchmark picked by its
// sub-benchmarks runs in a command of its own, because go test matches each
// level of a name separately and a two-level pattern holds back every
// benchmark that has no second level.
func plan(sel []pkgSpec, count int, benchtime, slowBenchtime string) []command {
	var cmds []command
	add := func(dir string, benches []benchSpec, benchtime string) {
		if len(benches) == 0 {
			return
		}
		cmds = append(cmds, command{Dir: dir, Benches: benches, Args: []string{
			"test", "-run", "^$", "-bench", benchRegexp(benches),
			"-benchtime", benchtime, "-count", strconv.Itoa(count), "-benchmem", "./" + dir + "/",
		}})
	}
	for _, p := range sel {
		for _, slow := range []bool{false, true} {
			var flat []benchSpec
			var tops []string
			bySub := map[string][]benchSpec{}
			for _, b := range p.Benches {
				if b.Slow != slow {
					continue
				}
				top, _, hasSub := strings.Cut(b.Name, "/")
				if !hasSub {
					flat = append(flat, b)
					continue
				}
				if _, ok := bySub[top]; !ok {
					tops = append(tops, top)
				}
				bySub[top] = append(bySub[top], b)
			}
			bt := benchtime
			if slow {
				bt = slowBenchtime
			}
			add(p.Dir, flat, bt)
			for _, top := range tops {
				add(p.Dir, bySub[top], bt)
			}
		}
	}
	return cmds
}

// benchRegexp builds the -bench pattern for benches, which plan groups so
// that either none has a sub-benchmark name or all share one top-level name.
func benchRegexp(benches []benchSpec) string {
	var tops, subs []string
	for _, b := range benches {
		top, sub, hasSub := strings.Cut(b.Name, "/")
		if !slices.Contains(tops, top) {
			tops = append(tops, top)
		}
		if hasSub && !slices.Contains(subs, sub) {
			subs = append(subs, sub)
		}
	}
	re := "^(" + quoteAll(tops) + ")$"
	if len(subs) > 0 {
		re += "/^(" + quoteAll(subs) + ")$"
	}
	return re
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return strings.Join(q, "|")
}

// shellJoin quotes the arguments that a POSIX shell would otherwise expand
// or split.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~^!") {
			q[i] = s
			continue
		}
		q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
