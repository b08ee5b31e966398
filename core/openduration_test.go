package core_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// openFor is an open-duration function that always returns d.
func openFor(d time.Duration) func(int, error) time.Duration {
	return func(int, error) time.Duration { return d }
}

// lastOpenUntil is the OpenUntil of the last notification, which must be
// a transition into Open.
func lastOpenUntil(t *testing.T, r *rig) time.Duration {
	t.Helper()
	trs := r.Transitions()
	require.NotEmpty(t, trs)
	last := trs[len(trs)-1]
	require.Equal(t, core.Open, last.To, "%+v", last)
	return last.OpenUntil
}

// The open-duration function's result is bounded by the documented rule,
// not rejected and not a panic: zero or negative means OpenDuration, above
// MaxOpenDuration means MaxOpenDuration, and the result is kept in whole
// milliseconds, rounded up; a retry-after hint still lengthens it. The
// open deadline (RetryAfter) and the notification's OpenUntil agree.
func TestOpenDurationFuncBounds(t *testing.T) {
	const open, most = 10 * time.Second, time.Minute
	for _, tc := range []struct {
		ret, hint, want time.Duration
	}{
		{ret: 0, want: open},
		{ret: -1, want: open},
		{ret: math.MinInt64, want: open},
		{ret: 1, want: time.Millisecond},
		{ret: 2500 * time.Microsecond, want: 3 * time.Millisecond},
		{ret: 30 * time.Second, want: 30 * time.Second},
		{ret: most, want: most},
		{ret: most + 1, want: most},
		{ret: math.MaxInt64, want: most},
		{ret: 20 * time.Second, hint: 45 * time.Second, want: 45 * time.Second},
		{ret: 50 * time.Second, hint: 45 * time.Second, want: 50 * time.Second},
		{ret: 0, hint: 3 * time.Second, want: open},
	} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxOpenDuration: most,
				MaxRetryAfter: time.Hour, OpenDurationFunc: openFor(tc.ret)})
			if tc.hint > 0 {
				r.B.Done(r.A(), core.WithRetryAfter(errFail, tc.hint))
			} else {
				r.B.Done(r.A(), errFail)
			}
			require.Equal(t, tc.want, r.B.RetryAfter(), "function returns %v, hint %v", tc.ret, tc.hint)
			require.Equal(t, tc.want, lastOpenUntil(t, r))
		})
	}
}

// The function is told the number of consecutive re-opens since the
// breaker last closed (0 for a trip from closed, stopping at 31) and the
// error Done classified as the deciding failure (nil through Record and
// RecordHint), on every path that opens on an outcome: the window's, the
// run of failures', a probe's and a hint's. ForceOpen, a manual HalfOpen
// and MetricsOnly's "would have opened" do not call it; the first two
// reset the count.
func TestOpenDurationFuncArguments(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	wrapped := fmt.Errorf("wrapped: %w", errA)
	type call struct {
		reopens int
		err     error
	}
	for _, window := range []int{0, 3} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			var mu sync.Mutex
			var calls []call
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: time.Hour,
				MaxRetryAfter: time.Minute,
				OpenDurationFunc: func(n int, err error) time.Duration {
					mu.Lock()
					calls = append(calls, call{n, err})
					mu.Unlock()
					return time.Duration(n+1) * time.Second
				}}
			if window > 0 {
				// The window's rule decides, and with no hints a plain
				// error would take Done's own window path but for the
				// function, which needs it.
				c.ConsecutiveFailures, c.WindowSize, c.FailureRateThreshold, c.MaxRetryAfter = 0, window, 100, 0
			}
			r := mk.build(t, c)
			lastCall := func() call {
				mu.Lock()
				defer mu.Unlock()
				require.NotEmpty(t, calls)
				return calls[len(calls)-1]
			}
			ncalls := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(calls)
			}
			trip := func(finish func(core.Permit)) {
				for i := 1; i < max(window, 1); i++ {
					r.X(core.Failure) // with the window's minimum, only the last call trips
				}
				finish(r.A())
			}
			probe := func(finish func(core.Permit)) {
				r.Clock.Advance(r.B.RetryAfter())
				p := r.A()
				require.True(t, p.Probe)
				finish(p)
			}
			trip(func(p core.Permit) { r.B.Done(p, wrapped) })
			require.Equal(t, call{0, wrapped}, lastCall())
			require.Equal(t, time.Second, r.B.RetryAfter())
			probe(func(p core.Permit) { r.B.Done(p, errB) })
			require.Equal(t, call{1, errB}, lastCall())
			require.Equal(t, 2*time.Second, r.B.RetryAfter())
			probe(func(p core.Permit) { r.B.Record(p, core.Failure) })
			require.Equal(t, call{2, nil}, lastCall())
			probe(func(p core.Permit) { r.B.RecordHint(p, 500*time.Millisecond) })
			require.Equal(t, call{3, nil}, lastCall())
			require.Equal(t, 4*time.Second, r.B.RetryAfter()) // the hint is shorter
			probe(func(p core.Permit) { r.B.Done(p, core.WithRetryAfter(errA, time.Millisecond)) })
			require.Equal(t, 4, lastCall().reopens)
			require.ErrorIs(t, lastCall().err, errA)
			for i := 5; i <= 40; i++ {
				probe(func(p core.Permit) { r.B.Record(p, core.Failure) })
				require.Equal(t, call{min(i, core.MaxBackoffSteps), nil}, lastCall())
			}
			probe(func(p core.Permit) { r.B.Done(p, nil) })
			r.Is(core.Closed)
			trip(func(p core.Permit) { r.B.Record(p, core.Failure) })
			require.Equal(t, call{0, nil}, lastCall())

			n := ncalls()
			require.NoError(t, r.B.ForceOpen(time.Second))
			probe(func(p core.Permit) { r.B.Done(p, errA) })
			require.Equal(t, call{1, errA}, lastCall(), "after ForceOpen the count starts again")
			r.B.HalfOpen()
			r.B.Done(r.A(), errB)
			require.Equal(t, call{1, errB}, lastCall(), "after HalfOpen the count starts again")
			r.B.MetricsOnly()
			trip(func(p core.Permit) { r.B.Done(p, errA) })
			require.Equal(t, core.MetricsOnly, r.Transitions()[len(r.Transitions())-1].To)
			require.Equal(t, n+2, ncalls(), "ForceOpen, HalfOpen and metrics-only's trip call nothing")
		})
	}
}

// A panicking function leaves no breaker wedged: the transition commits,
// for OpenDuration, and is notified, and then the panic propagates out of
// the call that ran the function (Done, Record, RecordHint). The breaker
// goes on: its probes are admitted and judged.
func TestOpenDurationFuncPanic(t *testing.T) {
	for _, boom := range []any{"boom", errFail, nil} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second, MaxOpenDuration: time.Minute,
				MaxRetryAfter: time.Minute, OpenDurationFunc: func(int, error) time.Duration { panic(boom) }})
			check := func(f func()) {
				t.Helper()
				var got any
				func() {
					defer func() { got = recover() }()
					f()
				}()
				require.NotNil(t, got, "the panic propagates") // panic(nil): a *runtime.PanicNilError
				if boom != nil {
					require.Equal(t, boom, got)
				}
				r.Is(core.Open)
				require.Equal(t, 5*time.Second, r.B.RetryAfter(), "OpenDuration")
				require.Equal(t, 5*time.Second, lastOpenUntil(t, r)-r.Clock.Now())
			}
			check(func() { r.B.Done(r.A(), errFail) })
			require.Equal(t, []string{"C>O@0"}, r.CBs())

			r.At(5)
			p := r.A()
			require.True(t, p.Probe, "the breaker is not wedged: the open duration ends")
			check(func() { r.B.Record(p, core.Failure) })
			r.At(10)
			check(func() { r.B.RecordHint(r.A(), time.Second) })
			r.At(15)
			r.B.Done(r.A(), nil)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>O@5", "O>H@10", "H>O@10", "O>H@15", "H>C@15"}, r.CBs())
		})
	}
}

// The jitter lengthens every open duration by a fraction of it up to
// OpenDurationJitter: the trip's, the one a hint sets, ForceOpen's and a
// breaker's that starts open, and never past MaxOpenDurationLimit. The
// fraction is a hash of the transition's reading and generation: the same
// on both implementations (pinned here, so that a change of the rule on
// both sides at once shows), and spread across readings, so that breakers
// that trip at different readings probe at different times.
func TestOpenDurationJitter(t *testing.T) {
	const open = 10 * time.Second
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: open, OpenDurationJitter: 1})
		r.X(core.Failure)
		// ceil(10 s in ms) * (fmix64(0 + 1*0x9e3779b97f4a7c15) >> 32) / 2^32, in
		// whole ms: the rule's value at reading 0, generation 1, computed
		// apart from both implementations.
		require.Equal(t, 16118*time.Millisecond, r.B.RetryAfter())

		r = mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: open, OpenDurationJitter: 0.5})
		seen := map[time.Duration]bool{}
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for i := range 200 {
			r.B.Reset()
			r.Clock.Advance(1300 * time.Microsecond)
			r.X(core.Failure)
			d := lastOpenUntil(t, r) - r.Clock.Now()
			require.Equal(t, d, r.B.RetryAfter())
			require.GreaterOrEqual(t, d, open, "trip %d", i)
			require.LessOrEqual(t, d, open+open/2+time.Millisecond, "trip %d", i)
			seen[d] = true
			lo, hi = min(lo, d), max(hi, d)
		}
		require.Greater(t, len(seen), 150, "the jitter spreads the deadlines")
		require.Less(t, lo, open+open/10)
		require.Greater(t, hi, open+open/2-open/10)
	})
	for _, tc := range []struct {
		name     string
		cfg      core.Config
		open     func(r *rig)
		min, max time.Duration
	}{
		{"hint", core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxRetryAfter: time.Minute},
			func(r *rig) { r.B.RecordHint(r.A(), 30*time.Second) }, 30 * time.Second, 60 * time.Second},
		{"force open", core.Config{ConsecutiveFailures: 1, OpenDuration: open},
			func(r *rig) { require.NoError(r.t, r.B.ForceOpen(20*time.Second)) }, 20 * time.Second, 40 * time.Second},
		{"force open at the limit", core.Config{ConsecutiveFailures: 1, OpenDuration: open},
			func(r *rig) { require.NoError(r.t, r.B.ForceOpen(core.MaxOpenDurationLimit)) }, core.MaxOpenDurationLimit, core.MaxOpenDurationLimit},
		{"function", core.Config{ConsecutiveFailures: 1, OpenDuration: open, MaxOpenDuration: time.Minute, OpenDurationFunc: openFor(time.Minute)},
			func(r *rig) { r.X(core.Failure) }, time.Minute, 2 * time.Minute},
		{"initial state", core.Config{ConsecutiveFailures: 1, OpenDuration: open, InitialState: core.Open},
			func(*rig) {}, open, 2 * open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				var got []time.Duration
				for _, at := range []time.Duration{0, 7 * time.Millisecond, time.Hour + 3} {
					c := tc.cfg
					c.OpenDurationJitter, c.Clock = 1, core.NewManualClock(at)
					r := mk.build(t, c)
					tc.open(r)
					r.Is(core.Open)
					d := r.B.RetryAfter()
					require.GreaterOrEqual(t, d, tc.min)
					require.LessOrEqual(t, d, tc.max+time.Millisecond)
					got = append(got, d)
				}
				if tc.min != tc.max {
					require.NotEqual(t, got[0], got[1], "readings that differ give their own jitter")
				}
			})
		})
	}
}
