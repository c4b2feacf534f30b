package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/bench/host"
	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/workload"
)

// Report is everything one comparison run produced.
type Report struct {
	// Command is the command line that produced the report.
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	// Flags holds every flag's value, by name.
	Flags map[string]string `json:"flags"`
	// Systems describes the systems that ran, in run order.
	Systems []lockbench.Info  `json:"systems"`
	Skipped []Skipped         `json:"skipped,omitempty"`
	Results []workload.Result `json:"results"`
	// Reference is the system ratios are computed against ("" for none).
	Reference string  `json:"reference,omitempty"`
	Ratios    []Ratio `json:"ratios,omitempty"`
}

// Machine describes where the run happened. It lives in package host, which
// bench/micro shares without pulling in the comparison harness.
type Machine = host.Machine

// Skipped records a system that could not run, and why.
type Skipped struct {
	System string `json:"system"`
	Reason string `json:"reason"`
}

// Ratio compares the reference with one peer on one workload.
type Ratio struct {
	Workload  workload.Kind `json:"workload"`
	Reference string        `json:"reference"`
	Peer      string        `json:"peer"`
	// Throughput is reference cycles/s ÷ peer cycles/s (NaN-free: 0 when
	// the peer completed nothing).
	Throughput float64 `json:"throughput"`
	// P99 is peer acquire p99 ÷ reference acquire p99 (0 when either is
	// missing).
	P99 float64 `json:"p99"`
}

// DefaultReference returns "dlm" if it is among names, else "".
func DefaultReference(names []string) string {
	for _, n := range names {
		if n == "dlm" {
			return n
		}
	}
	return ""
}

// ComputeRatios compares reference with every other system on every
// workload both ran, in result order.
func ComputeRatios(results []workload.Result, reference string) []Ratio {
	if reference == "" {
		return nil
	}
	refs := map[workload.Kind]workload.Result{}
	for _, r := range results {
		if r.System == reference {
			refs[r.Workload] = r
		}
	}
	var out []Ratio
	for _, r := range results {
		ref, ok := refs[r.Workload]
		if !ok || r.System == reference {
			continue
		}
		out = append(out, Ratio{
			Workload: r.Workload, Reference: reference, Peer: r.System,
			Throughput: safeDiv(ref.OpsPerSec, r.OpsPerSec),
			P99:        safeDiv(float64(r.Acquire.P99), float64(ref.Acquire.P99)),
		})
	}
	return out
}

func safeDiv(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0
	}
	return a / b
}

// JSON writes r as one indented JSON object.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // the command line's && stays readable
	return enc.Encode(r)
}

// fmtOps formats a rate: grouped digits from 100 up, one decimal below.
func fmtOps(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return group(fmt.Sprintf("%.0f", v))
}

// fmtInt formats a count with grouped digits.
func fmtInt(v uint64) string { return group(fmt.Sprint(v)) }

// group inserts thousands separators into a string of digits.
func group(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtShort formats a rate compactly for chart labels ("31.6k").
func fmtShort(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	default:
		return trimZero(fmt.Sprintf("%.1f", v))
	}
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// fmtDur formats a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}

// fmtRatio formats a ratio ("12.3×"), or "–" when undefined.
func fmtRatio(v float64) string {
	switch {
	case v <= 0:
		return "–"
	case v < 10:
		return fmt.Sprintf("%.2f×", v)
	default:
		return fmt.Sprintf("%.0f×", v)
	}
}

// flags returns the short per-row remarks: shared served as exclusive, no
// fencing in coupon, errors.
func remarks(r workload.Result) string {
	var out []string
	if r.SharedAsExclusive {
		out = append(out, "shared→EX")
	}
	if r.Overlaps > 0 {
		out = append(out, fmt.Sprintf("overlaps: %d", r.Overlaps))
	}
	if r.Coupon != nil && !r.Coupon.Fenced {
		out = append(out, "unfenced")
	}
	return strings.Join(out, ", ")
}
