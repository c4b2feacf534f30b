package measure

import "math"

// Fairness describes how per-client counts are spread.
type Fairness struct {
	Clients int     `json:"clients"`
	Min     uint64  `json:"min"`
	Max     uint64  `json:"max"`
	Mean    float64 `json:"mean"`
	Stddev  float64 `json:"stddev"` // population standard deviation
	// Jain is Jain's fairness index, (Σx)²/(n·Σx²), in [1/n, 1]; it is 1
	// (vacuously fair) when every count is zero.
	Jain float64 `json:"jain"`
}

// FairnessOf computes the spread of counts (one per client).
func FairnessOf(counts []uint64) Fairness {
	f := Fairness{Clients: len(counts)}
	if len(counts) == 0 {
		return f
	}
	f.Min = counts[0]
	var sum, sumSq float64
	for _, c := range counts {
		f.Min = min(f.Min, c)
		f.Max = max(f.Max, c)
		x := float64(c)
		sum += x
		sumSq += x * x
	}
	n := float64(len(counts))
	f.Mean = sum / n
	f.Stddev = math.Sqrt(max(0, sumSq/n-f.Mean*f.Mean))
	f.Jain = 1
	if sumSq > 0 {
		f.Jain = sum * sum / (n * sumSq)
	}
	return f
}
