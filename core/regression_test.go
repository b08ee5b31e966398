package core_test

// Regressions B01-B32 of docs/regressions.md, in its order: bugs other
// breakers shipped, and failures users reported against them, restated as
// tests of the rules in docs/semantics.md and run against both
// implementations. Expected values follow semantics.md, never another
// library's behaviour.

import (
	"context"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// regMs sets the clock to ms milliseconds (exact, unlike float seconds).
func regMs(r *rig, ms int64) *rig {
	r.Clock.Set(time.Duration(ms) * time.Millisecond)
	return r
}

// regLasting is X(o, d): a call granted now that lasts d, then records o.
func regLasting(r *rig, o core.Outcome, d time.Duration) {
	r.t.Helper()
	p := r.A()
	r.Clock.Advance(d)
	r.D(p, o)
}

// regCancelled is X(C, d): a call granted now that lasts d and ends with
// context.Canceled.
func regCancelled(r *rig, d time.Duration) {
	r.t.Helper()
	p := r.A()
	r.Clock.Advance(d)
	r.B.Done(p, context.Canceled)
}

// regFaults collects the first few violations seen by background
// goroutines, which must not call t.FailNow.
type regFaults struct {
	n    atomic.Int64
	mu   sync.Mutex
	msgs []string
}

func (f *regFaults) add(format string, args ...any) {
	if f.n.Add(1) > 5 {
		return
	}
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *regFaults) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Zero(t, f.n.Load(), "violations (first ones): %v", f.msgs)
}

// B15. resilience4j #1335: when the count-based window overwrote its oldest
// slot it cleared calls, failures and slow calls but not "slow and failed",
// so that aggregate drifted (negative slow-failed, ever-growing slow-success).
func TestRegression_CountWindowEvictionClearsSlowFailures(t *testing.T) {
	type call struct {
		o core.Outcome
		d time.Duration
	}
	a := call{F, 2 * time.Second} // slow failure
	b := call{S, 0}               // fast success
	c := call{F, 0}               // fast failure
	d := call{S, 2 * time.Second} // slow success
	pattern := []call{a, b, c, d}
	// The four windows the pattern cycles through once full, keyed by the
	// pattern index of the newest call.
	full := map[int][4]uint64{
		2: {3, 2, 1, 1}, // (a,b,c)
		3: {3, 1, 1, 0}, // (b,c,d)
		0: {3, 2, 2, 1}, // (c,d,a)
		1: {3, 1, 2, 1}, // (d,a,b)
	}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 3, FailureRateThreshold: 100,
			SlowCallRateThreshold: 100, SlowCallDurationThreshold: time.Second, MinimumNumberOfCalls: 3})
		var last []call
		for i := range 250 * len(pattern) {
			cl := pattern[i%len(pattern)]
			regLasting(r, cl.o, cl.d)
			last = append(last, cl)
			if len(last) > 3 {
				last = last[1:]
			}
			var want [4]uint64 // recomputed from the last three recorded outcomes
			for _, m := range last {
				fail, slow := m.o == F, m.d > time.Second
				want[0]++
				if fail {
					want[1]++
				}
				if slow {
					want[2]++
				}
				if fail && slow {
					want[3]++
				}
			}
			switch i {
			case 0:
				require.Equal(t, [4]uint64{1, 1, 1, 1}, want)
			case 1:
				require.Equal(t, [4]uint64{2, 1, 1, 1}, want)
			default:
				require.Equal(t, full[i%len(pattern)], want, "call %d", i+1)
			}
			got := r.B.Counts()
			require.Equal(t, want, [4]uint64{got.Calls, got.Failures, got.SlowCalls, got.SlowFailures}, "after call %d", i+1)
			require.LessOrEqual(t, got.SlowFailures, min(got.SlowCalls, got.Failures), "after call %d", i+1)
			if i == 3 {
				require.Zero(t, got.SlowFailures, "call 4 evicted the only slow failure")
			}
			require.Equal(t, core.Closed, got.State, "after call %d", i+1)
		}
		require.Empty(t, r.CBs())
	})
}

// B19 (unit). exaring/hoglet PR #25: opened-at was stored as Unix time,
// which drops Go's monotonic reading, so a wall-clock step could pin the
// breaker open or skip the open period. The default clock must be monotonic.
func TestRegression_DefaultClockNeverGoesBackwards(t *testing.T) {
	c := core.NewSystemClock()
	first := c.Now()
	require.GreaterOrEqual(t, first, time.Duration(0))
	require.Less(t, first, time.Minute, "the default clock measures from a base taken at construction, not the Unix epoch")

	const workers = 8
	total := rounds(1_000_000, 100_000)
	var published atomic.Int64 // the largest reading any goroutine has published
	var faults regFaults
	parallel(workers, func(g int) {
		prev := time.Duration(-1)
		for i := range total / workers {
			seen := time.Duration(published.Load())
			now := c.Now()
			// now was read after seen was published, so it may not be smaller.
			if now < prev || now < seen {
				faults.add("goroutine %d read %d: %v after own %v and published %v", g, i, now, prev, seen)
			}
			prev = now
			for {
				p := published.Load()
				if int64(now) <= p || published.CompareAndSwap(p, int64(now)) {
					break
				}
			}
		}
	})
	faults.check(t)

	// A config without a clock gets this clock, started at construction.
	s, err := core.Config{FailureRateThreshold: 50}.Validate()
	require.NoError(t, err)
	require.IsType(t, core.SystemClock{}, s.Clock)
	require.GreaterOrEqual(t, s.Clock.Now(), time.Duration(0))
	require.Less(t, s.Clock.Now(), time.Minute)
}

// regMonoWallClock is an injected clock with a monotonic reading M (what
// Now returns) and a separate wall reading W that an NTP step or an operator
// may move at will.
type regMonoWallClock struct{ mono, wall atomic.Int64 }

func (c *regMonoWallClock) Now() time.Duration { return time.Duration(c.mono.Load()) }
func (c *regMonoWallClock) Wall() time.Time    { return time.Unix(0, c.wall.Load()) }
func (c *regMonoWallClock) setMono(ms int64) {
	c.mono.Store(int64(time.Duration(ms) * time.Millisecond))
}

func (c *regMonoWallClock) stepWall(d time.Duration) { c.wall.Add(int64(d)) }

// B19 (scenario). exaring/hoglet PR #25 and fabfuel/circuitbreaker PR #31: a
// wall clock set a day ahead and then corrected kept a breaker open far longer
// than configured (or skipped the open period). Only the monotonic reading
// may decide.
func TestRegression_WallClockStepsDoNotMoveOpenDeadline(t *testing.T) {
	for _, sign := range []time.Duration{1, -1} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			clk := &regMonoWallClock{}
			clk.wall.Store(time.Date(2024, 3, 10, 1, 59, 0, 0, time.UTC).UnixNano())
			r := mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
				OpenDuration: 10 * time.Second, Clock: clk})
			clk.setMono(0)
			r.XN(2, F)
			r.Is(core.Open)
			clk.setMono(5000)
			clk.stepWall(sign * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			r.Is(core.Open)
			clk.setMono(6000)
			clk.stepWall(-sign * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			clk.setMono(9999)
			clk.stepWall(sign * 365 * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			r.Is(core.Open)
			clk.setMono(10000)
			r.Is(core.HalfOpen)
			r.A()
			require.Equal(t, []string{"C>O@0", "O>H@10"}, r.CBs())
		})
	}
}

// regCodeLines returns the Go source src without comments, as the
// concatenated tokens of each line (no spaces between punctuation, so
// "time . Unix" reads "time.Unix"), keyed by line number.
func regCodeLines(name string, src []byte) (map[int]string, error) {
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var errs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	lines := map[int]string{}
	prevWord, prevLine := false, 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at the end of a line
		}
		line := fset.Position(pos).Line
		text := lit
		if text == "" {
			text = tok.String()
		}
		word := tok == token.IDENT || tok.IsKeyword() || tok.IsLiteral()
		if word && prevWord && line == prevLine {
			lines[line] += " "
		}
		lines[line] += text
		prevWord, prevLine = word, line
	}
	return lines, errs.Err()
}

// B19 (code review as a static check). exaring/hoglet PR #25: timing went
// through Unix microseconds, dropping the monotonic reading. No non-test
// source of the breakers or windows may convert through Unix time or strip
// the monotonic reading (Round(0), UTC(), Local(), In()). Comments are not
// code and are skipped.
func TestRegression_NoTimingPathDropsMonotonicReading(t *testing.T) {
	banned := []string{"time.Unix", "UnixNano", "UnixMicro", "UnixMilli", ".Round(0)", ".UTC()", ".Local()", ".In("}

	// The scanner itself: a banned call in a comment is fine, in code it is not.
	self, err := regCodeLines("self.go", []byte("package p\n// time.Unix(0, 0).UTC()\nvar x = t . UnixNano ( )\nvar y = t.Round(0)\n"))
	require.NoError(t, err)
	require.NotContains(t, self[2], "time.Unix")
	require.Equal(t, "var x=t.UnixNano()", self[3])
	require.Contains(t, self[4], ".Round(0)")

	var found []string
	for _, dir := range []string{".", "../baseline", "../window"} {
		scanned := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines, err := regCodeLines(path, src)
			if err != nil {
				return err
			}
			scanned++
			for n, code := range lines {
				for _, b := range banned {
					if strings.Contains(code, b) {
						found = append(found, fmt.Sprintf("%s:%d: %q in %q", path, n, b, code))
					}
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.NotZero(t, scanned, "no Go source found under %s", dir)
	}
	sort.Strings(found)
	require.Empty(t, found, "timing code must stay on the monotonic clock (R14)")
}

// B21. joshrotenberg/mcp-proxy #220: with a minimum of 5 calls the breaker
// stayed closed through many failures because the count-based breaker below
// only judged a full window (100), ignoring the minimum.
func TestRegression_MinimumCallsAppliesBeforeWindowFills(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, tc := range []struct {
			name string
			cfg  core.Config
			min  int
		}{
			{"count(100) min=5", core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 5}, 5},
			{"count(100) min=100", core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 100}, 100},
			{"time(60s) min=5", core.Config{WindowType: core.TimeBased, WindowSize: 60, FailureRateThreshold: 50, MinimumNumberOfCalls: 5}, 5},
		} {
			r := mk.build(t, tc.cfg)
			for i := 1; i < tc.min; i++ {
				r.X(F)
				require.Equal(t, core.Closed, r.B.State(), "%s: after %d failures", tc.name, i)
			}
			r.X(F)
			require.Equal(t, core.Open, r.B.State(), "%s: after %d failures", tc.name, tc.min)
			require.Equal(t, []string{"C>O@0"}, r.CBs(), tc.name)
		}

		// R3: a minimum a count window can never hold is rejected, not clamped.
		_, err := mk.new(core.Config{WindowSize: 5, MinimumNumberOfCalls: 10, FailureRateThreshold: 50})
		require.ErrorIs(t, err, core.ErrInvalidConfig)
		var ce *core.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "MinimumNumberOfCalls", ce.Field)
		require.Contains(t, err.Error(), "MinimumNumberOfCalls")
		// The largest valid minimum is the window itself.
		_, err = mk.new(core.Config{WindowSize: 5, MinimumNumberOfCalls: 5, FailureRateThreshold: 50})
		require.NoError(t, err)
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

// B24. envoyproxy/envoy #1491 (and resilience4j #547): the consecutive-5xx
// counter survived ejection, so a host that kept failing overshot the
// threshold and was never ejected again until a success reset it.
func TestRegression_TripStartsFreshCountsSoRepeatFailuresTripAgain(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 5, FailureRateThreshold: 100, MinimumNumberOfCalls: 5,
			OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 1})
		r.XN(5, F)
		r.Is(core.Open)
		r.At(10).X(S)
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		for s := 11; s <= 14; s++ {
			r.At(float64(s)).X(F)
			r.Is(core.Closed)
			n := uint64(s - 10)
			r.Cnt(n, n, 0, 0)
		}
		r.At(15).X(F) // the 5th, exactly
		r.Is(core.Open)
		regMs(r, 24_999).Reject(core.ErrOpen)
		r.At(25).X(F) // the probe fails: re-open without any success in between
		r.Is(core.Open)
		regMs(r, 34_999).Reject(core.ErrOpen)
		r.At(35).X(S)
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		for i := 1; i <= 4; i++ {
			r.X(F)
			r.Is(core.Closed)
		}
		r.X(F)
		r.Is(core.Open)
		require.Equal(t, []string{"C>O@0", "O>H@10", "H>C@10", "C>O@15", "O>H@25", "H>O@25",
			"O>H@35", "H>C@35", "C>O@35"}, r.CBs())

		// Carry-over: half-open probes are not counted into the new closed window.
		r = mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5,
			PermittedCallsInHalfOpen: 4})
		r.XN(5, F)
		r.Is(core.Open)
		r.At(60) // the default open duration
		ps := []core.Permit{r.A(), r.A(), r.A(), r.A()}
		r.Reject(core.ErrHalfOpenFull)
		for _, p := range ps {
			r.D(p, S)
		}
		r.Is(core.Closed)
		r.Cnt(0, 0, 0, 0)
		r.X(F)
		r.Cnt(1, 1, 0, 0)
		r.Is(core.Closed)
	})
}

// B25. Netflix/Hystrix PR #1640 / #1665: status and opened-at were separate
// fields; a race left them contradicting each other and the breaker stopped
// tripping for good at ~90 % errors. Stress it, checking snapshots as we go,
// then check that it still trips, probes and closes exactly.
func TestRegression_StateAndDeadlineNeverDriftUnderStress(t *testing.T) {
	workers, calls := 32, 50_000
	if testing.Short() {
		workers, calls = 8, 2_000
	}
	const open = time.Millisecond
	cfg := core.Config{WindowSize: 20, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
		OpenDuration: open, PermittedCallsInHalfOpen: 1}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, cfg)
		if !t.Run("stress", func(t *testing.T) {
			var faults regFaults
			stop := make(chan struct{})
			var bg sync.WaitGroup
			bg.Add(2)
			go func() { // the clock: 100 µs per tick
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					r.Clock.Advance(100 * time.Microsecond)
					time.Sleep(20 * time.Microsecond)
				}
			}()
			var checks atomic.Int64
			go func() { // the checker
				defer bg.Done()
				var lastGen uint64
				for {
					select {
					case <-stop:
						return
					default:
					}
					checks.Add(1)
					c := r.B.Counts()
					if c.Generation < lastGen {
						faults.add("generation went back from %d to %d", lastGen, c.Generation)
					}
					lastGen = c.Generation
					if c.Failures > c.Calls || c.Calls > 20 || c.SlowCalls != 0 || c.SlowFailures != 0 {
						faults.add("torn counts %+v", c)
					}
					if c.State != core.Closed && (c.Calls != 0 || c.ConsecutiveFailures != 0) {
						faults.add("closed-state counts outside closed: %+v", c)
					}
					if c.ProbesInFlight > 1 || c.ProbeSuccesses != 0 || (c.State != core.HalfOpen && c.ProbesInFlight != 0) {
						faults.add("probe counts %+v", c)
					}
					// Open must always come with a deadline in (now, openedAt+open]
					// rounded up to the millisecond: never "open but no deadline".
					p, err := r.B.Allow()
					switch {
					case err == nil:
						r.B.Record(p, core.Ignored) // give any probe slot straight back
					case errors.Is(err, core.ErrOpen):
						if p.Wait <= 0 || p.Wait >= open+time.Millisecond {
							faults.add("open with wait %v", p.Wait)
						}
					case errors.Is(err, core.ErrHalfOpenFull):
					default:
						faults.add("Allow: unexpected error %v", err)
					}
				}
			}()

			var ok, failed, rejected atomic.Int64
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				parallel(workers, func(int) {
					ctx := context.Background()
					for i := range calls {
						fail := i%5 < 3
						err := r.call(ctx, func(context.Context) error {
							if fail {
								return errFail
							}
							return nil
						})
						switch {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, errFail):
							failed.Add(1)
						case errors.Is(err, core.ErrRejected):
							rejected.Add(1)
						default:
							faults.add("Execute: unexpected error %v", err)
						}
					}
				})
			}()
			// Watchdog: a stuck notification dispatcher would hang the callers
			// that must publish; fail with a diagnosis instead of hanging.
			select {
			case <-finished:
			case <-time.After(2 * time.Minute):
				close(stop)
				t.Fatalf("callers still running after 2m: generation %d, %d notifications delivered",
					r.B.Counts().Generation, len(r.Transitions()))
			}
			close(stop)
			bg.Wait()
			faults.check(t)
			require.EqualValues(t, workers*calls, ok.Load()+failed.Load()+rejected.Load())
			require.NotZero(t, rejected.Load(), "the breaker never tripped under 60 percent failures")
			require.NotZero(t, checks.Load())

			// Notifications: one per transition, in order, chained (R12).
			trs := r.Transitions()
			require.EqualValues(t, len(trs), r.B.Counts().Generation, "one notification per committed transition")
			from := core.Closed
			for i, tr := range trs {
				require.EqualValues(t, i+1, tr.Generation)
				require.Equal(t, from, tr.From, "notification %d", i)
				from = tr.To
			}
			require.NotEmpty(t, trs)
		}) {
			return
		}

		t.Run("afterwards it trips, probes and closes exactly", func(t *testing.T) {
			// Functional check on a frozen clock, set to a whole millisecond.
			now := r.Clock.Now()
			r.Clock.Set((now/time.Millisecond + 1) * time.Millisecond)
			for i := 0; r.B.Counts().State != core.Open; i++ {
				require.Less(t, i, 21, "closed or half-open breaker failed to trip")
				require.True(t, r.Try(F))
			}
			r.Clock.Advance(2 * open) // past any deadline
			r.X(S)
			r.Is(core.Closed)
			r.Cnt(0, 0, 0, 0)
			base := len(r.CBs())
			for round := range 2 {
				admitted := 0
				for i := 1; i <= 20; i++ {
					if r.Try(F) {
						admitted++
					}
					if i < 10 {
						r.Is(core.Closed)
					}
				}
				require.Equal(t, 10, admitted, "round %d: trips at the 10th failure (min=10)", round)
				r.Is(core.Open)
				r.Clock.Advance(open - time.Microsecond)
				r.Reject(core.ErrOpen)
				r.Clock.Advance(time.Microsecond)
				r.X(S)
				r.Is(core.Closed)
			}
			tail := r.CBs()[base:]
			require.Len(t, tail, 6)
			for i, want := range []string{"C>O", "O>H", "H>C", "C>O", "O>H", "H>C"} {
				require.True(t, strings.HasPrefix(tail[i], want+"@"), "notification %d: %s", i, tail[i])
			}
		})
	})
}

// B27. nodeshift/opossum #385: a sixth concurrent failure arriving after the
// fifth had opened the breaker cancelled the half-open timer without
// re-arming it, so the breaker never reached half-open.
func TestRegression_LateFailureDoesNotMoveOpenDeadline(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5,
		OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 1}
	forEachImpl(t, func(t *testing.T, mk maker) {
		setup := func() (*rig, core.Permit) {
			r := mk.build(t, cfg)
			ps := make([]core.Permit, 6)
			for i := range ps {
				ps[i] = r.A()
			}
			r.At(1)
			for i := range 5 {
				r.Is(core.Closed)
				r.D(ps[i], F)
			}
			r.Is(core.Open)
			return r, ps[5]
		}

		r, p6 := setup()
		r.At(9).D(p6, F) // stale
		r.Is(core.Open)
		r.Reject(core.ErrOpen)
		regMs(r, 10_999).Reject(core.ErrOpen) // openedAt still 1: not 9 ...
		r.At(11).A()                          // ... and not cleared
		r.Is(core.HalfOpen)
		require.Equal(t, []string{"C>O@1", "O>H@11"}, r.CBs())

		// Variant: the late failure arrives during half-open; the probe alone decides.
		for _, probe := range []core.Outcome{S, F} {
			r, p6 = setup()
			p := r.At(11).A()
			r.At(11.5).D(p6, F)
			r.Is(core.HalfOpen)
			r.Reject(core.ErrHalfOpenFull) // the probe's slot is still taken
			r.D(p, probe)
			if probe == S {
				r.Is(core.Closed)
				r.Cnt(0, 0, 0, 0)
				require.Equal(t, []string{"C>O@1", "O>H@11", "H>C@11.5"}, r.CBs())
			} else {
				r.Is(core.Open)
				require.Equal(t, []string{"C>O@1", "O>H@11", "H>O@11.5"}, r.CBs())
			}
		}
	})
}

// B29. denoland/std PR #7097: the open timestamp was the time the failing
// call started, so a slow call opened the breaker with its cooldown partly
// spent; and concurrent half-open failures each fired the open callbacks.
func TestRegression_OpenDeadlineFromCommitAndSingleReopen(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
		OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 2}
	forEachImpl(t, func(t *testing.T, mk maker) {
		for round := range rounds(10_000, 300) {
			r := mk.build(t, cfg)
			p1 := r.A() // a slow call starts at 0
			r.At(1).X(F)
			r.Cnt(1, 1, 0, 0)
			r.Is(core.Closed)
			r.At(9).D(p1, F) // trips at 9, not at the call's start
			r.Is(core.Open)
			r.At(10).Reject(core.ErrOpen)
			regMs(r, 18_999).Reject(core.ErrOpen)
			r.At(19)
			pA := r.A()
			r.Is(core.HalfOpen)
			pB := r.A()
			ps := []core.Permit{pA, pB}
			parallel(2, func(i int) { r.D(ps[i], F) })
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@9", "O>H@19", "H>O@19"}, r.CBs(), "round %d", round)
			regMs(r, 28_999).Reject(core.ErrOpen)
			r.At(29).A()
		}
	})
}

// B30 (afex/hystrix-go PR #71, #36, #37): state and metrics were read
// without synchronisation while other goroutines wrote them; the race
// detector fired and totals went wrong. Counts must be exact and every
// concurrent read consistent.
func TestRegression_ConcurrentCountsAreExact(t *testing.T) {
	t.Run("exact totals", func(t *testing.T) {
		const workers = 64
		per := rounds(10_000, 500)
		total := uint64(workers * per)
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{WindowType: core.TimeBased, WindowSize: 10,
				FailureRateThreshold: 50, MinimumNumberOfCalls: 1000})
			var faults regFaults
			stop := make(chan struct{})
			var reads atomic.Int64
			readerDone := make(chan struct{})
			go func() {
				defer close(readerDone)
				var prevN uint64
				for {
					select {
					case <-stop:
						return
					default:
					}
					reads.Add(1)
					c := r.B.Counts()
					if c.Failures > c.Calls || c.Calls > total || c.SlowCalls != 0 || c.SlowFailures != 0 {
						faults.add("torn read %+v", c)
					}
					if c.Calls < prevN {
						faults.add("calls went back from %d to %d", prevN, c.Calls)
					}
					prevN = c.Calls
					if c.State != core.Closed {
						faults.add("Counts().State = %v", c.State)
					}
					if st := r.B.State(); st != core.Closed {
						faults.add("State() = %v", st)
					}
				}
			}()
			parallel(workers, func(g int) {
				for i := range per {
					o := S
					if (g*per+i)%4 == 0 {
						o = F
					}
					p, err := r.B.Allow()
					if err != nil {
						faults.add("Allow: %v", err)
						continue
					}
					r.B.Record(p, o)
				}
			})
			close(stop)
			<-readerDone
			faults.check(t)
			require.NotZero(t, reads.Load())
			r.Cnt(total, total/4, 0, 0)
			r.Is(core.Closed)
			require.Empty(t, r.CBs())
		})
	})

	t.Run("trip exactly once", func(t *testing.T) {
		const workers, per = 64, 100
		for _, tc := range []struct {
			name string
			cfg  core.Config
			min  int64
		}{
			// count(1000) of the entry exceeds MaxCountWindow (255): the
			// largest count window, and a time window holding 1000.
			{"count(255)", core.Config{WindowSize: core.MaxCountWindow, FailureRateThreshold: 100,
				MinimumNumberOfCalls: core.MaxCountWindow}, core.MaxCountWindow},
			{"time(10s) min=1000", core.Config{WindowType: core.TimeBased, WindowSize: 10,
				FailureRateThreshold: 100, MinimumNumberOfCalls: 1000}, 1000},
		} {
			t.Run(tc.name, func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					for round := range rounds(50, 5) {
						r := mk.build(t, tc.cfg)
						var admitted, rejected atomic.Int64
						parallel(workers, func(int) {
							for range per {
								p, err := r.B.Allow()
								if err != nil {
									rejected.Add(1)
									continue
								}
								admitted.Add(1)
								r.B.Record(p, F)
							}
						})
						require.EqualValues(t, workers*per, admitted.Load()+rejected.Load())
						require.GreaterOrEqual(t, admitted.Load(), tc.min, "round %d", round)
						require.Equal(t, []string{"C>O@0"}, r.CBs(), "round %d", round)
						r.Is(core.Open)
						c := r.B.Counts()
						require.EqualValues(t, 1, c.Generation, "round %d: late outcomes changed nothing", round)
						require.Zero(t, c.Calls)
					}
				})
			})
		}
	})
}

// B32. cockroachdb/cockroach PR #35433 (and rubyist/circuitbreaker PR #42,
// cep21/circuit PR #94): context cancellations were recorded as breaker
// failures, so an outage elsewhere tripped breakers to healthy peers.
func TestRegression_CancellationIsNotAFailure(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5,
		OpenDuration: 10 * time.Second}
	wrapped := fmt.Errorf("dial 10.0.0.7: %w", context.Canceled)
	forEachImpl(t, func(t *testing.T, mk maker) {
		// Two-step API and Execute must agree.
		type entry func(r *rig, err error)
		for name, run := range map[string]entry{
			"Allow/Done": func(r *rig, err error) { r.B.Done(r.A(), err) },
			"Execute": func(r *rig, err error) {
				got := r.call(context.Background(), func(context.Context) error { return err })
				require.Equal(t, err, got)
			},
		} {
			r := mk.build(t, cfg)
			for _, err := range []error{errFail, context.Canceled, wrapped, context.Canceled, errFail, nil, nil} {
				run(r, err)
			}
			r.Cnt(4, 2, 0, 0)
			r.Is(core.Closed)
			run(r, errFail) // n=5, f=3: 300 >= 250
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0"}, r.CBs(), name)
		}

		// Only cancellations: nothing counted.
		r := mk.build(t, cfg)
		for i := range 100 {
			if i%2 == 0 {
				r.B.Done(r.A(), context.Canceled)
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				err := r.call(ctx, func(ctx context.Context) error {
					cancel()
					return ctx.Err()
				})
				require.ErrorIs(t, err, context.Canceled)
			}
		}
		r.Cnt(0, 0, 0, 0)
		r.Is(core.Closed)
		// An already-cancelled context never reaches the breaker.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		require.ErrorIs(t, r.call(ctx, func(context.Context) error { called = true; return nil }), context.Canceled)
		require.False(t, called)
		r.Cnt(0, 0, 0, 0)

		// With a slow-call rule: a long cancelled call is not a slow call.
		slowCfg := cfg
		slowCfg.SlowCallRateThreshold, slowCfg.SlowCallDurationThreshold = 50, time.Second
		r = mk.build(t, slowCfg)
		for range 10 {
			regCancelled(r, 5*time.Second)
		}
		err := r.call(context.Background(), func(context.Context) error {
			r.Clock.Advance(5 * time.Second)
			return wrapped
		})
		require.ErrorIs(t, err, context.Canceled)
		r.Cnt(0, 0, 0, 0)
		r.Is(core.Closed)
		regLasting(r, S, 5*time.Second) // slowness is measured at all
		r.Cnt(1, 0, 1, 0)

		// A timeout is a failure by default (R9).
		r = mk.build(t, cfg)
		for i := 1; i <= 5; i++ {
			r.Is(core.Closed)
			r.B.Done(r.A(), context.DeadlineExceeded)
		}
		r.Is(core.Open)
		require.Equal(t, []string{"C>O@0"}, r.CBs())
	})
}
