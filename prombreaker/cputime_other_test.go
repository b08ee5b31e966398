//go:build !unix

package prombreaker_test

import "time"

// cpuTime is not measured here: the benchmarks report a CPU time of 0.
func cpuTime() time.Duration { return 0 }
