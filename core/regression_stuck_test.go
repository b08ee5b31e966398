package core_test

// Regressions in which a breaker got stuck in half-open (B05-B08 and B22 of
// docs/regressions.md): every probe either decides the half-open verdict or
// gives its slot back, whether its outcome is ignored, cancelled, panics,
// is abandoned, or falls below the minimum number of calls.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// B05 (resilience4j #544, opossum #388): an ignored error from the last
// half-open call neither recorded an outcome nor returned the permit, so the
// breaker stayed half-open for good.
func TestRegression_IgnoredProbeReturnsSlot(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("probes=3", func(t *testing.T) {
			r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5, OpenDuration: 10 * time.Second,
				PermittedCallsInHalfOpen: 3, Classifier: classify})
			r.XN(5, F)
			r.At(10)
			p1, p2, p3 := r.A(), r.A(), r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(p1, S)
			r.D(p2, S)
			r.Is(core.HalfOpen)
			r.B.Done(p3, errIgnored)
			r.Is(core.HalfOpen)
			p5 := r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(p5, S)
			r.Is(core.Closed)
			r.Cnt(0, 0, 0, 0)
		})
		t.Run("probes=1", func(t *testing.T) {
			r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5, OpenDuration: 10 * time.Second, Classifier: classify})
			r.XN(5, F)
			p := r.At(10).A()
			r.B.Done(p, errIgnored)
			r.Is(core.HalfOpen)
			require.Equal(t, []string{"C>O@0", "O>H@10"}, r.CBs())
			r.X(S)
			r.Is(core.Closed)
		})
	})
}

// B06 (Hystrix #1621, monix #1080): a half-open command cancelled by its
// caller marked neither success nor failure and the circuit stayed stuck.
func TestRegression_CancelledProbeFreesSlot(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second}
	for _, tc := range []struct {
		name   string
		result func(ctx context.Context) error
		want   core.State
	}{
		{"canceled", func(ctx context.Context) error { return ctx.Err() }, core.HalfOpen},
		{"wrapped canceled", func(ctx context.Context) error { return errors.Join(errFail, ctx.Err()) }, core.HalfOpen},
		{"deadline exceeded", func(context.Context) error { return context.DeadlineExceeded }, core.Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, cfg)
				r.XN(2, F)
				r.At(5)
				ctx, cancel := context.WithCancel(context.Background())
				err := r.call(ctx, func(ctx context.Context) error {
					r.At(5.5)
					cancel()
					return tc.result(ctx)
				})
				require.Error(t, err)
				r.Is(tc.want)
				if tc.want == core.Open {
					r.At(10.499).Reject(core.ErrOpen)
					r.At(10.5).A()
					return
				}
				r.Cnt(0, 0, 0, 0)
				r.X(S)
				r.Is(core.Closed)
			})
		})
	}
}

// B07 (resilience4j #2324): a throwing classifier leaked the half-open
// permit; after enough throws nothing could be admitted.
func TestRegression_PanickingClassifierReleasesPermit(t *testing.T) {
	errBoom := errors.New("boom")
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second, PermittedCallsInHalfOpen: 2,
		Classifier: func(err error) core.Outcome {
			if errors.Is(err, errBoom) {
				panic("classifier exploded")
			}
			return core.DefaultClassifier(err)
		}}
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("classifier panics", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			r.At(5)
			for range 2 {
				require.PanicsWithValue(t, "classifier exploded", func() {
					_ = r.call(context.Background(), func(context.Context) error { return errBoom })
				})
				r.Is(core.HalfOpen)
			}
			p1, p2 := r.A(), r.A()
			r.Reject(core.ErrHalfOpenFull)
			r.D(p1, S)
			r.D(p2, S)
			r.Is(core.Closed)
		})
		t.Run("function panics in half-open", func(t *testing.T) {
			c := cfg
			c.PermittedCallsInHalfOpen = 1
			r := mk.build(t, c)
			r.XN(2, F)
			r.At(5)
			require.PanicsWithValue(t, "boom", func() {
				_ = r.call(context.Background(), func(context.Context) error { panic("boom") })
			})
			r.Is(core.Open)
			r.At(9.999).Reject(core.ErrOpen)
			r.At(10).A()
		})
		t.Run("function panics in closed", func(t *testing.T) {
			r := mk.build(t, cfg)
			for range 2 {
				require.Panics(t, func() {
					_ = r.call(context.Background(), func(context.Context) error { panic("boom") })
				})
			}
			r.Is(core.Open)
		})
	})
}

// B08 (sentinel-golang #196, #559): the request that moved the breaker to
// half-open was then blocked by another rule, never reported back, and the
// breaker stayed half-open for good.
func TestRegression_AbandonedProbeReturnsSlot(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second}
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("released", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			p := r.At(5).A()
			r.D(p, I) // the caller's own limiter refused the work
			r.Is(core.HalfOpen)
			r.Cnt(0, 0, 0, 0)
			r.X(S)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>C@5"}, r.CBs())
		})
		t.Run("helper panics before the call", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.XN(2, F)
			r.At(5)
			require.Panics(t, func() {
				p := r.A()
				defer r.D(p, I)
				panic("limiter blew up")
			})
			r.Is(core.HalfOpen)
			r.X(S)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@5", "H>C@5"}, r.CBs())
		})
	})
}

// B22. nodeshift/opossum #276 (and kora #246): the volume guard ran in
// half-open, so a failed trial hit a "not enough calls" early return and
// neither re-opened nor closed; the breaker sat in half-open rejecting all.
func TestRegression_HalfOpenVerdictIgnoresMinimumCalls(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5,
			OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 2})
		r.XN(5, F)
		r.Is(core.Open)
		r.At(10)
		p1, p2 := r.A(), r.A()
		r.D(p1, F)
		r.Is(core.Open)
		r.D(p2, F) // stale: p1 already re-opened
		r.Is(core.Open)
		regMs(r, 19_999).Reject(core.ErrOpen) // openedAt = 10
		r.At(20)
		p3, p4 := r.A(), r.A()
		r.D(p3, S)
		r.Is(core.HalfOpen)
		r.D(p4, S)
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		require.Equal(t, []string{"C>O@0", "O>H@10", "H>O@10", "O>H@20", "H>C@20"}, r.CBs())

		// Time window: the closed window is long empty at t=40, yet one failed
		// trial re-opens.
		r = mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50,
			MinimumNumberOfCalls: 5, OpenDuration: 30 * time.Second, PermittedCallsInHalfOpen: 1})
		for s := range 5 {
			r.At(float64(s)).X(F)
		}
		r.Is(core.Open)
		r.At(40)
		p := r.A()
		r.D(p, F)
		r.Is(core.Open)
		regMs(r, 69_999).Reject(core.ErrOpen)
		r.At(70).A()
		require.Equal(t, []string{"C>O@4", "O>H@40", "H>O@40", "O>H@70"}, r.CBs())
	})
}
