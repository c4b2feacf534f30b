package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/seed-a6839e30/dlm/bench/workload"
)

// Text writes the terminal table: one row per system and workload, then the
// coupon outcome, the ratios and the skipped systems.
func Text(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tsystem\tcycles/s\tacq p50\tacq p99\tacq p99.9\tcycle p99\tjain\tmin/max\terrors\tcpu h/s\t\tremarks")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%d/%d\t%d\t%s\t\t%s\n",
			res.Workload, res.System, fmtOps(res.OpsPerSec),
			fmtDur(res.Acquire.P50), fmtDur(res.Acquire.P99), fmtDur(res.Acquire.P999), fmtDur(res.Cycle.P99),
			res.Fairness.Jain, res.Fairness.Min, res.Fairness.Max, res.Errors, fmtCPU(res), remarks(res))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := textCoupon(w, r); err != nil {
		return err
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(w, "\nratios against %s (above 1: %s did better)\n", r.Reference, r.Reference)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tpeer\tthroughput\tp99\t")
		for _, q := range r.Ratios {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", q.Workload, q.Peer, fmtRatio(q.Throughput), fmtRatio(q.P99))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.System, s.Reason)
	}
	return nil
}

func textCoupon(w io.Writer, r *Report) error {
	some := false
	for _, res := range r.Results {
		some = some || res.Coupon != nil
	}
	if !some {
		return nil
	}
	fmt.Fprintln(w, "\ncoupon: requests by outcome")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\toffered\tissued\tover\tstale\tsold out\tbusy\texpired\tfailed\tunanswered\tsold out after\tfenced\t")
	for _, res := range r.Results {
		c := res.Coupon
		if c == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			res.System, fmtInt(c.Offered), fmtInt(c.Issued), fmtInt(c.OverIssued), fmtInt(c.RejectedStale), fmtInt(c.SoldOut),
			fmtInt(c.Busy), fmtInt(c.Expired), fmtInt(c.Failed), fmtInt(c.Unanswered), fmtDur(c.SoldOutAfter), yesNo(c.Fenced))
	}
	return tw.Flush()
}

// fmtCPU shows harness and server CPU in cores ("0.9/1.1"); "-" for an
// unknown server figure.
func fmtCPU(r workload.Result) string {
	if r.ServerCPU < 0 {
		return fmt.Sprintf("%.2f/-", r.HarnessCPU)
	}
	return fmt.Sprintf("%.2f/%.2f", r.HarnessCPU, r.ServerCPU)
}
