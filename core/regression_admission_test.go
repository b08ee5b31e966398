package core_test

// Regressions in which half-open admits too many probes (B01-B04 of
// docs/regressions.md): the limit on permitted calls in half-open must hold
// while a probe is out, on every entry point, and must charge the caller that
// moves the breaker from open to half-open.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// B01 (Polly #216): after the break the breaker sent one trial but admitted
// every further call until the trial returned.
func TestRegression_HalfOpenAdmitsOneTrialUntilItReturns(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 4, OpenDuration: 10 * time.Second})
		r.XN(4, F)
		r.Is(core.Open)
		p1 := r.At(10).A()
		r.Is(core.HalfOpen)
		var admitted atomic.Int32
		parallel(100, func(int) {
			if _, err := r.B.Allow(); err == nil {
				admitted.Add(1)
			}
		})
		require.Zero(t, admitted.Load())
		for s := 11; s <= 39; s++ {
			r.At(float64(s)).Reject(core.ErrHalfOpenFull)
		}
		r.At(40).D(p1, F)
		r.Is(core.Open)
		r.At(49.999).Reject(core.ErrOpen)
		r.At(50).A()
		require.Equal(t, []string{"C>O@0", "O>H@10", "H>O@40", "O>H@50"}, r.CBs())
	})
}

// B02 (opossum #119): half-open let all traffic through, and a failed trial
// re-opened only if the rolling error rate was again above threshold, so the
// breaker neither closed nor re-armed its timer.
func TestRegression_FailedTrialReArmsOpenPeriod(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("admission", func(t *testing.T) {
			r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 10 * time.Second})
			r.XN(2, F)
			p := r.At(10).A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(p, S)
			r.Is(core.Closed)
		})
		t.Run("re-arm", func(t *testing.T) {
			r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5, OpenDuration: 30 * time.Second})
			for s := range 5 {
				r.At(float64(s)).X(F)
			}
			r.Is(core.Open)
			p := r.At(34).A()
			r.Is(core.HalfOpen)
			r.D(p, F)
			r.Is(core.Open)
			r.At(63.999).Reject(core.ErrOpen)
			r.At(64).X(S)
			r.Is(core.Closed)
			r.Cnt(0, 0, 0, 0)
		})
	})
}

// B03 (OpenLiberty #7080, failsafe #135): the half-open limit lived in a hook
// that direct users never called, so any number of trials ran and a quick
// success could close the breaker before a slower trial failed.
func TestRegression_HalfOpenLimitHoldsOnEveryEntryPoint(t *testing.T) {
	cfg := core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second}
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("two-step", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			pA := r.At(5).A()
			r.Reject(core.ErrHalfOpenFull)
			r.At(6).D(pA, F)
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>O@6"}, r.CBs())
		})
		t.Run("two-step probes=2", func(t *testing.T) {
			c := cfg
			c.PermittedCallsInHalfOpen = 2
			r := mk.build(t, c)
			r.XN(2, F)
			pA, pB := r.At(5).A(), r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.At(5.5).D(pB, S)
			r.Is(core.HalfOpen)
			r.At(6).D(pA, F)
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>O@6"}, r.CBs())
		})
		t.Run("Do", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			r.At(5)
			release, entered := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				_ = r.call(context.Background(), func(context.Context) error {
					close(entered)
					<-release
					return errFail
				})
			})
			<-entered
			err := r.call(context.Background(), func(context.Context) error { return nil })
			require.ErrorIs(t, err, core.ErrHalfOpenFull)
			r.At(6)
			close(release)
			wg.Wait()
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>O@6"}, r.CBs())
		})
	})
}

// B04 (virtrigaud #70, #100): the caller that flipped open to half-open was
// not charged against the budget, so N permitted calls admitted N+1 probes.
func TestRegression_CallerThatFlipsToHalfOpenIsAProbe(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3}
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("sequential", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			r.At(1)
			a1, a2, a3 := r.A(), r.A(), r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(a1, S)
			r.Is(core.HalfOpen)
			r.D(a2, S)
			r.Is(core.HalfOpen)
			r.D(a3, S)
			r.Is(core.Closed)
		})
		t.Run("concurrent at expiry", func(t *testing.T) {
			for round := range rounds(10000, 200) {
				r := mk.build(t, cfg)
				r.XN(2, F)
				r.At(0.999)
				parallel(64, func(int) { r.Reject(core.ErrOpen) })
				r.Is(core.Open)
				r.At(1)
				var granted atomic.Int32
				parallel(64, func(int) {
					if _, err := r.B.Allow(); err == nil {
						granted.Add(1)
					}
				})
				require.EqualValues(t, 3, granted.Load(), "round %d", round)
				require.Equal(t, []string{"C>O@0", "O>H@1"}, r.CBs(), "round %d", round)
			}
		})
	})
}
