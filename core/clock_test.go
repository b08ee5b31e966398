package core_test

// Clock readings at the extremes: a clock within a year of math.MaxInt64,
// and the zero SystemClock, whose readings once saturated there.

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// The deadline arithmetic, now+d rounded up to a whole millisecond, could
// overflow int64 when the clock is within a year (MaxOpenDuration) of
// math.MaxInt64, in either implementation: a baseline deadline that went
// negative would make the breaker half-open at once (open duration
// skipped, R4); the lock-free word would get uint64(negative)%2^36, an
// arbitrary deadline, and the two would disagree. R14/R15: "never a huge
// unsigned value", "no sentinel by wrap-around". Both stay open for the
// open duration.
func TestDeadlineNearMaxClockDoesNotOverflow(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute})
		r.Clock.Set(time.Duration(math.MaxInt64 - int64(30*time.Second)))
		r.X(core.Failure)
		r.Is(core.Open) // R5: one nanosecond after the trip, still open
		r.Clock.Advance(time.Second)
		p, err := r.B.Allow()
		require.ErrorIs(t, err, core.ErrOpen, "1 s after a trip with a 1 min open duration")
		require.LessOrEqual(t, p.RetryAfter, time.Minute)
	})
}

// The realistic trigger of TestDeadlineNearMaxClockDoesNotOverflow: a zero
// SystemClock that measured from the zero time.Time would be frozen at the
// overflow point, since time.Since(time.Time{}) saturates at math.MaxInt64,
// and a breaker built with Config{Clock: core.SystemClock{}} would never
// stay open: the open duration skipped on every trip (and a time window
// never sliding). The zero SystemClock measures from a process-wide base
// (like ManualClock{}, it is ready to use), so both implementations accept
// it and stay open.
func TestZeroSystemClockKeepsOpenDuration(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		b, err := mk.new(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, Clock: core.SystemClock{}})
		require.NoError(t, err)
		t.Logf("SystemClock{}.Now() = %v", core.SystemClock{}.Now())
		p, _ := b.Allow()
		b.Record(p, core.Failure)
		_, err = b.Allow()
		require.ErrorIs(t, err, core.ErrOpen, "right after a trip with a 1 min open duration (state %v)", b.State())
	})
}
