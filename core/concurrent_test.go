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
	"github.com/casbreaker/casbreaker/internal/difftest"
)

// Retry-after hints, the half-open max wait, manual control and metrics keep
// their one-winner rules under contention.
func TestFeaturesConcurrent(t *testing.T) {
	t.Run("hinted failures racing: one trip, the rest stale", func(t *testing.T) { forEachImpl(t, concurrentHintedFailures) })
	t.Run("max-wait restart racing: one new generation, one probe", func(t *testing.T) { forEachImpl(t, concurrentMaxWaitRestart) })
	t.Run("controls racing: one notification each, in order", func(t *testing.T) { forEachImpl(t, concurrentControls) })
	t.Run("metrics exact under contention", func(t *testing.T) { forEachImpl(t, concurrentMetrics) })
	t.Run("open-duration function racing: one trip, at most one panic", func(t *testing.T) { forEachImpl(t, concurrentOpenDurationFunc) })
	t.Run("probe gate racing: no slot leaked, every probe let go reported", func(t *testing.T) { forEachImpl(t, concurrentProbeGate) })
	t.Run("reconfigure racing probes: the new limit from its return", func(t *testing.T) { forEachImpl(t, concurrentReconfigureProbes) })
	t.Run("reconfigure racing outcomes: each kept once", func(t *testing.T) { forEachImpl(t, concurrentReconfigureOutcomes) })
	t.Run("reconfigure racing probes' verdicts: gate, probes and metrics exact", func(t *testing.T) { forEachImpl(t, concurrentReconfigureVerdicts) })
	t.Run("reconfigure racing the storm: one notification each, gate and metrics exact", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, mk maker) {
			for round := range rounds(6, 2) {
				controlStorm(t, mk, uint64(round), false, true)
			}
		})
	})
}

// featureWorkers is how many goroutines each of those races runs.
const featureWorkers = 16

// concurrentHintedFailures: one of the hinted failures racing trips the
// breaker; the rest are stale and dropped.
func concurrentHintedFailures(t *testing.T, mk maker) {
	for range rounds(50, 10) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1000, OpenDuration: time.Second,
			MaxRetryAfter: time.Minute, CollectMetrics: true})
		permits := make([]core.Permit, featureWorkers)
		for i := range permits {
			permits[i] = r.A()
		}
		parallel(featureWorkers, func(i int) {
			r.B.Done(permits[i], core.WithRetryAfter(errFail, time.Duration(i+10)*time.Second))
		})
		require.Len(t, r.CBs(), 1)
		require.Equal(t, "C>O@0", r.CBs()[0])
		m := r.B.Metrics()
		require.Equal(t, [3]uint64{featureWorkers, 1, featureWorkers - 1}, [3]uint64{m.Admitted, m.Failures, m.Dropped})
		// The winner's hint, whichever it was: 10 s .. 25 s.
		p, err := r.B.Allow()
		require.ErrorIs(t, err, core.ErrOpen)
		require.GreaterOrEqual(t, p.RetryAfter, 10*time.Second)
		require.LessOrEqual(t, p.RetryAfter, 25*time.Second)
	}
}

// concurrentOpenDurationFunc: failures racing to trip a breaker whose
// open-duration function returns 10 s, or panics for half of them, with a
// jitter of up to half: one trip, one notification, the rest stale; at most
// one caller gets a panic (the one whose trip committed, for OpenDuration);
// the duration is the function's, or OpenDuration where the trip was
// committed on the deciding call's behalf or the function panicked
// (docs/design.md); and the breaker goes on to probe and close.
func concurrentOpenDurationFunc(t *testing.T, mk maker) {
	for _, window := range []int{0, 4} {
		for range rounds(50, 10) {
			c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: time.Minute,
				OpenDurationJitter: 0.5, CollectMetrics: true,
				OpenDurationFunc: func(_ int, err error) time.Duration {
					if errors.Is(err, difftest.ErrDurationPanics) {
						panic(err)
					}
					return 10 * time.Second
				}}
			if window > 0 {
				c.ConsecutiveFailures, c.WindowSize, c.FailureRateThreshold, c.MinimumNumberOfCalls = 0, window, 100, 1
			}
			r := mk.build(t, c)
			permits := make([]core.Permit, featureWorkers)
			for i := range permits {
				permits[i] = r.A()
			}
			var panics atomic.Int64
			parallel(featureWorkers, func(i int) {
				defer func() {
					if recover() != nil {
						panics.Add(1)
					}
				}()
				err := errFail
				if i%2 == 1 {
					err = difftest.ErrDurationPanics
				}
				r.B.Done(permits[i], err)
			})
			require.Equal(t, []string{"C>O@0"}, r.CBs())
			require.LessOrEqual(t, panics.Load(), int64(1))
			m := r.B.Metrics()
			require.Equal(t, [2]uint64{1, featureWorkers - 1}, [2]uint64{m.Failures, m.Dropped})
			d := r.B.RetryAfter()
			ok := d >= time.Second && d <= 1500*time.Millisecond || d >= 10*time.Second && d <= 15*time.Second && panics.Load() == 0
			require.True(t, ok, "open for %v after %d panics", d, panics.Load())
			r.Clock.Advance(d)
			p := r.A()
			require.True(t, p.Probe)
			r.B.Done(p, nil)
			r.Is(core.Closed)
		}
	}
}

// concurrentMaxWaitRestart: callers racing the max-wait restart of a full
// half-open breaker: one new generation, whose slots they share.
func concurrentMaxWaitRestart(t *testing.T, mk maker) {
	for range rounds(50, 10) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second,
			MaxWaitInHalfOpen: 2 * time.Second, PermittedCallsInHalfOpen: 3, CollectMetrics: true})
		r.X(core.Failure)
		r.At(5)
		lost := []core.Permit{r.A(), r.A(), r.A()}
		r.At(7)
		var admitted, odd atomic.Int64
		parallel(featureWorkers, func(int) {
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
		require.Equal(t, [3]uint64{1 + 3 + 3, featureWorkers - 3, 3}, [3]uint64{m.Admitted, m.RejectedHalfOpenFull, m.Dropped})
	}
}

// halfGate is a core.ProbeGate that refuses every other probe, keeping
// count of the probes it let go that are not yet reported.
type halfGate struct {
	asked, out, refused, done atomic.Int64
}

func (g *halfGate) AdmitProbe(core.Permit) (time.Duration, error) {
	if g.asked.Add(1)%2 == 0 {
		g.refused.Add(1)
		return time.Second, fmt.Errorf("refused by the gate: %w", core.ErrHalfOpenFull)
	}
	g.out.Add(1)
	return 0, nil
}

func (g *halfGate) ProbeDone(core.Permit, core.Outcome) {
	g.done.Add(1)
	g.out.Add(-1)
}

// concurrentProbeGate: featureWorkers asking for probes of one half-open
// generation through a gate that refuses half of them, each probe let go
// given back as Ignored: the gate never has more out than the breaker's
// slots, hears every probe it let go once, no slot leaks, and Metrics
// count a refused probe as a half-open-full rejection, not an admission.
func concurrentProbeGate(t *testing.T, mk maker) {
	gate := new(halfGate)
	r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
		PermittedCallsInHalfOpen: 3, CollectMetrics: true, ProbeGate: gate})
	r.X(core.Failure)
	r.At(1)
	n := rounds(400, 50)
	var letGo, full, held, most atomic.Int64
	parallel(featureWorkers, func(int) {
		for range n {
			p, err := r.B.Allow()
			switch {
			case err == nil && p.Probe:
				letGo.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				held.Add(-1)
				r.B.Record(p, core.Ignored)
			case errors.Is(err, core.ErrHalfOpenFull):
				full.Add(1)
			default:
				t.Errorf("Allow in half-open: %+v, %v", p, err)
			}
		}
	})
	require.Zero(t, gate.out.Load(), "probes let go and not reported to the gate")
	// Held by callers, not as the gate counts them: the gate hears a
	// report after the breaker took it back (R17), so another probe may
	// be let go in between.
	require.LessOrEqual(t, most.Load(), int64(3), "more probes out at once than the breaker's slots")
	require.Equal(t, letGo.Load(), gate.done.Load())
	require.Equal(t, gate.asked.Load(), letGo.Load()+gate.refused.Load())
	require.Equal(t, 0, r.B.Counts().ProbesInFlight, "a slot leaked")
	m := r.B.Metrics()
	require.EqualValues(t, 1+letGo.Load(), m.Admitted, "the tripping call and the probes let go")
	require.EqualValues(t, full.Load(), m.RejectedHalfOpenFull, "the gate's refusals and the breaker's own")
	require.EqualValues(t, letGo.Load(), m.Ignored)
	require.Positive(t, gate.refused.Load())
}

// concurrentControls: featureWorkers racing every manual control: one notification per control, in one chain.
func concurrentControls(t *testing.T, mk maker) {
	r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true})
	n := rounds(200, 50)
	parallel(featureWorkers, func(i int) {
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
	total := featureWorkers * n
	require.Len(t, tr, total) // successes never trip; probes need the clock to move
	var last core.Transition
	for i, x := range tr {
		require.True(t, difftest.Follows(last, x), "notification %d %+v after %+v", i, x, last)
		last = x
	}
	require.Equal(t, last.To, r.B.Counts().State)
	var sum uint64
	m := r.B.Metrics()
	for _, row := range m.Transitions {
		for _, v := range row {
			sum += v
		}
	}
	require.EqualValues(t, total, sum)
}

// concurrentMetrics: Metrics count exactly under contention, in closed,
// disabled and metrics-only.
func concurrentMetrics(t *testing.T, mk maker) {
	r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 100, CollectMetrics: true, Classifier: classify})
	n := rounds(500, 100)
	var rejected atomic.Int64
	run := func() {
		parallel(featureWorkers, func(i int) {
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
	total := uint64(featureWorkers * n)
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
}

// Callers, a controller issuing every manual control, and a clock that
// jumps, all at once, with max wait, ramp-up, hints and metrics on, every
// operation run through the shared interpreter (difftest.Apply) and checked
// on what it observed, with a probe gate that refuses a third of the probes
// (stormGate). Guards: probes in flight per half-open generation, from the
// gate letting them go to their report, never exceed
// PermittedCallsInHalfOpen (R6) even across max-wait restarts and
// controls; once all returned, no probe slot is held and the gate heard
// one ProbeDone per probe it let go (R17); notifications form one chain (each from is the previous to,
// generations consecutive, R12); Counts snapshots are possible ones (a
// closed count window never shows a window that trips, Failures <= Calls <=
// W, probe counts within bounds); and once everything returned, every
// admitted permit was counted exactly once as acted on or dropped, the
// transitions counted equal the notifications, and the rejections counted
// equal the rejections returned.
//
// The controller is paced (a bounded number of controls per caller op);
// TestNotificationStormKeepsGenerations runs it unpaced.
func TestConcurrentControlsTripsProbes(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for round := range rounds(6, 2) {
			controlStorm(t, mk, uint64(round), false, false)
		}
	})
}

// R12 under an unpaced controller (controls in a tight loop, full size):
// the lock-free dispatcher can fall more than 2^20 transitions behind its
// listener. A dispatcher that named events by generation mod 2^20 would
// then deliver an event of the next wrap in place of the current one (for
// example {From: disabled, To: open, Generation: 73478} right after {From:
// closed, To: metrics-only, Generation: 73477}). Events are sequenced by the
// 64-bit generation, so the notifications still form one chain;
// TestListenerFarBehindGetsEveryEventInOrder holds a backlog past 2^20
// deterministically.
func TestNotificationStormKeepsGenerations(t *testing.T) {
	if testing.Short() {
		t.Skip("an unpaced storm of controls: full runs only")
	}
	controlStorm(t, maker{new: impls[0].New}, 0, true, false)
}

// stormProbes is the storm config's PermittedCallsInHalfOpen.
const stormProbes = 2

// storm is one run of controlStorm: the breaker and what its callers,
// controller and listener observed.
type storm struct {
	b   breakers.Breaker
	clk *core.ManualClock

	nmu   sync.Mutex
	chain []core.Transition // the notifications, in delivery order
	gap   string            // the first one that did not follow its predecessor

	pmu      sync.Mutex
	inFlight map[uint64]int // probes held, by generation
	letGo    map[uint64]int // probes the gate let go, by generation
	told     map[uint64]int // ProbeDone calls the gate heard, by generation
	reported map[uint64]int // probe permits the callers reported, by generation
	gateRng  *rand.Rand     // the gate's refusals; guarded by pmu

	bad      atomic.Value     // the first impossible observation
	rejected [4]atomic.Uint64 // by reason, in difftest.Sentinels order

	gate     slots         // the OpenGate, with room for the one breaker
	reconfs  atomic.Int64  // Reconfigure calls that returned nil
	reconfed []core.Config // the controller's Reconfigure configs, alternating
}

// controlStorm runs three callers and a controller on one breaker from mk
// (unpaced: the controller in a tight loop) and checks what they observed.
// reconfigure: the controller also reconfigures the breaker, between two
// sets of rules that keep every bound the guards check (a window of 6 or
// 8, probe limits and verdicts no larger), so that kept probe counts reach
// verdicts, windows are copied under records, and controls, probes and
// trips race the takeover.
func controlStorm(t *testing.T, mk maker, round uint64, unpaced, reconfigure bool) {
	s := &storm{clk: core.NewManualClock(0), inFlight: map[uint64]int{}, letGo: map[uint64]int{}, told: map[uint64]int{},
		reported: map[uint64]int{}, gateRng: rand.New(rand.NewPCG(round, 7)), gate: slots{capacity: 1}}
	c := core.Config{WindowSize: 8, MinimumNumberOfCalls: 2, FailureRateThreshold: 50, OpenDuration: time.Millisecond,
		PermittedCallsInHalfOpen: stormProbes, SuccessesToClose: 3, FailuresToReopen: 2, MaxWaitInHalfOpen: 2 * time.Millisecond,
		RampUpDuration: 5 * time.Millisecond, RampUpStartPercent: 20, MaxRetryAfter: 3 * time.Millisecond,
		CollectMetrics: true, Classifier: classify, Clock: s.clk, OnStateChange: s.listen, ProbeGate: (*stormGate)(s),
		OpenGate: &s.gate}
	b, err := mk.new(c)
	require.NoError(t, err)
	if reconfigure {
		tight := c
		tight.WindowSize, tight.OpenDuration, tight.PermittedCallsInHalfOpen = 6, 2*time.Millisecond, stormProbes-1
		tight.SuccessesToClose, tight.FailuresToReopen, tight.MaxWaitInHalfOpen = 2, 1, 3*time.Millisecond
		tight.RampUpDuration, tight.MaxRetryAfter = 4*time.Millisecond, 0 // hints off, then on again
		s.reconfed = []core.Config{tight, c}
	}
	s.b = b
	opsPer := rounds(1500, 800)
	var stop atomic.Bool
	var callers, ctrl sync.WaitGroup
	for w := range 3 {
		callers.Go(func() { s.caller(rand.New(rand.NewPCG(round, uint64(w))), opsPer) })
	}
	ctrl.Go(func() {
		rng := rand.New(rand.NewPCG(round, 99))
		for i := 0; !stop.Load() && (unpaced || i < 3*opsPer); i++ {
			if !unpaced {
				runtime.Gosched()
			}
			s.apply(stormControl(rng))
			if len(s.reconfed) > 0 && rng.IntN(3) == 0 {
				if err := s.b.(reconfigurer).Reconfigure(s.reconfed[s.reconfs.Load()%2]); err != nil {
					s.report("Reconfigure: " + err.Error())
				} else {
					s.reconfs.Add(1)
				}
				// The reads the difftest operations lack, racing it too.
				if snap, err := s.b.Snapshot(time.Unix(1e9, 0), true); err != nil || len(snap.Window) > 8 {
					s.report(fmt.Sprintf("Snapshot %+v, %v", snap, err))
				}
				if d := s.b.RetryAfter(); d < 0 && d != core.WaitForever {
					s.report(fmt.Sprintf("RetryAfter %v", d))
				}
			}
			s.apply(difftest.Op{Kind: difftest.State})
			s.apply(difftest.Op{Kind: difftest.Metrics})
		}
	})
	callers.Wait()
	stop.Store(true)
	ctrl.Wait()
	s.check(t)
}

func (s *storm) apply(op difftest.Op) difftest.Obs { return difftest.Apply(s.b, s.clk, op) }

func (s *storm) report(msg string) { s.bad.CompareAndSwap(nil, msg) }

// listen is the breaker's OnStateChange: it keeps the chain.
func (s *storm) listen(tr core.Transition) {
	s.nmu.Lock()
	defer s.nmu.Unlock()
	var last core.Transition
	if n := len(s.chain); n > 0 {
		last = s.chain[n-1]
	}
	if s.gap == "" && !followsOrKeeps(last, tr) {
		s.gap = fmt.Sprintf("%+v after %+v (notification %d)", tr, last, len(s.chain)+1)
	}
	s.chain = append(s.chain, tr)
}

// caller runs n calls: Allow, a Counts while the permit is held, and an
// outcome drawn by rng.
func (s *storm) caller(rng *rand.Rand, n int) {
	for range n {
		o := s.apply(difftest.Op{Kind: difftest.Allow})
		if !o.Err.Nil() {
			s.rejection(o.Err)
			continue
		}
		p := o.Permit
		// A probe is held from the gate's AdmitProbe on (stormGate).
		s.possible(s.apply(difftest.Op{Kind: difftest.Counts}).Counts)
		if p.Probe {
			s.probe(p.Generation, -1)
			s.pmu.Lock()
			s.reported[p.Generation]++
			s.pmu.Unlock()
		}
		switch rng.IntN(7) {
		case 0, 1, 2:
			s.apply(difftest.Op{Kind: difftest.Done, Permit: p})
		case 3:
			s.apply(difftest.Op{Kind: difftest.Done, Permit: p, Err: errFail})
		case 4:
			s.apply(difftest.Op{Kind: difftest.Done, Permit: p, Err: errIgnored})
		case 5:
			s.apply(difftest.Op{Kind: difftest.Done, Permit: p, Err: core.WithRetryAfter(errFail, time.Duration(rng.IntN(5))*time.Millisecond)})
		case 6:
			s.apply(difftest.Op{Kind: difftest.RecordHint, Permit: p, D: time.Duration(rng.IntN(3) - 1)})
		}
	}
}

// stormControl is the controller's next operation: a manual control or a
// clock jump (back a millisecond, or ahead up to 1.5 ms).
func stormControl(rng *rand.Rand) difftest.Op {
	switch rng.IntN(12) {
	case 0:
		return difftest.Op{Kind: difftest.ForceOpen, D: time.Duration(rng.IntN(3)) * time.Millisecond}
	case 1:
		return difftest.Op{Kind: difftest.Disable}
	case 2:
		return difftest.Op{Kind: difftest.MetricsOnly}
	case 3, 4:
		return difftest.Op{Kind: difftest.Reset}
	case 5:
		return difftest.Op{Kind: difftest.Advance, D: -time.Millisecond}
	case 6:
		return difftest.Op{Kind: difftest.HalfOpen}
	}
	return difftest.Op{Kind: difftest.Advance, D: time.Duration(rng.IntN(1500)) * time.Microsecond}
}

// rejection counts a refusal by its reason.
func (s *storm) rejection(e difftest.Err) {
	for i, r := range difftest.Sentinels[:4] {
		if e.Reason() == r {
			s.rejected[i].Add(1)
			return
		}
	}
	s.report("unknown rejection " + e.String())
}

// probe moves the count of probes held in generation gen by delta.
func (s *storm) probe(gen uint64, delta int) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	s.inFlight[gen] += delta
	if n := s.inFlight[gen]; n > stormProbes {
		s.report(fmt.Sprintf("%d probes in flight in generation %d", n, gen))
	}
}

// stormGate is the storm's core.ProbeGate: it refuses a third of the
// probes at random, some with a zero wait, and holds the probes it lets go
// to R6 (storm.probe) from the moment it lets them go until their caller
// reports them.
type stormGate storm

func (g *stormGate) AdmitProbe(p core.Permit) (time.Duration, error) {
	s := (*storm)(g)
	s.pmu.Lock()
	refuse, wait := s.gateRng.IntN(3) == 0, time.Duration(s.gateRng.IntN(3))*time.Millisecond
	if !refuse {
		s.letGo[p.Generation]++
	}
	s.pmu.Unlock()
	if refuse {
		return wait, errGateRefused
	}
	s.probe(p.Generation, 1)
	return 0, nil
}

func (g *stormGate) ProbeDone(p core.Permit, _ core.Outcome) {
	s := (*storm)(g)
	s.pmu.Lock()
	s.told[p.Generation]++
	s.pmu.Unlock()
}

// possible reports a Counts snapshot no sequence of calls could produce.
func (s *storm) possible(c core.Counts) {
	switch {
	case c.Failures > c.Calls || c.Calls > 8 || c.SlowFailures > min(c.SlowCalls, c.Failures):
		s.report(fmt.Sprintf("torn counts %+v", c))
	case c.State == core.Closed && c.Calls >= 2 && c.Failures*100 >= 50*c.Calls:
		s.report(fmt.Sprintf("closed with a window that trips %+v", c))
	case c.ProbesInFlight > stormProbes || c.ProbeSuccesses >= 3 || c.ProbeFailures >= 2 ||
		c.ProbesInFlight+c.ProbeSuccesses+c.ProbeFailures > 3+2-1:
		s.report(fmt.Sprintf("probe counts %+v", c))
	}
}

// check holds the storm, once everything returned, to its guards.
func (s *storm) check(t *testing.T) {
	if v := s.bad.Load(); v != nil {
		t.Fatal(v)
	}
	s.nmu.Lock()
	gap, n := s.gap, len(s.chain)
	var last core.Transition
	if n > 0 {
		last = s.chain[n-1]
	}
	s.nmu.Unlock()
	require.Empty(t, gap)
	require.Equal(t, last.Generation, s.b.Counts().Generation, "generation vs last notification")
	var reconfs int
	s.nmu.Lock()
	for _, tr := range s.chain {
		if tr.Reason == core.ReasonReconfigured {
			reconfs++
		}
	}
	s.nmu.Unlock()
	require.EqualValues(t, s.reconfs.Load(), reconfs, "one notification per Reconfigure")
	s.gate.mu.Lock()
	held, negative := s.gate.held, s.gate.negative
	s.gate.mu.Unlock()
	require.False(t, negative, "an OpenGate slot released twice")
	st := s.b.State()
	require.Equal(t, map[bool]int{true: 1}[st == core.Open || st == core.HalfOpen || st == core.ForcedOpen], held,
		"OpenGate slots held in %v", st)
	require.Zero(t, s.b.Counts().ProbesInFlight, "every probe reported, yet a slot is held")
	s.pmu.Lock()
	require.Equal(t, s.letGo, s.reported, "probes let go by the gate vs reported by the callers, by generation")
	require.Equal(t, s.reported, s.told, "probes reported vs ProbeDone calls, by generation")
	s.pmu.Unlock()
	m := s.b.Metrics()
	require.Equal(t, m.Admitted, m.Successes+m.Failures+m.Ignored+m.Dropped, "conservation %+v", m)
	var trans uint64
	for i := range m.Transitions {
		for j := range m.Transitions[i] {
			trans += m.Transitions[i][j]
		}
	}
	require.Equal(t, uint64(n-reconfs), trans, "transitions counted vs notified")
	require.Equal(t, [4]uint64{s.rejected[0].Load(), s.rejected[1].Load(), s.rejected[2].Load(), s.rejected[3].Load()},
		[4]uint64{m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp})
}

// Counts must not report a closed generation with fewer calls than
// outcomes of that generation that returned before Counts started (R13;
// Counts' doc allows missing only outcomes still in flight). The lock-free
// Counts loads the state word, then the ring; a transition in between
// advances the ring to the next generation, and a Counts that trusted its
// first load would return the old closed generation with an empty window.
// The workload: Reset; two failures recorded (below minimum calls) and
// returned; a reader's Counts races a ForceOpen(0), and must never report
// {State: closed, Generation: G, Calls: 0}. Counts re-reads the word after
// the window and starts over if a transition committed in between.
func TestCountsNeverLosesCompletedOutcomes(t *testing.T) {
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

// followsOrKeeps is difftest.Follows, or for a reconfiguration's
// notification: the state and the generation of the one before kept.
func followsOrKeeps(last, tr core.Transition) bool {
	if tr.Reason == core.ReasonReconfigured {
		return tr.From == last.To && tr.To == last.To && tr.Generation == last.Generation && tr.Changed != ""
	}
	return difftest.Follows(last, tr) && tr.Changed == ""
}

// reconfigurer is a breaker with Reconfigure.
type reconfigurer interface {
	Reconfigure(core.Config) error
	Settings() core.Settings
}

// concurrentReconfigureProbes: a half-open breaker permitting 5 probes,
// 4 of them in flight, is reconfigured to permit 1 while workers ask for
// probes. The fifth probe may go only to an Allow that began before
// Reconfigure returned (a decision on the old rules must not land after
// the new ones took effect: one probe too many), at most one goes, and the
// counts in flight survive the reconfiguration.
func concurrentReconfigureProbes(t *testing.T, mk maker) {
	const permitted = 5
	for range rounds(200, 20) {
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: permitted,
			SuccessesToClose: permitted, MaxWaitInHalfOpen: core.WaitForever}
		r := mk.build(t, c)
		r.B.Record(r.A(), core.Failure)
		r.Clock.Advance(time.Second)
		for range permitted - 1 {
			require.True(t, r.A().Probe)
		}
		var returned atomic.Bool
		var late, admitted atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.PermittedCallsInHalfOpen = 1
			require.NoError(t, r.B.(reconfigurer).Reconfigure(c))
			returned.Store(true)
		}()
		parallel(featureWorkers, func(int) {
			for range 20 {
				after := returned.Load()
				if _, err := r.B.Allow(); err == nil {
					admitted.Add(1)
					if after {
						late.Add(1)
					}
				}
				runtime.Gosched()
			}
		})
		<-done
		require.Zero(t, late.Load(), "a probe admitted by an Allow that began after Reconfigure returned")
		require.LessOrEqual(t, admitted.Load(), int64(1))
		require.Equal(t, permitted-1+int(admitted.Load()), r.B.Counts().ProbesInFlight)
		_, err := r.B.Allow()
		require.ErrorIs(t, err, core.ErrHalfOpenFull)
	}
}

// concurrentReconfigureOutcomes: workers record failures and slow
// successes into a window that a second goroutine reconfigures again and
// again (its size up and down, its thresholds), never below what is
// recorded: once all are done, the window holds every outcome exactly
// once, none lost in a copy and none counted twice.
func concurrentReconfigureOutcomes(t *testing.T, mk maker) {
	const per = 6 // outcomes per worker: 96 in all, below every size below
	for _, kind := range []core.WindowType{core.CountBased} {
		for range rounds(100, 10) {
			c := core.Config{WindowType: kind, WindowSize: 100, FailureRateThreshold: 100, MinimumNumberOfCalls: 100,
				SlowCallDurationThreshold: time.Second, SlowCallRateThreshold: 100}
			r := mk.build(t, c)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c.WindowSize = []int{100, 200, 150}[i%3]
					c.FailureRateThreshold = 99 - i%2
					require.NoError(t, r.B.(reconfigurer).Reconfigure(c))
					runtime.Gosched()
				}
			}()
			parallel(featureWorkers, func(i int) {
				for k := range per {
					p := r.A()
					if (i+k)%2 == 0 {
						r.B.Record(p, core.Failure)
						continue
					}
					r.Clock.Advance(0) // the clock stays: a slow call is one measured as such
					p.Start -= 2 * time.Second
					r.B.Record(p, core.Success)
				}
			})
			close(stop)
			<-done
			got := r.B.Counts()
			require.Equal(t, core.Closed, got.State)
			require.Equal(t, uint64(featureWorkers*per), got.Calls, "%+v", got)
			require.Equal(t, uint64(featureWorkers*per/2), got.Failures, "%+v", got)
			require.Equal(t, uint64(featureWorkers*per/2), got.SlowCalls, "%+v", got)
		}
	}
}

// countingProbeGate lets every probe go and counts what it let go and
// what it was told.
type countingProbeGate struct{ letGo, told atomic.Int64 }

func (g *countingProbeGate) AdmitProbe(core.Permit) (time.Duration, error) {
	g.letGo.Add(1)
	return 0, nil
}

func (g *countingProbeGate) ProbeDone(core.Permit, core.Outcome) { g.told.Add(1) }

// concurrentReconfigureVerdicts: probes report successes and failures
// while a Reconfigure lowers and raises SuccessesToClose and
// FailuresToReopen, so that kept probe counts reach verdicts at the
// takeover, racing verdicts the probes reach themselves, and a
// consecutive-failures trip takes the breaker back to open for the next
// half-open period. Once all returned: the notifications form one chain
// with one per Reconfigure, the OpenGate holds exactly the slot of an
// ejected breaker (never released twice), every probe let go was told
// once, no probe slot is held, and every admitted permit was counted
// once, as acted on or dropped.
func concurrentReconfigureVerdicts(t *testing.T, mk maker) {
	for range rounds(60, 10) {
		gate, pg := &slots{capacity: 1}, new(countingProbeGate)
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 4,
			SuccessesToClose: 4, FailuresToReopen: 4, MaxWaitInHalfOpen: core.WaitForever,
			CollectMetrics: true, OpenGate: gate, ProbeGate: pg}
		var nmu sync.Mutex
		var chain []core.Transition
		gap := ""
		r := mk.build(t, c, func(tr core.Transition) {
			nmu.Lock()
			defer nmu.Unlock()
			var last core.Transition
			if len(chain) > 0 {
				last = chain[len(chain)-1]
			}
			if gap == "" && !followsOrKeeps(last, tr) {
				gap = fmt.Sprintf("%+v after %+v", tr, last)
			}
			chain = append(chain, tr)
		})
		var reconfs atomic.Int64
		var rejected atomic.Uint64
		done := make(chan struct{})
		go func() {
			defer close(done)
			rules := [][2]int{{2, 2}, {1, 3}, {4, 1}, {3, 4}}
			for i := range 40 {
				r.Clock.Advance(time.Second)
				c.SuccessesToClose, c.FailuresToReopen = rules[i%4][0], rules[i%4][1]
				require.NoError(t, r.B.(reconfigurer).Reconfigure(c))
				reconfs.Add(1)
				runtime.Gosched()
			}
		}()
		parallel(4, func(i int) {
			for j := range 60 {
				p, err := r.B.Allow()
				if err != nil {
					rejected.Add(1)
					runtime.Gosched()
					continue
				}
				if (i+j)%3 == 0 {
					r.B.Record(p, core.Failure)
				} else {
					r.B.Done(p, nil)
				}
			}
		})
		<-done
		nmu.Lock()
		require.Empty(t, gap)
		var n, k int
		for _, tr := range chain {
			if tr.Reason == core.ReasonReconfigured {
				k++
			} else {
				n++
			}
		}
		nmu.Unlock()
		require.EqualValues(t, reconfs.Load(), k, "one notification per Reconfigure")
		st := r.B.Counts()
		gate.mu.Lock()
		require.False(t, gate.negative, "an OpenGate slot released twice")
		require.Equal(t, map[bool]int{true: 1}[st.State == core.Open || st.State == core.HalfOpen], gate.held, "slots held, %+v", st)
		gate.mu.Unlock()
		require.Zero(t, st.ProbesInFlight)
		require.Equal(t, pg.letGo.Load(), pg.told.Load(), "probes let go vs told")
		m := r.B.Metrics()
		require.Equal(t, m.Admitted, m.Successes+m.Failures+m.Ignored+m.Dropped, "conservation %+v", m)
		require.Equal(t, rejected.Load(), m.RejectedOpen+m.RejectedHalfOpenFull)
		var trans uint64
		for i := range m.Transitions {
			for j := range m.Transitions[i] {
				trans += m.Transitions[i][j]
			}
		}
		require.EqualValues(t, n, trans, "transitions counted vs notified")
	}
}
