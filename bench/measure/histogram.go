package measure

import (
	"math"
	"math/bits"
	"time"
)

const (
	// SubBits sets the precision: values below 2^SubBits ns are exact and
	// each octave above has 2^(SubBits-1) buckets.
	SubBits = 7
	// MaxValue is the largest value kept apart; larger values are clamped
	// (2^40 ns is about 18 minutes, beyond any bounded run).
	MaxValue = time.Duration(1)<<40 - 1

	subCount = 1 << SubBits
	halfSub  = subCount / 2
	// nBuckets covers every index bucketIndex can return for MaxValue.
	nBuckets = (40-SubBits+1)*halfSub + subCount
)

// Histogram counts durations in log-linear buckets. The zero value is empty
// and ready to use. It is not safe for concurrent use.
type Histogram struct {
	counts [nBuckets]uint64
	n      uint64
	sum    float64 // ns; float so that billions of samples cannot overflow
	min    time.Duration
	max    time.Duration
}

// bucketIndex maps v ≥ 0 to its bucket. For v < 2^SubBits the index is v.
// Above, with s = bitlen(v) - SubBits, the top SubBits bits of v (a value in
// [halfSub, subCount)) select the sub-bucket of octave s.
func bucketIndex(v uint64) int {
	if v < subCount {
		return int(v)
	}
	s := bits.Len64(v) - SubBits
	return subCount + (s-1)*halfSub + int(v>>uint(s)) - halfSub
}

// bucketUpper returns the largest value that maps to bucket i.
func bucketUpper(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	s := (i-subCount)/halfSub + 1
	m := uint64((i-subCount)%halfSub + halfSub)
	return (m+1)<<uint(s) - 1
}

// Record adds one duration; negative values count as zero and values above
// MaxValue as MaxValue.
func (h *Histogram) Record(d time.Duration) {
	d = max(0, min(d, MaxValue))
	h.counts[bucketIndex(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += float64(d)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max return the exact extremes (zero when empty).
func (h *Histogram) Min() time.Duration { return h.min }

// Max returns the largest recorded value.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean returns the exact mean (zero when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Quantile returns the value at quantile q in [0,1]: the upper bound of the
// bucket holding the sample of rank ceil(q·n), capped at Max. Zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = max(0, min(q, 1))
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(bucketUpper(i)), h.max)
		}
	}
	return h.max
}

// Summary is the digest of a Histogram that the reports print.
type Summary struct {
	Count uint64        `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize digests h.
func (h *Histogram) Summarize() Summary {
	return Summary{
		Count: h.n,
		Min:   h.min,
		Mean:  h.Mean(),
		P50:   h.Quantile(0.50),
		P90:   h.Quantile(0.90),
		P99:   h.Quantile(0.99),
		P999:  h.Quantile(0.999),
		Max:   h.max,
	}
}
