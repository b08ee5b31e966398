package core_test

// Regressions B01-B13 of docs/regressions.md: bugs other breakers shipped,
// as tests for ours, against both implementations. Expected values follow
// semantics.md, never another library's behaviour. B15-B32 are in
// regression2_test.go.

import (
	"context"
	"errors"
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

// B09 (Hystrix #1853, #1861): a late non-success from an older command
// flipped half-open to open and the real probe's success then failed to close.
func TestRegression_StaleOutcomeCannotFlipHalfOpen(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second}
	for _, late := range []core.Outcome{F, S, I} {
		t.Run(late.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, cfg)
				pOld := r.A()
				r.XN(2, F)
				pProbe := r.At(5).A()
				r.At(6).D(pOld, late)
				r.Is(core.HalfOpen)
				r.Reject(core.ErrHalfOpenFull)
				r.At(7).D(pProbe, S)
				r.Is(core.Closed)
				require.Equal(t, []string{"C>O@0", "O>H@5", "H>C@7"}, r.CBs())
			})
		})
	}
}

// B11 (Polly #219): failures from calls started before the break re-fired
// the on-break notification for the same open period.
func TestRegression_PreBreakFailuresDoNotRefireBreak(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 4, OpenDuration: 10 * time.Second})
		ps := make([]core.Permit, 6)
		for i := range ps {
			ps[i] = r.A()
		}
		r.At(1)
		for _, p := range ps[:4] {
			r.D(p, F)
		}
		r.Is(core.Open)
		r.At(2)
		r.D(ps[4], F)
		r.D(ps[5], F)
		r.At(10.999).Reject(core.ErrOpen)
		r.At(11).A()
		require.Equal(t, []string{"C>O@1", "O>H@11"}, r.CBs())
	})
}

// B12 (resilience4j #646, #562, #674): racing half-open failures attempted a
// second open transition and threw "illegal transition" into callers.
func TestRegression_RacingProbeFailuresOpenOnce(t *testing.T) {
	for _, slowListener := range []bool{false, true} {
		t.Run(map[bool]string{false: "listener=fast", true: "listener=sleeps"}[slowListener], func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				n := rounds(10000, 100)
				if slowListener {
					n = rounds(200, 10)
				}
				for round := range n {
					var listen []func(core.Transition)
					if slowListener {
						listen = append(listen, func(core.Transition) { time.Sleep(time.Millisecond) })
					}
					r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
						OpenDuration: time.Second, PermittedCallsInHalfOpen: 8}, listen...)
					r.XN(10, F)
					r.At(1)
					ps := make([]core.Permit, 8)
					for i := range ps {
						ps[i] = r.A()
					}
					parallel(8, func(i int) { r.D(ps[i], F) })
					r.Is(core.Open)
					r.At(1.999).Reject(core.ErrOpen)
					r.At(2)
					var granted atomic.Int32
					parallel(64, func(int) {
						if _, err := r.B.Allow(); err == nil {
							granted.Add(1)
						}
					})
					require.LessOrEqual(t, granted.Load(), int32(8))
					require.Equal(t, []string{"C>O@0", "O>H@1", "H>O@1", "O>H@2"}, r.CBs(), "round %d", round)
				}
			})
		})
	}
}

// B13 (gobreaker #37, gascity #4839): a listener that called back into the
// breaker deadlocked on its mutex; dispatching after unlock then let
// notifications arrive out of order.
func TestRegression_ListenerMayCallBackIntoBreaker(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("no deadlock", func(t *testing.T) {
			var r *rig
			type seen struct {
				tr    core.Transition
				state core.State
				err   error
			}
			var got []seen
			listener := func(tr core.Transition) {
				st := r.B.State()
				_ = r.B.Counts()
				p, err := r.B.Allow()
				if err == nil {
					r.B.Record(p, core.Ignored)
				}
				got = append(got, seen{tr, st, err})
			}
			r = mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Second}, listener)
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.XN(2, F)
				require.Len(t, got, 1)
				require.Equal(t, core.Open, got[0].state)
				require.ErrorIs(t, got[0].err, core.ErrOpen)
				p := r.At(1).A()
				require.Len(t, got, 2)
				require.Equal(t, core.HalfOpen, got[1].state)
				r.D(p, S)
				require.Len(t, got, 3)
				require.Equal(t, core.Closed, got[2].state)
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Second): // a watchdog, not a timing assertion: a deadlock never returns
				t.Fatal("deadlock: a listener calling into the breaker did not return")
			}
		})
		t.Run("ordering", func(t *testing.T) {
			for round := range rounds(10000, 200) {
				r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
					OpenDuration: time.Second, PermittedCallsInHalfOpen: 3})
				r.XN(10, F)
				r.At(1)
				ps := make([]core.Permit, 3)
				parallel(3, func(i int) { ps[i], _ = r.B.Allow() })
				parallel(3, func(i int) { r.D(ps[i], []core.Outcome{S, F, S}[i]) })
				r.At(2)
				parallel(16, func(int) {
					if p, err := r.B.Allow(); err == nil {
						r.D(p, S)
					}
				})
				trs := r.Transitions()
				for i := 1; i < len(trs); i++ {
					require.Equal(t, trs[i-1].To, trs[i].From, "round %d: %v", round, r.CBs())
					require.Equal(t, trs[i-1].Generation+1, trs[i].Generation)
				}
				require.Equal(t, trs[len(trs)-1].To, r.B.Counts().State, "round %d", round)
			}
		})
	})
}
