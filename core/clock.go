package core

import (
	"time"
	_ "unsafe" // for go:linkname

	"go.uber.org/atomic"
)

// Clock is the breaker's only source of time: a monotonic reading, as a
// duration since an arbitrary base. Implementations must be safe for
// concurrent use. A reading that goes backwards is tolerated: the breaker
// treats the elapsed time as zero and never brings evicted data back.
type Clock interface {
	Now() time.Duration
}

// SystemClock reads Go's monotonic clock as the time since its base. It
// never goes through Unix time, which would drop the monotonic reading and
// let a wall-clock step pin a breaker open or skip its open period (a bug other
// breakers have had). NewSystemClock's base is its construction; the
// zero value is ready to use too and measures from a process-wide base,
// taken when this package was initialized.
type SystemClock struct {
	// since is the process-wide reading at the clock's base: zero for the
	// zero value, whose base is the process-wide one.
	since time.Duration
}

// processNano and processBase are the process-wide base of every
// SystemClock: the runtime's monotonic clock in nanoseconds, and the
// wall-clock time taken right after it, for Wall.
var (
	processNano = nanotime()
	processBase = time.Now()
)

// nanotime is the runtime's monotonic clock, the reading time.Now and
// time.Since take their monotonic part from. Now calls it directly: through
// time.Since it cost two more calls a reading, and every time-window
// outcome reads the clock. The runtime keeps it
// reachable by linkname for the packages that read it this way.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// NewSystemClock returns a SystemClock whose base is now.
func NewSystemClock() SystemClock { return SystemClock{since: time.Duration(nanotime() - processNano)} }

// Now returns the monotonic time elapsed since the clock's base. It is
// small enough to inline where the caller holds a SystemClock, as the
// breaker does for its default clock.
func (c SystemClock) Now() time.Duration { return time.Duration(nanotime()-processNano) - c.since }

// origin is the runtime-clock reading at c's base: Now is readSystem(origin).
func (c SystemClock) origin() int64 { return processNano + int64(c.since) }

// readSystem is the reading of a SystemClock whose origin is origin, for
// the breaker, which keeps that sum rather than the clock: one load and one
// subtraction a reading instead of two of each.
func readSystem(origin int64) time.Duration { return time.Duration(nanotime() - origin) }

// ManualClock is a Clock that moves only when told: for tests, simulations and
// the examples. The zero value reads 0 and is ready to use. All methods are
// safe for concurrent use; a Set or Advance synchronizes before every Now that
// observes it.
type ManualClock struct {
	now atomic.Int64 // first word: 64-bit aligned on 32-bit platforms
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Duration) *ManualClock {
	c := &ManualClock{}
	c.now.Store(int64(start))
	return c
}

// Now returns the current reading.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Set moves the clock to t, forwards or backwards.
func (c *ManualClock) Set(t time.Duration) { c.now.Store(int64(t)) }

// Advance moves the clock by d (negative d moves it backwards) and returns
// the new reading.
func (c *ManualClock) Advance(d time.Duration) time.Duration {
	return time.Duration(c.now.Add(int64(d)))
}
