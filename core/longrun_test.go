package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// Long outages: the breaker flaps open -> half-open -> open for so many
// generations that the windows' narrower generation arithmetic (16 bits in
// the count ring, 24 in the buckets) reads the current generation as older
// than what they hold, and (full run) the state word's 20-bit generation
// field wraps.
// When the dependency recovers, the window must count again and the breaker
// must be able to trip again. (The count ring used to drop every outcome
// after 2^15 silent generations, and the buckets after the 20-bit wrap, so
// the breaker could never trip again.)
func TestLongOutageKeepsWindowsCounting(t *testing.T) {
	// Before the first recovery, then before the second: in the full run the
	// first outage ends just before the word's 20-bit wrap and the second
	// crosses it.
	outages := []int{10, 20000}
	if !testing.Short() {
		outages = []int{wordGens/2 - 20, 20000}
	}
	for _, cfg := range []core.Config{
		{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Millisecond},
		{WindowType: core.TimeBased, WindowSize: 5, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Millisecond},
	} {
		t.Run(cfg.WindowType.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				clock := core.NewManualClock(0)
				cfg.Clock = clock
				b, err := mk.new(cfg)
				require.NoError(t, err)
				call := func(o core.Outcome) {
					p, err := b.Allow()
					require.NoError(t, err)
					b.Record(p, o)
				}
				call(core.Failure)
				call(core.Failure)
				for _, cycles := range outages {
					require.Equal(t, core.Open, b.State())
					for range cycles {
						clock.Advance(time.Millisecond)
						call(core.Failure) // the probe fails: open again
					}
					clock.Advance(time.Millisecond)
					call(core.Success)
					require.Equal(t, core.Closed, b.State())
					call(core.Failure)
					c := b.Counts()
					require.Equal(t, uint64(1), c.Calls, "the window counts again at generation %d", c.Generation)
					call(core.Failure)
					require.Equal(t, core.Open, b.State(), "and the breaker trips again")
				}
			})
		})
	}
}
