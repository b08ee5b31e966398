package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startAt makes b look like a breaker that has committed gen transitions and
// is closed: the word's low bits, base at gen, the ring and the buckets on
// gen, and the dispatcher waiting for gen+1.
func startAt(b *Breaker, gen uint64) {
	b.state.Store(pack(word{state: Closed, gen: lowGen(gen)}))
	b.base.Store(gen)
	if b.ring != nil {
		b.ring.Reset(uint32(gen))
	}
	if b.buckets != nil {
		b.buckets.Advance(uint32(gen))
	}
	if b.dispatch != nil {
		b.dispatch.next.Store((gen + 1) & seqMask << 1)
	}
}

// Across the 64-bit wrap of the generation (2^64 transitions: tens of
// thousands of years away, so only a breaker started there reaches it),
// and across the word's 2^20 wraps on the way: permits, notifications,
// base and the windows carry on. base never trails by more than 2^16.
func TestGenerationCrosses64BitWrap(t *testing.T) {
	for name, cfg := range map[string]Config{
		"window=none":  {ConsecutiveFailures: 1},
		"window=count": {WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 100},
		"window=time":  {WindowType: TimeBased, WindowSize: 3, MinimumNumberOfCalls: 1, FailureRateThreshold: 100},
	} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && name != "window=count" {
				t.Skip("2^20 transitions: full runs only")
			}
			start := ^uint64(0) - genSpan/2 // 2^64 - 2^19 - 1
			var last uint64
			bad := ""
			cfg.Clock = NewManualClock(time.Hour)
			cfg.OnStateChange = func(tr Transition) {
				if tr.Generation != last+1 && bad == "" {
					bad = "a notification out of sequence"
				}
				last = tr.Generation
			}
			b, err := New(cfg)
			require.NoError(t, err)
			startAt(b, start)
			last = start
			held, err := b.Allow()
			require.NoError(t, err)
			require.Equal(t, start, held.Generation)
			for i := range genSpan {
				b.Reset()
				if g := b.genOf(b.peek()); g-b.base.Load() > baseStep || g != start+uint64(i)+1 {
					t.Fatalf("after %d Resets: generation %d, base %d", i+1, g, b.base.Load())
				}
			}
			require.Empty(t, bad)
			now := b.Counts()
			require.Equal(t, start+genSpan, now.Generation, "wrapped past 2^64")
			require.Less(t, now.Generation, start)
			require.Equal(t, lowGen(start), lowGen(now.Generation), "the word's field is back where it was")

			b.Record(held, Failure)
			require.Equal(t, now, b.Counts(), "a permit 2^20 transitions old, across the 64-bit wrap, counted")
			p, err := b.Allow()
			require.NoError(t, err)
			require.Equal(t, now.Generation, p.Generation)
			b.Record(p, Failure)
			require.Equal(t, Open, b.State(), "a current failure trips")
			require.Equal(t, now.Generation+1, last)
		})
	}
}
