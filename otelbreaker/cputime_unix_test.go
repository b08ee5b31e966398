//go:build unix

package otelbreaker_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used so far, user and system:
// on a shared machine a benchmark's CPU time says more than its wall
// time, which waits for the other processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
