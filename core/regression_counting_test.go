package core_test

// Regressions in windows and counting (B15, B21, B24, B30 and B32 of
// docs/regressions.md): the sliding window evicts every counter, the minimum
// number of calls applies before the window fills, a trip starts fresh
// counts, concurrent counts are exact, and a cancellation is no failure.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

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
