package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/seed-a6839e30/dlm/bench/workload"
)

// Markdown writes the comparison page (compare.md); chart names the SVG to
// link, "" for none.
func Markdown(w io.Writer, r *Report, chart string) error {
	var b strings.Builder
	b.WriteString("# Lock services compared\n\n")
	fmt.Fprintf(&b, "Produced by `%s`, started %s, on %s.\n", r.Command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine)
	fmt.Fprintf(&b, "Clients: %s; duration per run: %s (warm-up %s excluded). ", r.Flags["clients"], r.Flags["duration"], r.Flags["warmup"])
	b.WriteString("Throughput counts lock+unlock cycles completed in the measured window; ")
	b.WriteString("acquire latency runs from calling Lock to its return (from the scheduled arrival in coupon); ")
	b.WriteString("Jain's index spreads the cycles over clients (1 = even). ")
	b.WriteString("CPU is in cores, harness/servers.\n")
	if chart != "" {
		fmt.Fprintf(&b, "\n![cycles per second, log scale](%s)\n", chart)
	}
	mdResults(&b, r)
	mdCoupon(&b, r)
	mdRatios(&b, r)
	mdSystems(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

func mdResults(b *strings.Builder, r *Report) {
	b.WriteString("\n## Throughput and latency\n\n")
	b.WriteString("| workload | system | cycles/s | acquire p50 | p99 | p99.9 | cycle p99 | Jain | per client min–max | errors | CPU h/s | remarks |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, res := range r.Results {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.3f | %d–%d | %d | %s | %s |\n",
			res.Workload, res.System, fmtOps(res.OpsPerSec),
			fmtDur(res.Acquire.P50), fmtDur(res.Acquire.P99), fmtDur(res.Acquire.P999), fmtDur(res.Cycle.P99),
			res.Fairness.Jain, res.Fairness.Min, res.Fairness.Max, res.Errors, fmtCPU(res), remarks(res))
	}
	var notes []string
	for _, res := range r.Results {
		for _, n := range res.Notes {
			notes = append(notes, fmt.Sprintf("%s, %s: %s", res.Workload, res.System, n))
		}
		for _, e := range res.ErrorSamples {
			notes = append(notes, fmt.Sprintf("%s, %s: error: %s", res.Workload, res.System, e))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
}

func mdCoupon(b *strings.Builder, r *Report) {
	var rows []workload.Result
	for _, res := range r.Results {
		if res.Coupon != nil {
			rows = append(rows, res)
		}
	}
	if len(rows) == 0 {
		return
	}
	c0 := rows[0].Coupon
	fmt.Fprintf(b, "\n## Coupon scenario\n\n%s coupons; %s requests/s offered over %s clients; a request waits at most %s for the lock. ",
		fmtInt(uint64(c0.Total)), r.Flags["rate"], r.Flags["clients"], r.Flags["coupon-wait"])
	b.WriteString("Every offered request lands in exactly one outcome column.\n\n")
	b.WriteString("| system | offered | issued | over-issued | rejected stale | sold out | busy | expired | failed | unanswered | sold out after | fenced |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, res := range rows {
		c := res.Coupon
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			res.System, fmtInt(c.Offered), fmtInt(c.Issued), fmtInt(c.OverIssued), fmtInt(c.RejectedStale), fmtInt(c.SoldOut),
			fmtInt(c.Busy), fmtInt(c.Expired), fmtInt(c.Failed), fmtInt(c.Unanswered), fmtDur(c.SoldOutAfter), yesNo(c.Fenced))
	}
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func mdRatios(b *strings.Builder, r *Report) {
	if len(r.Ratios) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s against each peer\n\n", r.Reference)
	fmt.Fprintf(b, "Throughput: %s cycles/s ÷ peer cycles/s. p99: peer acquire p99 ÷ %s acquire p99. Above 1, %s did better.\n\n",
		r.Reference, r.Reference, r.Reference)
	b.WriteString("| workload | peer | throughput | p99 |\n|---|---|--:|--:|\n")
	for _, q := range r.Ratios {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", q.Workload, q.Peer, fmtRatio(q.Throughput), fmtRatio(q.P99))
	}
}

func mdSystems(b *strings.Builder, r *Report) {
	b.WriteString("\n## Systems\n\n")
	b.WriteString("| system | version | servers | lock | shared mode | fencing token | cancellable wait |\n|---|---|--:|---|---|---|---|\n")
	for _, s := range r.Systems {
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n",
			s.Name, orDash(s.Version), s.Servers, s.Summary, yesNo(s.Shared), s.Fencing, yesNo(s.Cancelable))
	}
	b.WriteString("\n")
	for _, s := range r.Systems {
		for _, n := range s.Notes {
			fmt.Fprintf(b, "- %s: %s\n", s.Name, n)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(b, "- skipped %s: %s\n", s.System, s.Reason)
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
