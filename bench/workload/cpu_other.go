//go:build !unix

package workload

import "time"

func selfCPU() time.Duration { return 0 }

func loadAvg() float64 { return -1 }
