package core_test

// Concurrent callers, controllers and readers: the one-winner rules (one
// trip, one new generation, one notification per transition) and exact
// counts under contention, on both implementations.

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/stretchr/testify/require"
)

// Retry-after hints, the half-open max wait, manual control and metrics keep
// their one-winner rules under contention.
func TestFeaturesConcurrent(t *testing.T) {
	const workers = 16

	t.Run("hinted failures racing: one trip, the rest stale", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for range rounds(50, 10) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1000, OpenDuration: time.Second,
					MaxRetryAfter: time.Minute, CollectMetrics: true})
				permits := make([]core.Permit, workers)
				for i := range permits {
					permits[i] = r.A()
				}
				parallel(workers, func(i int) {
					r.B.Done(permits[i], core.WithRetryAfter(errFail, time.Duration(i+10)*time.Second))
				})
				require.Len(t, r.CBs(), 1)
				require.Equal(t, "C>O@0", r.CBs()[0])
				m := r.B.Metrics()
				require.Equal(t, [3]uint64{workers, 1, workers - 1}, [3]uint64{m.Admitted, m.Failures, m.Dropped})
				// The winner's hint, whichever it was: 10 s .. 25 s.
				p, err := r.B.Allow()
				require.ErrorIs(t, err, core.ErrOpen)
				require.GreaterOrEqual(t, p.Wait, 10*time.Second)
				require.LessOrEqual(t, p.Wait, 25*time.Second)
			}
		})
	})

	t.Run("max-wait restart racing: one new generation, one probe", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for range rounds(50, 10) {
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second,
					MaxWaitInHalfOpen: 2 * time.Second, PermittedCallsInHalfOpen: 3, CollectMetrics: true})
				r.X(core.Failure)
				r.At(5)
				lost := []core.Permit{r.A(), r.A(), r.A()}
				r.At(7)
				var admitted, odd atomic.Int64
				parallel(workers, func(int) {
					switch p, err := r.B.Allow(); {
					case err == nil && p.Probe:
						admitted.Add(1)
					case !errors.Is(err, core.ErrHalfOpenFull):
						odd.Add(1)
					}
				})
				require.Zero(t, odd.Load(), "a non-probe permit or another rejection")
				require.EqualValues(t, 3, admitted.Load(), "the new generation's three slots")
				require.Equal(t, []string{"C>O@0", "O>H@5", "H>H@7"}, r.CBs())
				require.Equal(t, 3, r.B.Counts().ProbesInFlight)
				for _, p := range lost {
					r.D(p, core.Success)
				}
				require.Equal(t, 3, r.B.Counts().ProbesInFlight)
				m := r.B.Metrics()
				require.Equal(t, [3]uint64{1 + 3 + 3, workers - 3, 3}, [3]uint64{m.Admitted, m.RejectedHalfOpenFull, m.Dropped})
			}
		})
	})

	t.Run("controls racing: one notification each, in order", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true})
			n := rounds(200, 50)
			parallel(workers, func(i int) {
				for j := range n {
					switch (i + j) % 5 {
					case 0:
						r.B.Reset()
					case 1:
						r.B.Disable()
					case 2:
						r.B.MetricsOnly()
					case 3:
						_ = r.B.ForceOpen(0)
					default:
						_ = r.B.ForceOpen(time.Second)
					}
					if p, err := r.B.Allow(); err == nil {
						r.B.Done(p, nil)
					}
				}
			})
			tr := r.Transitions()
			total := workers * n
			require.Len(t, tr, total) // successes never trip; probes need the clock to move
			prev := core.Closed
			for i, x := range tr {
				require.Equal(t, uint64(i+1), x.Generation)
				require.Equal(t, prev, x.From, "notification %d", i)
				prev = x.To
			}
			require.Equal(t, prev, r.B.Counts().State)
			var sum uint64
			m := r.B.Metrics()
			for _, row := range m.Transitions {
				for _, v := range row {
					sum += v
				}
			}
			require.EqualValues(t, total, sum)
		})
	})

	t.Run("metrics exact under contention", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 100, CollectMetrics: true, Classifier: classify})
			n := rounds(500, 100)
			var rejected atomic.Int64
			run := func() {
				parallel(workers, func(i int) {
					for j := range n {
						p, err := r.B.Allow()
						if err != nil {
							rejected.Add(1)
						}
						if (i+j)%4 == 0 {
							r.B.Done(p, errIgnored)
						} else {
							r.B.Done(p, nil)
						}
					}
				})
			}
			total := uint64(workers * n)
			run()
			r.B.Disable()
			run()
			r.B.MetricsOnly()
			run()
			require.Zero(t, rejected.Load())
			m := r.B.Metrics()
			ign := total / 4
			require.Equal(t, 3*total, m.Admitted)
			require.Equal(t, 2*(total-ign), m.Successes)
			require.Equal(t, 2*ign, m.Ignored)
			require.Equal(t, total, m.Dropped)
			require.Zero(t, m.Failures)
		})
	})
}
