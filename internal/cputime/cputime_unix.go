//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report it beside their wall time: on a machine shared with other
// work, a benchmark's CPU time says more than its wall time, which waits
// for the other processes.
package cputime

import (
	"syscall"
	"time"
)

// Now returns the CPU time the process has used so far, user and system,
// garbage collection included; 0 if the system does not say.
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
