package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed-a6839e30/dlm/bench/host"
)

// Report is everything one invocation produced; the writers below are pure
// functions of it, so their output is tested against golden files.
type Report struct {
	Command   string       `json:"command"`
	Started   time.Time    `json:"started"`
	Machine   host.Machine `json:"machine"` // GoVersion: the go command that ran the benchmarks
	LoadStart string       `json:"load_average_start,omitempty"`
	LoadEnd   string       `json:"load_average_end,omitempty"`
	Count     int          `json:"count"`
	Benchtime string       `json:"benchtime"`
	// SlowBenchtime is the -benchtime of the --slow benchmarks, "" without
	// --slow.
	SlowBenchtime string `json:"slow_benchtime,omitempty"`
	// Commands are the go test invocations, as run from the module root.
	Commands   []string       `json:"commands"`
	Benchmarks []BenchSummary `json:"benchmarks"`
	Ratios     []RatioSummary `json:"ratios,omitempty"`
	// Problems are failed commands, unparsable result lines and an
	// interruption: why a figure may be missing.
	Problems []string `json:"problems,omitempty"`
}

// WriteJSON writes the report as one indented JSON object.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // the command line's && stays readable
	return enc.Encode(r)
}

// row is one line of the summary, in either table.
type row struct {
	pkg, bench, unit, median, rng, runs, target, met string
}

// rows lays the summary out per package, in catalogue order: each
// benchmark's units on consecutive lines, the package's ratios last.
func rows(r *Report) []row {
	var out []row
	for _, dir := range reportDirs(r) {
		for _, b := range r.Benchmarks {
			if b.Package != dir {
				continue
			}
			if b.Runs == 0 {
				out = append(out, row{pkg: dir, bench: b.Name, runs: "0", target: targetList(b.Targets), met: statusMissing})
				continue
			}
			first := true
			for _, m := range b.Metrics {
				x := row{pkg: dir, unit: m.Unit, median: formatNumber(m.Median), rng: formatRange(m)}
				if first {
					x.bench, x.runs = b.Name, strconv.Itoa(b.Runs)
				}
				for _, v := range b.Targets {
					if v.Unit == m.Unit {
						x.target, x.met = v.Target.String(), yesNo(v.Status)
					}
				}
				if first && len(b.Targets) == 0 {
					x.target = statusReported
				}
				out = append(out, x)
				first = false
			}
			for _, v := range b.Targets {
				if b.metric(v.Unit) == nil {
					out = append(out, row{pkg: dir, unit: v.Unit, target: v.Target.String(), met: statusMissing})
				}
			}
		}
		for _, q := range r.Ratios {
			if q.Package != dir {
				continue
			}
			x := row{pkg: dir, bench: "ratio " + strings.TrimPrefix(q.Num, "Benchmark") + " / " + strings.TrimPrefix(q.Den, "Benchmark"), unit: "× " + q.Of, target: q.Target.Target.String(), met: yesNo(q.Status)}
			if len(q.Metric.Values) > 0 {
				x.median, x.rng = formatNumber(q.Metric.Median), formatRange(q.Metric)
				x.runs = strconv.Itoa(len(q.Metric.Values))
				if !q.PerRun {
					x.runs = "medians"
				}
			}
			out = append(out, x)
		}
	}
	return out
}

// reportDirs lists the packages in the order they ran.
func reportDirs(r *Report) []string {
	var dirs []string
	for _, b := range r.Benchmarks {
		if len(dirs) == 0 || dirs[len(dirs)-1] != b.Package {
			dirs = append(dirs, b.Package)
		}
	}
	return dirs
}

func targetList(vs []Verdict) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Target.String()+" "+v.Unit)
	}
	return strings.Join(s, ", ")
}

func yesNo(status string) string {
	switch status {
	case statusMet:
		return "yes"
	case statusNotMet:
		return "no"
	}
	return status
}

// WriteText writes the terminal summary: a header saying what ran where,
// the aligned table, the count of targets met, and any problems.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.Command)
	fmt.Fprintf(&b, "%s", r.Machine)
	if r.LoadStart != "" {
		fmt.Fprintf(&b, "; load average %s at start, %s at end", r.LoadStart, orDash(r.LoadEnd))
	}
	fmt.Fprintf(&b, "\n%d run(s) of each benchmark, -benchtime %s%s; median, min – max of the runs\n\n", r.Count, r.Benchtime, slowNote(r))
	table := [][]string{{"benchmark", "unit", "median", "min – max", "runs", "target", "met"}}
	last := ""
	for _, x := range rows(r) {
		if x.pkg != last {
			table = append(table, []string{"./" + x.pkg + "/"})
			last = x.pkg
		}
		bench := ""
		if x.bench != "" {
			bench = "  " + x.bench
		}
		table = append(table, []string{bench, x.unit, x.median, x.rng, x.runs, x.target, x.met})
	}
	align(&b, table, []bool{false, false, true, true, true, false, false})
	b.WriteString("\n" + tallyLine(r) + "\n")
	if n := notes(r); n != "" {
		b.WriteString(n + "\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// align writes cells in columns two spaces apart, right-aligned where right
// says so; a row with a single cell (a package heading) spans the table.
func align(b *strings.Builder, table [][]string, right []bool) {
	width := make([]int, len(right))
	for _, r := range table {
		if len(r) == 1 {
			continue
		}
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range table {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-min(width[i], utf8.RuneCountInString(c)))
			if i > 0 {
				line.WriteString("  ")
			}
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

func tallyLine(r *Report) string {
	met, notMet, missing := tally(r.Benchmarks, r.Ratios)
	s := fmt.Sprintf("targets: %d met, %d not met, %d missing", met, notMet, missing)
	if names := missingBenchmarks(r); len(names) > 0 {
		s += "; not in the output: " + strings.Join(names, ", ")
	}
	return s
}

// missingBenchmarks lists the selected benchmarks that did not run.
func missingBenchmarks(r *Report) []string {
	var names []string
	for _, b := range r.Benchmarks {
		if b.Runs == 0 {
			names = append(names, "./"+b.Package+"/ "+b.Name)
		}
	}
	return names
}

// notes explains the ratio rows whose runs column says "medians".
func notes(r *Report) string {
	for _, q := range r.Ratios {
		if !q.PerRun && len(q.Metric.Values) > 0 {
			return `runs "medians": the two benchmarks ran a different number of times, so the ratio divides their medians.`
		}
	}
	return ""
}

func slowNote(r *Report) string {
	if r.SlowBenchtime == "" {
		return ""
	}
	return " (the slow ones " + r.SlowBenchtime + ")"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// WriteMarkdown writes the summary as a markdown page: what ran where (the
// exact commands, the toolchain, the machine and its load, since the
// figures mean little without them), then one table.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString("# Microbenchmarks\n\n")
	fmt.Fprintf(&b, "Produced by `%s`, started %s.\n\n", r.Command, r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Go: %s, %s/%s\n", r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch)
	fmt.Fprintf(&b, "- CPUs: %d", r.Machine.CPUs)
	if r.Machine.CPUModel != "" {
		fmt.Fprintf(&b, " (%s)", r.Machine.CPUModel)
	}
	b.WriteString("\n")
	if r.Machine.MemoryMB > 0 {
		fmt.Fprintf(&b, "- Memory: %d MB\n", r.Machine.MemoryMB)
	}
	if r.Machine.Kernel != "" {
		fmt.Fprintf(&b, "- Kernel: Linux %s\n", r.Machine.Kernel)
	}
	if r.LoadStart != "" {
		fmt.Fprintf(&b, "- Load average (1, 5, 15 min): %s at start, %s at end\n", r.LoadStart, orDash(r.LoadEnd))
	}
	fmt.Fprintf(&b, "- Runs: %d of each benchmark, `-benchtime %s`%s\n", r.Count, r.Benchtime, slowNote(r))
	b.WriteString("\nCommands, from the module root. Each package is one go test run, so a ratio divides figures of the same run:\n\n```sh\n")
	for _, c := range r.Commands {
		b.WriteString(c + "\n")
	}
	b.WriteString("```\n\n")
	b.WriteString("| package | benchmark | unit | median | min – max | runs | target | met |\n")
	b.WriteString("|---|---|---|--:|--:|--:|---|---|\n")
	for _, x := range rows(r) {
		bench := x.bench
		if name, ok := strings.CutPrefix(bench, "ratio "); ok {
			bench = "ratio `" + strings.ReplaceAll(name, " / ", "` / `") + "`"
		} else if bench != "" {
			bench = "`" + bench + "`"
		}
		pkg := ""
		if x.bench != "" {
			pkg = "`./" + x.pkg + "/`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", pkg, bench, x.unit, x.median, x.rng, x.runs, x.target, x.met)
	}
	b.WriteString("\n" + tallyLine(r) + ".\n")
	if n := notes(r); n != "" {
		b.WriteString("\n" + n + "\n")
	}
	if len(r.Problems) > 0 {
		b.WriteString("\nProblems:\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s\n", strings.TrimSpace(p))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatNumber prints v with about four significant digits, whole numbers
// without decimals, and values from 10,000 up with thousands separators
// (387,733 pairs/s): as much precision as a benchmark on a shared machine
// carries.
func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprint(v)
	case math.Abs(v) >= 10_000:
		return thousands(int64(math.Round(v)))
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		s := strconv.FormatFloat(v, 'f', max(0, 3-int(math.Floor(math.Log10(math.Abs(v))))), 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func formatRange(m Metric) string {
	return formatNumber(m.Min) + " – " + formatNumber(m.Max)
}
