package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m, removeBinary) }

// TestDemoJSON runs a short coupon scenario end to end and checks the JSON
// report: every coupon issued once, none over.
func TestDemoJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--json", "--rate", "4000", "--duration", "1s", "--coupons", "200", "--workers", "8"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	// A holder stalled past the lock's 100 ms TTL (a loaded machine, -race)
	// loses the lock, and its write is refused by the fenced store: that
	// is the fencing at work, not a fault, so only logged.
	if r.Nodes != 3 || r.Coupons != 200 || r.Issued != 200 || r.Overissued != 0 {
		t.Fatalf("report %+v", r)
	}
	if r.RejectedStale != 0 {
		t.Logf("%d stale writes refused by the store", r.RejectedStale)
	}
	if r.Requests < 3000 || r.P99ms <= 0 || r.DurationS <= 0 || r.ThroughputRPS <= 0 {
		t.Fatalf("report %+v", r)
	}
	for _, key := range []string{"nodes", "requests", "issued", "overissued", "rejected_stale", "throughput_rps", "p50_ms", "p99_ms", "duration_s"} {
		if !strings.Contains(out.String(), `"`+key+`"`) {
			t.Errorf("JSON lacks %q", key)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: dlmnode"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"help"}, 0, "demo"},
		{[]string{"demo", "-h"}, 0, "-coupons"},
		{[]string{"demo", "--rate", "0"}, 2, "must be positive"},
		{[]string{"demo", "--nodes", "x"}, 2, "invalid value"},
		{[]string{"demo", "extra"}, 2, "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d), output %q lacks %q", tc.args, code, tc.code, out.String()+errb.String(), tc.want)
		}
	}
}

// TestDemoKillNodeMidSale halts the coupon lock's master while coupons are
// still being issued (a slow rate makes the sale outlast the kill): its
// clients stop with it, the others wait out the recovery, and every coupon
// is still issued exactly once.
func TestDemoKillNodeMidSale(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--json", "--rate", "400", "--duration", "4s", "--coupons", "1000", "--workers", "4", "--kill-node-at", "300ms"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	if r.KilledNode == "" || r.KilledAtS <= 0 {
		t.Fatalf("no node was halted: %+v", r)
	}
	if r.Overissued != 0 || r.Issued > int64(r.Coupons) {
		t.Fatalf("over-issue after a halt: %+v", r)
	}
	if r.RecoveredAfterS <= 0 {
		t.Fatalf("no lock was granted after the halt: %+v", r)
	}
	if r.Issued == 0 || r.SoldOutAtS != 0 && r.SoldOutAtS < r.KilledAtS {
		t.Fatalf("the halt did not come mid-sale: %+v", r)
	}
}

// TestStoreEndsSaleOnce: the store ends the sale exactly when the last
// coupon goes (so queued requests give up), never on a stale write or
// after it.
func TestStoreEndsSaleOnce(t *testing.T) {
	ended := 0
	s := &store{remaining: 2, endSale: func() { ended++ }}
	if ok, stale := s.issue(5); !ok || stale || ended != 0 {
		t.Fatalf("first coupon: ok %v stale %v, sale ended %d times", ok, stale, ended)
	}
	if ok, stale := s.issue(4); ok || !stale || ended != 0 {
		t.Fatalf("stale token: ok %v stale %v, sale ended %d times", ok, stale, ended)
	}
	if ok, _ := s.issue(6); !ok || ended != 1 {
		t.Fatalf("last coupon: ok %v, sale ended %d times", ok, ended)
	}
	if ok, stale := s.issue(7); ok || stale || ended != 1 || s.issued != 2 {
		t.Fatalf("after sell-out: ok %v stale %v issued %d, sale ended %d times", ok, stale, s.issued, ended)
	}
}
