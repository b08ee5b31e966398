package core_test

// Concurrent callers, controllers and readers: the one-winner rules (one
// trip, one new generation, one notification per transition) and exact
// counts under contention, on both implementations.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
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

// Regression (concurrency): callers, a controller issuing every manual
// control, and a clock that jumps, all at once, with max wait, ramp-up,
// hints and metrics on. Guards: probes in flight per half-open generation
// never exceed PermittedCallsInHalfOpen (R6) even across max-wait restarts
// and controls; notifications form one chain (each from is the previous to,
// generations consecutive, R12); Counts snapshots are possible ones (a
// closed count window never shows a window that trips, Failures <= Calls <=
// W, probe counts within bounds); and once everything returned, every
// admitted permit was counted exactly once as acted on or dropped, the
// transitions counted equal the notifications, and the rejections counted
// equal the rejections returned.
//
// The controller is paced (a bounded number of controls per caller op);
// TestAdv5_NotificationStormAliasesGenerations runs it unpaced.
func TestAdv5_ConcurrentControlsTripsProbes(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) { a5ConcurrentControls(t, mk, false) })
}

// Was a BUG (lock-free only, R12): the same workload with an unpaced
// controller (controls in a tight loop, full size) let the lock-free
// dispatcher fall more than 2^20 transitions behind its listener, and
// because it named events by generation mod 2^20, it then delivered an
// event of the next wrap in place of the current one (observed twice: the
// 73,478th notification was {From: disabled, To: open, Generation: 73478}
// right after {From: closed, To: metrics-only, Generation: 73477}). Events
// are sequenced by the 64-bit generation now;
// TestListenerFarBehindGetsEveryEventInOrder holds a backlog past 2^20
// deterministically.
func TestAdv5_NotificationStormAliasesGenerations(t *testing.T) {
	if testing.Short() {
		t.Skip("an unpaced storm of controls: full runs only")
	}
	a5ConcurrentControls(t, maker{new: impls[0].New}, true)
}

func a5ConcurrentControls(t *testing.T, mk maker, storm bool) {
	const permitted = 2
	{
		for round := range rounds(6, 2) {
			if storm && round > 0 {
				break
			}
			var (
				nmu     sync.Mutex
				chain   []core.Transition
				chainOK = true
				chainE  string
			)
			clk := core.NewManualClock(0)
			cfg := core.Config{WindowSize: 8, MinimumNumberOfCalls: 2, FailureRateThreshold: 50, OpenDuration: time.Millisecond,
				PermittedCallsInHalfOpen: permitted, SuccessesToClose: 3, MaxWaitInHalfOpen: 2 * time.Millisecond,
				RampUpDuration: 5 * time.Millisecond, RampUpStartPercent: 20, MaxRetryAfter: 3 * time.Millisecond,
				CollectMetrics: true, Classifier: classify, Clock: clk,
				OnStateChange: func(tr core.Transition) {
					nmu.Lock()
					defer nmu.Unlock()
					if n := len(chain); n > 0 && chainOK {
						prev := chain[n-1]
						if prev.To != tr.From || prev.Generation+1 != tr.Generation {
							chainOK, chainE = false, fmt.Sprintf("%+v after %+v (notification %d)", tr, prev, n+1)
						}
					} else if n == 0 && (tr.From != core.Closed || tr.Generation != 1) {
						chainOK, chainE = false, fmt.Sprintf("first %+v", tr)
					}
					chain = append(chain, tr)
				}}
			b, err := mk.new(cfg)
			require.NoError(t, err)

			var (
				pmu      sync.Mutex
				inFlight = map[uint64]int{}
				bad      atomic.Value
				rejected [4]atomic.Uint64
				stop     atomic.Bool
			)
			report := func(s string) { bad.CompareAndSwap(nil, s) }
			opsPer := rounds(1500, 800)
			var callers, ctrl sync.WaitGroup
			for w := range 3 {
				callers.Add(1)
				go func() {
					defer callers.Done()
					rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
					for range opsPer {
						p, err := b.Allow()
						if err != nil {
							switch breakers.Reason(err) {
							case core.ErrOpen:
								rejected[0].Add(1)
							case core.ErrHalfOpenFull:
								rejected[1].Add(1)
							case core.ErrForcedOpen:
								rejected[2].Add(1)
							case core.ErrRampingUp:
								rejected[3].Add(1)
							default:
								report("unknown rejection " + err.Error())
							}
							continue
						}
						if p.Probe {
							pmu.Lock()
							inFlight[p.Generation]++
							if n := inFlight[p.Generation]; n > permitted {
								report(fmt.Sprintf("%d probes in flight in generation %d", n, p.Generation))
							}
							pmu.Unlock()
						}
						c := b.Counts()
						switch {
						case c.Failures > c.Calls || c.Calls > 8 || c.SlowFailures > min(c.SlowCalls, c.Failures):
							report(fmt.Sprintf("torn counts %+v", c))
						case c.State == core.Closed && c.Calls >= 2 && c.Failures*100 >= 50*c.Calls:
							report(fmt.Sprintf("closed with a window that trips %+v", c))
						case c.ProbesInFlight > permitted || c.ProbeSuccesses >= 3:
							report(fmt.Sprintf("probe counts %+v", c))
						}
						if p.Probe {
							pmu.Lock()
							inFlight[p.Generation]--
							pmu.Unlock()
						}
						switch rng.IntN(7) {
						case 0, 1, 2:
							b.Done(p, nil)
						case 3:
							b.Done(p, errFail)
						case 4:
							b.Done(p, errIgnored)
						case 5:
							b.Done(p, core.WithRetryAfter(errFail, time.Duration(rng.IntN(5))*time.Millisecond))
						case 6:
							b.RecordHint(p, time.Duration(rng.IntN(3)-1))
						}
					}
				}()
			}
			ctrl.Add(1)
			go func() {
				defer ctrl.Done()
				rng := rand.New(rand.NewPCG(uint64(round), 99))
				for i := 0; !stop.Load() && (storm || i < 3*opsPer); i++ {
					if !storm {
						runtime.Gosched()
					}
					switch rng.IntN(12) {
					case 0:
						_ = b.ForceOpen(time.Duration(rng.IntN(3)) * time.Millisecond)
					case 1:
						b.Disable()
					case 2:
						b.MetricsOnly()
					case 3, 4:
						b.Reset()
					case 5:
						clk.Advance(-time.Millisecond)
					default:
						clk.Advance(time.Duration(rng.IntN(1500)) * time.Microsecond)
					}
					_ = b.State()
					_ = b.Metrics()
				}
			}()
			callers.Wait()
			stop.Store(true)
			ctrl.Wait()
			if v := bad.Load(); v != nil {
				t.Fatal(v)
			}
			nmu.Lock()
			ok, e, n := chainOK, chainE, len(chain)
			last := core.Transition{}
			if n > 0 {
				last = chain[n-1]
			}
			nmu.Unlock()
			require.True(t, ok, e)
			c := b.Counts()
			require.Equal(t, last.Generation, c.Generation, "generation vs last notification")
			m := b.Metrics()
			require.Equal(t, m.Admitted, m.Successes+m.Failures+m.Ignored+m.Dropped, "conservation %+v", m)
			var trans uint64
			for i := range m.Transitions {
				for j := range m.Transitions[i] {
					trans += m.Transitions[i][j]
				}
			}
			require.Equal(t, uint64(n), trans, "transitions counted vs notified")
			require.Equal(t, [4]uint64{rejected[0].Load(), rejected[1].Load(), rejected[2].Load(), rejected[3].Load()},
				[4]uint64{m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp})
		}
	}
}

// Fixed (lock-free only, Counts not linearizable): Counts must not report a
// closed generation with fewer calls than outcomes of that generation that
// returned before Counts started (R13; Counts' doc allows missing only
// outcomes still in flight). Counts loaded the state word, then the ring; a
// transition in between advanced the ring to the next generation, and
// Counts returned the old closed generation with an empty window. Repro:
// Reset; two failures recorded (below minimum calls) and returned; a
// reader's Counts races a ForceOpen(0): it reported {State: closed,
// Generation: G, Calls: 0}. Counts now re-reads the word after the window
// and starts over if a transition committed in between.
func TestAdv5_CountsNeverLosesCompletedOutcomes(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		b, err := mk.new(core.Config{WindowSize: 10, MinimumNumberOfCalls: 5, FailureRateThreshold: 50,
			OpenDuration: time.Second, Clock: core.NewManualClock(0)})
		require.NoError(t, err)
		var done atomic.Uint64 // gen<<1|1 once two outcomes of gen have returned
		var stop atomic.Bool
		var bad atomic.Value
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				d := done.Load()
				if d == 0 {
					continue
				}
				c := b.Counts()
				if c.State == core.Closed && uint64(c.Generation) == d>>1 && c.Calls != 2 {
					bad.CompareAndSwap(nil, fmt.Sprintf("generation %d had 2 completed outcomes; Counts %+v", d>>1, c))
					return
				}
			}
		}()
		for range rounds(200000, 20000) {
			b.Reset()
			p, _ := b.Allow()
			b.Record(p, core.Failure)
			q, _ := b.Allow()
			b.Record(q, core.Failure)
			done.Store(uint64(p.Generation)<<1 | 1)
			_ = b.ForceOpen(0)
			if bad.Load() != nil {
				break
			}
		}
		stop.Store(true)
		wg.Wait()
		if v := bad.Load(); v != nil {
			t.Fatal(v)
		}
	})
}
