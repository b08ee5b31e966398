package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A caller at a fixed interval must not be admitted or shed in runs: the
// ramp decision hashes the clock reading, and a weak hash turns a fixed
// step into a fixed increment (a single multiply did: about 35 rejections
// in a row, then 50 admissions, for a caller every 1 ms at 60 %).
func TestRampAdmitsFixedStepsIndependently(t *testing.T) {
	s, err := Config{ConsecutiveFailures: 1, RampUpDuration: 1000 * time.Second, RampUpStartPercent: 60}.Validate()
	require.NoError(t, err)
	remaining := s.rampUp.span // the start of the ramp: the share is 60 %
	for _, step := range []time.Duration{time.Millisecond, time.Microsecond, 10 * time.Millisecond, time.Second} {
		const n = 10_000
		admitted, run, longest := 0, 0, 0
		last := false
		for i := range n {
			a := s.rampAdmits(remaining, time.Hour+time.Duration(i)*step)
			if a {
				admitted++
			}
			if i > 0 && a == last {
				run++
			} else {
				run = 1
			}
			longest, last = max(longest, run), a
		}
		require.InDelta(t, 0.60, float64(admitted)/n, 0.02, "step %v", step)
		// Independent decisions at 60/40 make a run of 25 about a 1-in-10^5
		// event over 10,000 calls.
		require.Less(t, longest, 25, "step %v: a run of %d equal decisions", step, longest)
	}
}
