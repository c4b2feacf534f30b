package measure

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrBadSchedule is returned for a schedule that cannot be followed.
var ErrBadSchedule = errors.New("measure: bad schedule")

// Schedule deals arrivals at a constant total Rate (per second) round-robin
// to Clients clients.
type Schedule struct {
	Rate    float64
	Clients int
}

// Validate reports whether s can be followed.
func (s Schedule) Validate() error {
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
		return fmt.Errorf("%w: rate %v", ErrBadSchedule, s.Rate)
	}
	if s.Clients <= 0 {
		return fmt.Errorf("%w: %d clients", ErrBadSchedule, s.Clients)
	}
	return nil
}

// At returns when client's k-th arrival (k from 0) is due, as an offset from
// the start of the schedule. That is global arrival k·Clients+client.
func (s Schedule) At(client, k int) time.Duration {
	i := float64(k)*float64(s.Clients) + float64(client)
	return time.Duration(math.Round(i / s.Rate * float64(time.Second)))
}

// Count returns how many of client's arrivals are due strictly before
// window, so a worker can size its loop in advance (and the loop is bounded).
func (s Schedule) Count(client int, window time.Duration) int {
	total := s.Total(window)
	if client >= total {
		return 0
	}
	return (total-client-1)/s.Clients + 1
}

// Total returns the number of arrivals due strictly before window over all
// clients.
func (s Schedule) Total(window time.Duration) int {
	if window <= 0 {
		return 0
	}
	// Arrival i is due at round(i/rate s); count the i with that < window.
	n := int(math.Ceil(window.Seconds() * s.Rate))
	for n > 0 && s.atGlobal(n-1) >= window {
		n--
	}
	for s.atGlobal(n) < window {
		n++
	}
	return n
}

func (s Schedule) atGlobal(i int) time.Duration {
	return time.Duration(math.Round(float64(i) / s.Rate * float64(time.Second)))
}
