package measure

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketIndexIsMonotonicAndInverse(t *testing.T) {
	prev := -1
	// Every value maps to a bucket whose upper bound is ≥ the value, indices
	// never decrease, and a bucket's upper bound maps back to that bucket.
	for _, v := range sampleValues() {
		i := bucketIndex(v)
		if i < prev {
			t.Fatalf("index(%d)=%d < previous %d", v, i, prev)
		}
		prev = i
		if i >= nBuckets {
			t.Fatalf("index(%d)=%d out of range %d", v, i, nBuckets)
		}
		up := bucketUpper(i)
		if up < v || bucketIndex(up) != i {
			t.Fatalf("value %d: bucket %d upper %d (maps to %d)", v, i, up, bucketIndex(up))
		}
		if v >= subCount && float64(up-v) > float64(v)/halfSub {
			t.Fatalf("value %d: bucket upper %d too coarse", v, up)
		}
	}
}

// sampleValues returns increasing values covering exact and log ranges.
func sampleValues() []uint64 {
	var vs []uint64
	for v := uint64(0); v < 4096; v++ {
		vs = append(vs, v)
	}
	for v := uint64(4096); v < uint64(MaxValue); v = v*17/16 + 1 {
		vs = append(vs, v)
	}
	return append(vs, uint64(MaxValue))
}

func TestQuantilesAgainstSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	samples := make([]time.Duration, 0, 100000)
	for range 100000 {
		// Log-uniform between 1 µs and 1 s, like lock latencies.
		d := time.Duration(math.Exp(rng.Float64()*math.Log(1e6)) * 1e3)
		samples = append(samples, d)
		h.Record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		rank := max(1, int(math.Ceil(q*float64(len(samples)))))
		want := samples[rank-1]
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)/halfSub {
			t.Errorf("q=%v: got %v, exact %v", q, got, want)
		}
	}
	if h.Min() != samples[0] || h.Max() != samples[len(samples)-1] {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), samples[0], samples[len(samples)-1])
	}
}

func TestHistogramSmallExact(t *testing.T) {
	var h Histogram
	for _, v := range []time.Duration{5, 1, 3, 2, 4} {
		h.Record(v)
	}
	s := h.Summarize()
	want := Summary{Count: 5, Min: 1, Mean: 3, P50: 3, P90: 5, P99: 5, P999: 5, Max: 5}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	var empty Histogram
	if empty.Summarize() != (Summary{}) {
		t.Fatalf("empty summary %+v", empty.Summarize())
	}
}

func TestHistogramClampsAndMerges(t *testing.T) {
	var a, b Histogram
	a.Record(-time.Second)
	b.Record(100 * time.Hour)
	b.Record(time.Millisecond)
	a.Merge(&b)
	a.Merge(&Histogram{})
	if a.Count() != 3 || a.Min() != 0 || a.Max() != MaxValue {
		t.Fatalf("merged count=%d min=%v max=%v", a.Count(), a.Min(), a.Max())
	}
	if got := a.Quantile(0.5); got < time.Millisecond || got > time.Millisecond*65/64 {
		t.Fatalf("median %v", got)
	}
}

func TestFairness(t *testing.T) {
	cases := []struct {
		counts []uint64
		want   Fairness
	}{
		{nil, Fairness{}},
		{[]uint64{0, 0}, Fairness{Clients: 2, Jain: 1}},
		{[]uint64{10, 10, 10, 10}, Fairness{Clients: 4, Min: 10, Max: 10, Mean: 10, Jain: 1}},
		{[]uint64{40, 0, 0, 0}, Fairness{Clients: 4, Max: 40, Mean: 10, Stddev: math.Sqrt(300), Jain: 0.25}},
		{[]uint64{1, 3}, Fairness{Clients: 2, Min: 1, Max: 3, Mean: 2, Stddev: 1, Jain: 0.8}},
	}
	for _, c := range cases {
		got := FairnessOf(c.counts)
		if got.Clients != c.want.Clients || got.Min != c.want.Min || got.Max != c.want.Max ||
			!near(got.Mean, c.want.Mean) || !near(got.Stddev, c.want.Stddev) || !near(got.Jain, c.want.Jain) {
			t.Errorf("FairnessOf(%v) = %+v, want %+v", c.counts, got, c.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestScheduleDealsEveryArrivalOnce(t *testing.T) {
	for _, s := range []Schedule{{Rate: 50000, Clients: 64}, {Rate: 7, Clients: 3}, {Rate: 1000, Clients: 1}, {Rate: 3, Clients: 10}} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		window := 1234 * time.Millisecond
		total := s.Total(window)
		var got []time.Duration
		for c := range s.Clients {
			n := s.Count(c, window)
			for k := range n {
				at := s.At(c, k)
				if at >= window {
					t.Fatalf("%+v: client %d arrival %d at %v beyond window", s, c, k, at)
				}
				if k > 0 && at <= s.At(c, k-1) {
					t.Fatalf("%+v: client %d arrivals not increasing", s, c)
				}
				got = append(got, at)
			}
			if s.At(c, n) < window && n < total {
				t.Fatalf("%+v: client %d: arrival %d at %v is inside the window but not counted", s, c, n, s.At(c, n))
			}
		}
		if len(got) != total {
			t.Fatalf("%+v: %d arrivals dealt, Total says %d", s, len(got), total)
		}
		slices.Sort(got)
		for i, at := range got {
			if want := s.atGlobal(i); at != want {
				t.Fatalf("%+v: arrival %d at %v, want %v", s, i, at, want)
			}
		}
		if wantApprox := window.Seconds() * s.Rate; math.Abs(float64(total)-wantApprox) > 1 {
			t.Fatalf("%+v: total %d, rate×window %v", s, total, wantApprox)
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	for _, s := range []Schedule{{}, {Rate: -1, Clients: 1}, {Rate: 1}, {Rate: math.Inf(1), Clients: 1}, {Rate: math.NaN(), Clients: 1}} {
		if s.Validate() == nil {
			t.Errorf("%+v validated", s)
		}
	}
	if n := (Schedule{Rate: 10, Clients: 2}).Total(0); n != 0 {
		t.Errorf("Total(0) = %d", n)
	}
}
