package core_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// The hot path allocates nothing, in every state, for both implementations:
// Allow, Done with nil and with an error, Record, the rejections, State and
// Counts.
func TestNoAllocationsInAnyState(t *testing.T) {
	errDown := errors.New("down")
	ctx := context.Background()
	okCall := func(context.Context) (int, error) { return 1, nil }
	configs := map[string]core.Config{
		"count":       {WindowSize: 100, FailureRateThreshold: 60},
		"time":        {WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 60},
		"time/100ms":  {WindowType: core.TimeBased, WindowSize: 10, BucketWidth: 100 * time.Millisecond, FailureRateThreshold: 60},
		"consecutive": {ConsecutiveFailures: 5},
		"slow":        {WindowSize: 100, FailureRateThreshold: 60, SlowCallRateThreshold: 50, SlowCallDurationThreshold: time.Second},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				cfg.OpenDuration = time.Second
				cfg.PermittedCallsInHalfOpen = 2
				cfg.MinimumNumberOfCalls = 0
				r := mk.build(t, cfg)
				allocs := func(what string, fn func()) {
					t.Helper()
					require.Zero(t, testing.AllocsPerRun(200, fn), what)
				}
				allocs("closed success", func() { p, _ := r.B.Allow(); r.B.Done(p, nil) })
				allocs("closed ignored", func() { p, _ := r.B.Allow(); r.B.Record(p, core.Ignored) })
				allocs("closed state/counts", func() { _, _ = r.B.State(), r.B.Counts() })
				// Failures alternate with successes so the breaker stays closed.
				allocs("closed failure", func() {
					p, _ := r.B.Allow()
					r.B.Done(p, errDown)
					p, _ = r.B.Allow()
					r.B.Done(p, nil)
				})
				r.Is(core.Closed)

				for r.B.State() == core.Closed {
					p, _ := r.B.Allow()
					r.B.Done(p, errDown)
				}
				allocs("open reject", func() { _, _ = r.B.Allow() })
				allocs("open reject's wait", func() { _, err := r.B.Allow(); _ = core.RetryAfterOf(err) })
				allocs("open reject through Do", func() { _, _ = core.Do(ctx, r.B, okCall) })
				allocs("open state/counts", func() { _, _ = r.B.State(), r.B.Counts() })
				allocs("open RetryAfter", func() { _ = r.B.RetryAfter() })

				r.Clock.Advance(time.Second)
				p := r.A() // open -> half-open
				allocs("half-open probe released", func() { q, _ := r.B.Allow(); r.B.Record(q, core.Ignored) })
				q := r.A()
				allocs("half-open full", func() { _, _ = r.B.Allow() })
				allocs("half-open full's wait", func() { _, err := r.B.Allow(); _ = core.RetryAfterOf(err) })
				allocs("half-open full RetryAfter", func() { _ = r.B.RetryAfter() })
				allocs("half-open stale", func() { r.B.Done(core.Permit{}, errDown) })
				r.D(p, core.Success)
				r.D(q, core.Success)
				r.Is(core.Closed)
			})
		})
	}
}

// The memory of one lock-free breaker stays bounded however many Ps the
// process has: at most 2 KiB with a count window of 100 calls and 8 KiB
// with a time window of 60 s at GOMAXPROCS=16 (the time window's success
// stripes grow with GOMAXPROCS up to eight). Bytes are what New allocates,
// size classes included, read from runtime.MemStats.
func TestBreakerMemoryBound(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	for _, c := range []struct {
		name  string
		cfg   core.Config
		limit uint64
	}{
		{"count100", core.Config{WindowSize: 100, FailureRateThreshold: 50}, 2048},
		{"time60", core.Config{WindowType: core.TimeBased, WindowSize: 60, FailureRateThreshold: 50}, 8192},
		// time60's 60 buckets, 100 ms wide (TestTimeWindowMemoryIsPerBucket).
		{"time6/100ms", core.Config{WindowType: core.TimeBased, WindowSize: 6, BucketWidth: 100 * time.Millisecond, FailureRateThreshold: 50}, 8192},
	} {
		var b *core.Breaker
		bytes := allocatedBy(func() { b, _ = core.New(c.cfg) })
		require.NotNil(t, b)
		t.Logf("%s at GOMAXPROCS=16: %d B", c.name, bytes)
		require.LessOrEqual(t, bytes, c.limit, c.name)
	}
}

// A time window's memory is a function of its number of buckets, not of
// their width: in both implementations a window of N buckets allocates the
// same bytes at every width, from few buckets to MaxTimeBuckets. So the
// memory bounds above, stated for windows of 1 s buckets, hold for the
// same number of buckets at any width, and the largest window of any width
// is the largest of 1 s (a window of N seconds at width w has N x 1 s / w
// buckets).
func TestTimeWindowMemoryIsPerBucket(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	for _, n := range []int{40, 600, core.MaxTimeBuckets} {
		for _, im := range impls {
			bytesOf := func(width time.Duration) uint64 {
				cfg := core.Config{WindowType: core.TimeBased, WindowSize: n / int(time.Second/width), BucketWidth: width, FailureRateThreshold: 50}
				var b breakers.Breaker
				bytes := allocatedBy(func() { b, _ = im.New(cfg) })
				require.NotNil(t, b, "%s %+v", im.Name, cfg)
				return bytes
			}
			want := bytesOf(time.Second)
			for _, width := range []time.Duration{core.MinBucketWidth, 125 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond} {
				require.Equal(t, want, bytesOf(width), "%s, %d buckets of %v", im.Name, n, width)
			}
			t.Logf("%s, %d buckets, GOMAXPROCS=16: %d B at every width", im.Name, n, want)
		}
	}
}

// allocatedBy is the number of heap bytes fn allocates, the least of
// several runs: what else allocates meanwhile (the race detector's runtime,
// another package's test under make test's load) only ever adds bytes, and
// the median still took 16 of them once under make test.
func allocatedBy(fn func()) uint64 {
	var runs [5]uint64
	for i := range runs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		runs[i] = after.TotalAlloc - before.TotalAlloc
	}
	return slices.Min(runs[:])
}

// A trip, a re-open, a close and a stale outcome, with a listener that
// allocates nothing, and Do, allocate nothing in either implementation, for
// both window types.
func TestNoAllocOnTransitionsAndDo(t *testing.T) {
	for _, wt := range []core.WindowType{core.CountBased, core.TimeBased} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			clock := core.NewManualClock(0)
			var n atomic.Int64
			b, err := mk.new(core.Config{WindowType: wt, WindowSize: 10, FailureRateThreshold: 50,
				MinimumNumberOfCalls: 1, ConsecutiveFailures: 1, OpenDuration: time.Millisecond,
				SlowCallDurationThreshold: time.Second, PermittedCallsInHalfOpen: 3,
				Clock: clock, OnStateChange: func(core.Transition) { n.Add(1) }})
			require.NoError(t, err)
			cycle := func() {
				p, _ := b.Allow()
				b.Done(p, errFail) // trip
				clock.Advance(time.Millisecond)
				p, _ = b.Allow()   // half-open
				b.Done(p, errFail) // re-open
				clock.Advance(time.Millisecond)
				p, _ = b.Allow()
				q, _ := b.Allow()
				r, _ := b.Allow()
				b.Done(q, context.Canceled)
				b.Done(p, nil)
				b.Done(r, nil)
				s, _ := b.Allow()
				b.Done(s, nil) // third success: closes
				b.Done(q, nil) // stale
			}
			require.Zero(t, testing.AllocsPerRun(500, cycle), "window %v", wt)
			require.Equal(t, core.Closed, b.State())
			ctx := context.Background()
			fn := func(context.Context) (int, error) { return 1, nil }
			require.Zero(t, testing.AllocsPerRun(500, func() { _, _ = core.Do(ctx, b, fn) }), "Do")
		})
	}
}

// The feature paths allocate nothing in either implementation: ramping Allow
// (admitted and shed), forced-open rejection, disabled and metrics-only
// calls (including "would have opened" trips), Done with a pre-built hinted
// error (RecordHint's trip), the manual controls, a max-wait restart,
// Metrics, all with metrics and a listener on.
func TestNoAllocsOnFeaturePaths(t *testing.T) {
	hintErr := core.WithRetryAfter(errFail, 2*time.Second)
	forEachImpl(t, func(t *testing.T, mk maker) {
		clk := core.NewManualClock(0)
		b, err := mk.new(core.Config{WindowSize: 10, MinimumNumberOfCalls: 1, FailureRateThreshold: 100,
			OpenDuration: time.Second, MaxWaitInHalfOpen: time.Second, RampUpDuration: time.Hour, RampUpStartPercent: 50,
			MaxRetryAfter: time.Minute, CollectMetrics: true, Clock: clk, OnStateChange: func(core.Transition) {}})
		require.NoError(t, err)
		allocs := func(what string, fn func()) {
			t.Helper()
			require.Zero(t, testing.AllocsPerRun(100, fn), what)
		}
		// Trip, probe, close: ramping.
		p, _ := b.Allow()
		b.Done(p, errFail)
		clk.Advance(time.Second)
		p, _ = b.Allow()
		b.Done(p, nil)
		require.Equal(t, core.Closed, b.State())
		allocs("ramping allow", func() {
			clk.Advance(time.Microsecond)
			if p, err := b.Allow(); err == nil {
				b.Done(p, nil)
			}
		})
		allocs("metrics", func() { _ = b.Metrics() })
		allocs("hinted trip and reset", func() {
			b.Reset()
			p, _ := b.Allow()
			b.Done(p, hintErr)
		})
		allocs("forced open", func() {
			_ = b.ForceOpen(0)
			_, _ = b.Allow()
		})
		allocs("disabled", func() {
			b.Disable()
			p, _ := b.Allow()
			b.Done(p, errFail)
		})
		allocs("metrics-only would have opened", func() {
			b.MetricsOnly()
			p, _ := b.Allow()
			b.Done(p, errFail)
			p, _ = b.Allow()
			b.Done(p, nil)
		})
		require.NoError(t, b.ForceOpen(time.Millisecond))
		clk.Advance(2 * time.Millisecond)
		_, err = b.Allow()
		require.NoError(t, err)
		allocs("max-wait restart", func() {
			clk.Advance(time.Second)
			_, _ = b.Allow()
		})
	})
}
