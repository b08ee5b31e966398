package resilience_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/resilience"
)

func TestBulkheadAdmitsAtMostN(t *testing.T) {
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 2}))(t)
	ctx := context.Background()
	require.NoError(t, b.Acquire(ctx))
	require.True(t, b.TryAcquire())
	require.ErrorIs(t, b.Acquire(ctx), resilience.ErrBulkheadFull)
	require.False(t, b.TryAcquire())
	require.Equal(t, 2, b.InFlight())
	b.Release()
	require.True(t, b.TryAcquire())
	b.Release()
	b.Release()
	require.Equal(t, 0, b.InFlight())
	require.Zero(t, testing.AllocsPerRun(100, func() {
		_ = b.Acquire(ctx)
		b.Release()
	}))
}

// TestBulkheadNeverAdmitsNPlusOne: 512 goroutines, each taking a slot, holding
// it while it counts the calls in flight, and giving it back, over and over
// again; the most ever in flight is exactly N, and every admission is
// accounted for.
func TestBulkheadNeverAdmitsNPlusOne(t *testing.T) {
	const n, goroutines, rounds = 8, 512, 50
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: n}))(t)
	var inside, most, admitted atomic.Int64
	storm(goroutines, func() {
		for range rounds {
			if !b.TryAcquire() {
				continue
			}
			admitted.Add(1)
			now := inside.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			inside.Add(-1)
			b.Release()
		}
	})
	require.LessOrEqual(t, most.Load(), int64(n))
	require.Positive(t, admitted.Load())
	require.Equal(t, 0, b.InFlight())
}

// TestBulkheadHoldsExactlyN: 512 goroutines race for 8 slots that nobody
// gives back; exactly 8 get one.
func TestBulkheadHoldsExactlyN(t *testing.T) {
	const n, goroutines = 8, 512
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: n}))(t)
	var admitted atomic.Int64
	storm(goroutines, func() {
		if b.TryAcquire() {
			admitted.Add(1)
		}
	})
	require.Equal(t, int64(n), admitted.Load())
	require.Equal(t, n, b.InFlight())
}

// waiter is a bulkhead of one slot, taken, on a manual timer, with a call
// that waits up to maxWait for the slot (with ctx) and whose Acquire error
// comes on the channel; it returns once that call waits.
func waiter(t *testing.T, ctx context.Context, maxWait time.Duration) (*resilience.ManualTimer, *resilience.Bulkhead, <-chan error) {
	t.Helper()
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1, MaxWait: maxWait, Timer: tm}))(t)
	require.True(t, b.TryAcquire())
	out := make(chan error, 1)
	go func() { out <- b.Acquire(ctx) }()
	tm.AwaitSleepers(1)
	return tm, b, out
}

func TestBulkheadWaitGetsReleasedSlot(t *testing.T) {
	tm, b, out := waiter(t, context.Background(), time.Second)
	b.Release()
	require.NoError(t, <-out)
	require.Equal(t, 1, b.InFlight())
	require.Equal(t, time.Duration(0), tm.Now(), "the slot came without time passing")
	b.Release()
}

func TestBulkheadWaitTimesOut(t *testing.T) {
	tm, b, out := waiter(t, context.Background(), time.Second)
	tm.Advance(time.Second - 1)
	require.False(t, done(out))
	tm.Advance(1)
	require.ErrorIs(t, <-out, resilience.ErrBulkheadFull)
	require.Equal(t, 1, b.InFlight())
}

func TestBulkheadWaitEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, b, out := waiter(t, ctx, time.Hour)
	cancel()
	require.ErrorIs(t, <-out, context.Canceled)
	require.Equal(t, 1, b.InFlight())
}

// TestBulkheadWaitersAllServed: 64 waiters on 4 slots, each holder giving its
// slot back; every waiter gets a slot in the end, none waits forever.
func TestBulkheadWaitersAllServed(t *testing.T) {
	const n, waiters = 4, 64
	tm := resilience.NewManualTimer(core.NewManualClock(0))
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: n, MaxWait: time.Hour, Timer: tm}))(t)
	for range n {
		require.True(t, b.TryAcquire())
	}
	var wg sync.WaitGroup
	var served atomic.Int64
	wg.Add(waiters)
	for range waiters {
		go func() {
			defer wg.Done()
			if b.Acquire(context.Background()) == nil {
				served.Add(1)
				b.Release()
			}
		}()
	}
	tm.AwaitSleepers(waiters)
	for range n {
		b.Release()
	}
	wg.Wait()
	require.Equal(t, int64(waiters), served.Load())
	require.Equal(t, 0, b.InFlight())
}

// wakeProbe is a timer that records, at each Sleep, how many wake-up
// tokens are pending.
type wakeProbe struct {
	*resilience.ManualTimer
	pending []int
}

func (p *wakeProbe) Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	p.pending = append(p.pending, len(wake))
	return p.ManualTimer.Sleep(ctx, d, wake)
}

// TestBulkheadLeavesNoStaleWakeUp: a Release leaves a wake-up token only
// while a call waits; a wait that has ended, by its deadline here, no
// longer counts as one, so the next wait finds no token left for nobody
// (which would end its first sleep at once, for nothing).
func TestBulkheadLeavesNoStaleWakeUp(t *testing.T) {
	tm := &wakeProbe{ManualTimer: resilience.NewSteppingTimer(nil)}
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1, MaxWait: time.Second, Timer: tm}))(t)
	for range 2 {
		require.True(t, b.TryAcquire())
		require.ErrorIs(t, b.Acquire(context.Background()), resilience.ErrBulkheadFull, "the wait ends at its deadline")
		b.Release()
	}
	require.Equal(t, []int{0, 0}, tm.pending)
}

func TestBulkheadFullIsIgnored(t *testing.T) {
	require.ErrorIs(t, resilience.ErrBulkheadFull, core.ErrIgnored)
	require.Equal(t, core.Ignored, core.DefaultClassifier(fmt.Errorf("call: %w", resilience.ErrBulkheadFull)))
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		br := newBreaker(core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0)})
		bh := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1}))(t)
		require.True(t, bh.TryAcquire())
		s := mustStack(t, resilience.WithBreaker(br), resilience.WithBulkhead(bh))
		for range 10 {
			_, err := resilience.Do(context.Background(), s, (&dep{}).call)
			require.ErrorIs(t, err, resilience.ErrBulkheadFull)
		}
		require.Equal(t, core.Closed, br.State(), "a full bulkhead tripped the breaker")
	})
}

// TestBulkheadFullReturnsProbeSlot: a half-open probe that meets a full
// bulkhead gives its probe slot back, so the next call probes.
func TestBulkheadFullReturnsProbeSlot(t *testing.T) {
	forEachImpl(t, func(t *testing.T, newBreaker func(core.Config) breakers.Breaker) {
		clock := core.NewManualClock(0)
		br := newBreaker(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 1, Clock: clock})
		bh := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1}))(t)
		s := mustStack(t, resilience.WithBreaker(br), resilience.WithBulkhead(bh))
		_, err := resilience.Do(context.Background(), s, (&dep{fail: always(errDown)}).call)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, core.Open, br.State())
		clock.Advance(time.Second)

		require.True(t, bh.TryAcquire()) // someone else holds the only slot
		_, err = resilience.Do(context.Background(), s, (&dep{}).call)
		require.ErrorIs(t, err, resilience.ErrBulkheadFull)
		require.Equal(t, core.HalfOpen, br.State())
		bh.Release()

		d := &dep{}
		_, err = resilience.Do(context.Background(), s, d.call)
		require.NoError(t, err, "the probe slot was not given back")
		require.Equal(t, 1, d.calls)
		require.Equal(t, core.Closed, br.State())
	})
}

func TestBulkheadReleaseWithoutAcquirePanics(t *testing.T) {
	b := must(resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1}))(t)
	require.PanicsWithValue(t, "resilience: Bulkhead.Release without a matching Acquire", b.Release)
	require.Equal(t, 0, b.InFlight())
	require.True(t, b.TryAcquire())
}

func TestNewBulkheadErrors(t *testing.T) {
	_, err := resilience.NewBulkhead(resilience.BulkheadConfig{MaxWait: -1})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	require.ErrorContains(t, err, "BulkheadConfig.MaxConcurrent 0 is outside 1..")
	require.ErrorContains(t, err, "BulkheadConfig.MaxWait -1ns is outside 0..8760h0m0s")
	_, err = resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 1, MaxWait: resilience.MaxBulkheadWait + 1})
	require.ErrorContains(t, err, "BulkheadConfig.MaxWait 8760h0m0.000000001s is outside")
	_, err = resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: resilience.MaxBulkheadConcurrent + 1})
	require.ErrorContains(t, err, "BulkheadConfig.MaxConcurrent")
	_, err = resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: resilience.MaxBulkheadConcurrent, MaxWait: resilience.MaxBulkheadWait})
	require.NoError(t, err, "the largest values")
	var zero resilience.Bulkhead
	require.PanicsWithValue(t, "resilience: Bulkhead used without NewBulkhead", func() { zero.TryAcquire() })
}
