package race_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// Contention tests of the issue-5 features: the half-open max wait, the
// manual controls, the metrics and the ramp-up after closing.

// featureLetter extends letter with the manual-control states.
func featureLetter(s core.State) string {
	switch s {
	case core.ForcedOpen:
		return "FO"
	case core.Disabled:
		return "D"
	case core.MetricsOnly:
		return "MO"
	}
	return letter(s)
}

func pairName(from, to core.State) string { return featureLetter(from) + ">" + featureLetter(to) }

// sortedKinds prints a transition tally in a stable order.
func sortedKinds(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%s:%d", k, m[k])
	}
	return sb.String()
}

// transitionsSum is the number of transitions a Metrics snapshot counts.
func transitionsSum(m core.Metrics) uint64 {
	var n uint64
	for i := range m.Transitions {
		for j := range m.Transitions[i] {
			n += m.Transitions[i][j]
		}
	}
	return n
}

// pairsOf counts notifications by (from, to), laid out like Metrics.Transitions.
func pairsOf(trs []core.Transition) (n [core.NumStates][core.NumStates]uint64) {
	for _, tr := range trs {
		n[tr.From][tr.To]++
	}
	return n
}

// Half-open max wait under contention (Config.MaxWaitInHalfOpen, R6, R8,
// R12). A breaker with N permitted probes trips, goes half-open and hands
// out all N probes, which are lost: taken and never completed. One unit
// before the max wait has passed a call is still ErrHalfOpenFull. Then the
// clock is set to the instant the max wait has passed (or, every other
// round, some way past it) and G goroutines call Allow through a start
// barrier. Every round must commit exactly one half-open -> half-open
// restart (one notification, one Metrics transition), whose caller holds the
// first probe of the new generation; exactly min(N, G) callers hold probes,
// all of the new generation, and the rest get ErrHalfOpenFull (the new
// generation's own max wait has not passed). Afterwards the N lost probes
// complete, as failures among others, and change nothing: they are stale.
func TestMaxWaitRestartAdmitsExactlyOne(t *testing.T) {
	procs(t, 8)
	for _, n := range []int{1, 3, 64} {
		for _, g := range []int{2, 8, 64} {
			t.Run(fmt.Sprintf("N=%d/G=%d", n, g), func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, newB newFunc) {
					rounds := size(3000, max(4, 400/g))
					maxWaitRounds(t, newB, n, g, rounds)
					t.Logf("%d rounds, each exactly one restart and %d probes", rounds, min(n, g))
				})
			})
		}
	}
}

func maxWaitRounds(t *testing.T, newB newFunc, n, g, rounds int) {
	// A max wait of 1 s is kept in units of 1 ms: the generation that starts
	// at 1 s has waited long enough at exactly 2 s.
	const open, maxWait = time.Second, time.Second
	want := min(n, g)
	workers := newGang(g)
	defer workers.stop()
	permits := make([]core.Permit, g)
	errs := make([]error, g)
	lost := make([]core.Permit, n)
	for round := range rounds {
		clock := core.NewManualClock(0)
		var rec transitions
		b := mustNew(t, newB, core.Config{
			ConsecutiveFailures:      1,
			OpenDuration:             open,
			PermittedCallsInHalfOpen: n,
			MaxWaitInHalfOpen:        maxWait,
			CollectMetrics:           true,
			Clock:                    clock,
			OnStateChange:            rec.listen,
		})
		tripWithOneFailure(t, b, round)
		clock.Set(open)
		for i := range n {
			var err error
			if lost[i], err = b.Allow(); err != nil || !lost[i].Probe || lost[i].Generation != 2 {
				t.Fatalf("round %d: probe %d of %d: %+v %v, want a probe of generation 2", round, i, n, lost[i], err)
			}
		}
		restart := open + maxWait
		clock.Set(restart - time.Millisecond) // one unit short of the max wait
		if _, err := b.Allow(); !errors.Is(err, core.ErrHalfOpenFull) {
			t.Fatalf("round %d: one unit before the max wait: %v, want ErrHalfOpenFull", round, err)
		}
		if round%2 == 1 {
			restart += time.Duration(1+round%7) * 100 * time.Millisecond // past it, within the next max wait
		}
		clock.Set(restart)

		workers.run(func(i int) { permits[i], errs[i] = b.Allow() })

		admitted := 0
		for i := range g {
			switch {
			case errs[i] == nil:
				admitted++
				if !permits[i].Probe || permits[i].Generation != 3 {
					t.Fatalf("round %d: caller %d got %+v, want a probe of generation 3", round, i, permits[i])
				}
			case !errors.Is(errs[i], core.ErrHalfOpenFull):
				t.Fatalf("round %d: caller %d: %v, want ErrHalfOpenFull", round, i, errs[i])
			}
		}
		if admitted != want {
			t.Fatalf("round %d: %d of %d callers admitted after the max wait with %d permitted probes, want exactly %d", round, admitted, g, n, want)
		}
		c := b.Counts()
		if c.State != core.HalfOpen || c.Generation != 3 || c.ProbesInFlight != want || c.ProbeSuccesses != 0 {
			t.Fatalf("round %d: counts %+v, want half-open generation 3 with %d probes in flight", round, c, want)
		}
		trs := rec.get()
		if len(trs) != 3 || trs[2].From != core.HalfOpen || trs[2].To != core.HalfOpen || trs[2].Generation != 3 || trs[2].At != restart {
			t.Fatalf("round %d: notifications %+v, want C->O, O->H, then exactly one H->H at generation 3, t=%v", round, trs, restart)
		}
		m := b.Metrics()
		if m.Transitions[core.HalfOpen][core.HalfOpen] != 1 || transitionsSum(m) != 3 ||
			m.Admitted != uint64(1+n+want) || m.RejectedHalfOpenFull != uint64(1+g-want) {
			t.Fatalf("round %d: metrics %+v, want 3 transitions (one H->H), %d admitted, %d rejected half-open full", round, m, 1+n+want, 1+g-want)
		}

		// The lost probes of generation 2 come back: stale, they change nothing.
		for i, p := range lost {
			b.Record(p, core.Outcome(i%3))
		}
		if c2 := b.Counts(); c2 != c {
			t.Fatalf("round %d: the lost probes' outcomes changed the counts from %+v to %+v", round, c, c2)
		}
		if m2 := b.Metrics(); m2.Dropped != uint64(n) || m2.Successes+m2.Ignored != 0 || m2.Failures != 1 || len(rec.get()) != 3 {
			t.Fatalf("round %d: after %d stale probe outcomes: metrics %+v, %d notifications; want them all dropped and only the trip's failure acted on", round, n, m2, len(rec.get()))
		}
	}
}

// Manual controls racing traffic (ForceOpen, Disable, MetricsOnly, Reset;
// R8, R12). Per round, six goroutines hammer Allow and Done with a mix of
// failures, successes and cancellations (consecutive-failures rule, a 4 ms
// open duration backed off to 16 ms, two probes, a half-open max wait and a
// ramp-up), goroutines 0 and 1 moving the clock 1 ms per call, so the
// breaker trips, probes, restarts, re-opens, closes and ramps; a third of
// the permits are held for a while first. Meanwhile the test goroutine
// issues manual controls in a random order: ForceOpen(0), ForceOpen(d) with
// d up to 16 ms, Disable, MetricsOnly and Reset, each after letting the
// traffic make a few calls (a gate keeps the traffic goroutines within a
// few calls of each other and of the controls). Checked:
//
//   - notifications chain (each From is the previous To, the first from
//     closed), generations run 1, 2, 3, ..., their number is the final
//     generation, and the last To is State() (or open, reported half-open
//     once its deadline passed); notifications to ForcedOpen and to Disabled
//     number exactly the ForceOpen(0) and Disable calls, and those from them
//     exactly the controls that followed them (only a control leaves them);
//   - a permit granted before a control began and completed after it
//     returned is stale: it is completed, among other ways, with a
//     retry-after hint of an hour, which would hold the breaker open for an
//     hour if it were acted on; no caller may ever see an open wait longer
//     than the longest configured open duration;
//   - after each ForceOpen(0) and Disable, once every call in flight at the
//     control has returned, the traffic (current and stale permits alike)
//     changes nothing: Counts stays the same, and no success, failure,
//     ignored outcome or transition is counted in Metrics;
//   - Metrics at the end: every Allow counted once as admitted or rejected
//     (by kind, as the callers saw it), every outcome once as acted on or
//     dropped, stale ones dropped, and Transitions equal the notifications.
func TestManualControlsRaceTraffic(t *testing.T) {
	procs(t, 8)
	rounds, controls := size(2000, 40), size(60, 30)
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		var f controlFigures
		f.kinds = map[string]int{}
		for round := range rounds {
			controlRound(t, newB, uint64(round), controls, &f)
		}
		t.Logf("%d rounds x %d controls: %d calls, %d admitted, %d notifications (%s); %d stale completions, %d of them in %d quiet windows after ForceOpen(0)/Disable",
			rounds, controls, f.calls, f.admitted, f.notes, sortedKinds(f.kinds), f.stale, f.quietStale, f.quiet)
		for i, k := range []string{"C>O", "O>H", "H>O", "H>C", "H>H", "MO>MO", "FO>C", "D>MO"} {
			if f.kinds[k] == 0 && (i < 5 || !testing.Short()) {
				t.Fatalf("the rounds never reached %s (%s): too tame to prove anything", k, sortedKinds(f.kinds))
			}
		}
		if f.stale == 0 || f.quietStale == 0 {
			t.Fatalf("no stale permit completed (%d, %d in quiet windows): too tame", f.stale, f.quietStale)
		}
	})
}

type controlFigures struct {
	calls, admitted, notes, stale, quietStale, quiet int64
	kinds                                            map[string]int
}

const (
	ctlOpen    = 4 * time.Millisecond
	ctlMaxOpen = 16 * time.Millisecond
	ctlHint    = time.Hour
	ctlTraffic = 6
	ctlLead    = 6
)

type heldPermit struct {
	p      core.Permit
	before int64 // controls begun when Allow had returned
	until  int   // complete normally at this call, if not known stale earlier
}

func controlRound(t *testing.T, newB newFunc, seed uint64, controls int, f *controlFigures) {
	clock := core.NewManualClock(0)
	var (
		mu    sync.Mutex
		got   []core.Transition
		fault atomic.Pointer[string]
	)
	fail := func(s string) { fault.CompareAndSwap(nil, &s) }
	listen := func(tr core.Transition) {
		mu.Lock()
		defer mu.Unlock()
		n := len(got)
		switch {
		case n == 0 && tr.From != core.Closed:
			fail(fmt.Sprintf("first notification %+v does not start from closed", tr))
		case n > 0 && got[n-1].To != tr.From:
			fail(fmt.Sprintf("notification %d %+v does not chain from %+v", n, tr, got[n-1]))
		case tr.Generation != uint64(n+1):
			fail(fmt.Sprintf("notification %d %+v has generation %d, want %d", n, tr, tr.Generation, n+1))
		}
		got = append(got, tr)
	}
	b := mustNew(t, newB, core.Config{
		ConsecutiveFailures: 4,
		OpenDuration:        ctlOpen, OpenDurationBackoff: 2, MaxOpenDuration: ctlMaxOpen,
		PermittedCallsInHalfOpen: 2, SuccessesToClose: 2,
		MaxWaitInHalfOpen: 6 * time.Millisecond,
		RampUpDuration:    8 * time.Millisecond, RampUpStartPercent: 50,
		MaxRetryAfter:  ctlHint,
		CollectMetrics: true,
		Clock:          clock, OnStateChange: listen,
	})

	var (
		// pace: traffic goroutine i may have made gate calls, and is
		// waiting at the gate or moving to target (the controller waits
		// for every one to reach it); cond wakes either side.
		pace                 sync.Mutex
		cond                 = sync.NewCond(&pace)
		stop                 bool
		gate, target         atomic.Int64
		ctlStarted, ctlDone  atomic.Int64
		ops                  [ctlTraffic]atomic.Int64
		allows               [ctlTraffic][5]int64 // admitted, ErrOpen, ErrHalfOpenFull, ErrForcedOpen, ErrRampingUp
		outcomes, staleDone  atomic.Int64
		traffic              sync.WaitGroup
		quietStale, quietWin int64
	)
	for gid := range ctlTraffic {
		traffic.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(gid)))
			var held []heldPermit
			normal := func(p core.Permit) {
				switch r := rng.IntN(20); {
				case r < 7:
					b.Record(p, core.Failure)
				case r < 15:
					b.Record(p, core.Success)
				case r < 17:
					b.Done(p, context.Canceled) // Ignored
				case r < 19:
					b.Done(p, errFail)
				default:
					b.Done(p, nil)
				}
				outcomes.Add(1)
			}
			for call := 0; ; call++ {
				if int64(call) >= gate.Load() {
					pace.Lock()
					for int64(call) >= gate.Load() && !stop {
						cond.Wait()
					}
					done := stop
					pace.Unlock()
					if done {
						break
					}
				}
				if gid < 2 {
					clock.Advance(time.Millisecond)
				}
				kept := held[:0]
				for _, h := range held {
					switch {
					case ctlDone.Load() > h.before && rng.IntN(4) == 0:
						// A control began after this permit was granted and
						// has returned: the permit is stale for good.
						switch rng.IntN(4) {
						case 0, 1:
							b.RecordHint(h.p, ctlHint)
						case 2:
							b.Done(h.p, core.WithRetryAfter(errFail, ctlHint))
						default:
							b.Record(h.p, core.Outcome(rng.IntN(3)))
						}
						outcomes.Add(1)
						staleDone.Add(1)
					case call >= h.until:
						normal(h.p)
					default:
						kept = append(kept, h)
					}
				}
				held = kept
				p, err := b.Allow()
				switch breakers.Reason(err) {
				case nil:
					allows[gid][0]++
					if len(held) < 4 && rng.IntN(3) == 0 {
						held = append(held, heldPermit{p: p, before: ctlStarted.Load(), until: call + 1 + rng.IntN(40)})
					} else {
						normal(p)
					}
				case core.ErrOpen:
					allows[gid][1]++
					if p.Wait > ctlMaxOpen+time.Millisecond {
						fail(fmt.Sprintf("Allow waits %v in open state, longer than any configured open duration: a stale retry-after hint (%v) was acted on", p.Wait, ctlHint))
					}
				case core.ErrHalfOpenFull:
					allows[gid][2]++
				case core.ErrForcedOpen:
					allows[gid][3]++
				case core.ErrRampingUp:
					allows[gid][4]++
				default:
					fail(fmt.Sprintf("Allow: unexpected error %v", err))
				}
				if ops[gid].Add(1) == target.Load() {
					pace.Lock()
					cond.Broadcast()
					pace.Unlock()
				}
			}
			for _, h := range held {
				normal(h.p)
			}
		})
	}
	stopTraffic := func() {
		pace.Lock()
		stop = true
		cond.Broadcast()
		pace.Unlock()
		traffic.Wait()
	}
	defer stopTraffic()
	// waitOps lets the traffic on: it returns once every traffic goroutine
	// has made at least extra calls more than the one furthest ahead had
	// made when it began (so, with extra >= 1, every call that was in flight
	// then has returned), and lets each go on to ctlLead calls beyond that,
	// no further. The gate keeps the goroutines within ctlLead calls of each
	// other at every control, so none runs far ahead of the controls, and it
	// bounds a storm of transitions: a goroutine can stay inside one call
	// for as long as others keep committing transitions, delivering their
	// notifications (core's dispatcher, notify.go). Both sides block rather
	// than spin: goroutines spinning on runtime.Gosched, 8 Ps on 2 cores,
	// make the scheduler the bottleneck, a hundred times slower.
	waitOps := func(extra int64) {
		pace.Lock()
		defer pace.Unlock()
		var to int64
		for i := range ops {
			to = max(to, ops[i].Load())
		}
		to += extra
		target.Store(to)
		gate.Store(to + ctlLead)
		cond.Broadcast()
		for i := range ops {
			for ops[i].Load() < to {
				cond.Wait()
			}
		}
	}

	rng := rand.New(rand.NewPCG(seed, 1<<20))
	var issued [5]int
	lastQuiet := false
	for c := range controls {
		waitOps(int64(1 + rng.IntN(12)))
		kind := rng.IntN(5)
		issued[kind]++
		ctlStarted.Add(1)
		var want core.State
		switch kind {
		case 0:
			if err := b.ForceOpen(0); err != nil {
				t.Fatalf("seed %d control %d: ForceOpen(0): %v", seed, c, err)
			}
			want = core.ForcedOpen
		case 1:
			if err := b.ForceOpen(time.Duration(1+rng.IntN(int(ctlMaxOpen/time.Millisecond))) * time.Millisecond); err != nil {
				t.Fatalf("seed %d control %d: ForceOpen(d): %v", seed, c, err)
			}
		case 2:
			b.Disable()
			want = core.Disabled
		case 3:
			b.MetricsOnly()
		case 4:
			b.Reset()
		}
		ctlDone.Add(1)
		lastQuiet = kind == 0 || kind == 2
		if !lastQuiet {
			continue
		}
		// ForcedOpen and Disabled: only a control leaves them, and no outcome
		// counts. Once the calls in flight at the control have returned,
		// nothing the traffic does may show.
		waitOps(1)
		c1, m1 := b.Counts(), b.Metrics()
		if c1.State != want || c1.Calls != 0 || c1.ConsecutiveFailures != 0 || c1.ProbesInFlight != 0 {
			t.Fatalf("seed %d control %d: counts %+v right after the control to %v", seed, c, c1, want)
		}
		s0 := staleDone.Load()
		waitOps(int64(3 + rng.IntN(8)))
		c2, m2 := b.Counts(), b.Metrics()
		quietStale += staleDone.Load() - s0
		quietWin++
		if c2 != c1 {
			t.Fatalf("seed %d control %d: traffic changed a %v breaker: counts %+v, then %+v", seed, c, want, c1, c2)
		}
		if m2.Successes != m1.Successes || m2.Failures != m1.Failures || m2.Ignored != m1.Ignored ||
			m2.SlowCalls != m1.SlowCalls || m2.Transitions != m1.Transitions {
			t.Fatalf("seed %d control %d: traffic was acted on in a %v breaker: metrics %+v, then %+v", seed, c, want, m1, m2)
		}
		if p := fault.Load(); p != nil {
			t.Fatalf("seed %d control %d: %s", seed, c, *p)
		}
	}
	stopTraffic()
	if p := fault.Load(); p != nil {
		t.Fatalf("seed %d: %s", seed, *p)
	}

	mu.Lock()
	trs := append([]core.Transition(nil), got...)
	mu.Unlock()
	cnt := b.Counts()
	if int(cnt.Generation) != len(trs) || len(trs) < controls {
		t.Fatalf("seed %d: %d notifications for generation %d after %d controls", seed, len(trs), cnt.Generation, controls)
	}
	last := trs[len(trs)-1].To
	if st := b.State(); st != last && (last != core.Open || st != core.HalfOpen) {
		t.Fatalf("seed %d: last notification says %v, State() says %v", seed, last, st)
	}
	var toFO, toD, fromQuiet int
	for _, tr := range trs {
		f.kinds[pairName(tr.From, tr.To)]++
		switch tr.To {
		case core.ForcedOpen:
			toFO++
		case core.Disabled:
			toD++
		}
		if tr.From == core.ForcedOpen || tr.From == core.Disabled {
			fromQuiet++
		}
	}
	wantFrom := issued[0] + issued[2]
	if lastQuiet {
		wantFrom--
	}
	if toFO != issued[0] || toD != issued[2] || fromQuiet != wantFrom {
		t.Fatalf("seed %d: %d notifications to forced-open, %d to disabled, %d from either; want %d, %d and %d (controls issued %v)",
			seed, toFO, toD, fromQuiet, issued[0], issued[2], wantFrom, issued)
	}

	m := b.Metrics()
	var sum [5]int64
	for gid := range allows {
		for k := range sum {
			sum[k] += allows[gid][k]
		}
	}
	calls := sum[0] + sum[1] + sum[2] + sum[3] + sum[4]
	gotAllow := [5]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp}
	for k := range sum {
		if gotAllow[k] != uint64(sum[k]) {
			t.Fatalf("seed %d: metrics count Allow results %v, the callers saw %v (admitted, open, half-open full, forced open, ramping up)", seed, gotAllow, sum)
		}
	}
	if acted := m.Successes + m.Failures + m.Ignored + m.Dropped; acted != uint64(outcomes.Load()) || m.Dropped < uint64(staleDone.Load()) {
		t.Fatalf("seed %d: %d outcomes (%d known stale) recorded, metrics %+v count %d, %d dropped", seed, outcomes.Load(), staleDone.Load(), m, acted, m.Dropped)
	}
	if m.Transitions != pairsOf(trs) || transitionsSum(m) != uint64(cnt.Generation) {
		t.Fatalf("seed %d: metrics transitions %v, notifications %v, generation %d", seed, m.Transitions, pairsOf(trs), cnt.Generation)
	}
	f.calls += calls
	f.admitted += sum[0]
	f.notes += int64(len(trs))
	f.stale += staleDone.Load()
	f.quietStale += quietStale
	f.quiet += quietWin
}

// Metrics conservation (Config.CollectMetrics, Metrics). G goroutines each
// make K calls on one breaker, moving the clock 200 us before each, and
// complete every permit exactly once with a fixed mix: Record success,
// failure and ignored, RecordHint with a hint and with none, Done with nil,
// context.Canceled and an error carrying a retry-after hint. The breaker
// trips (the rule, and the hints at once), probes, restarts after the max
// wait, re-opens with backoff, closes and ramps up all the while; two
// readers loop Metrics. Checked:
//
//   - every reader sees every counter (each Transitions cell included) never
//     decrease between two of its reads;
//   - at the end Admitted + every Rejected* == G*K, each exactly what the
//     callers saw (admitted, ErrOpen, ErrHalfOpenFull, ErrRampingUp, no
//     ErrForcedOpen);
//   - Successes + Failures + Ignored + Dropped == the outcomes recorded
//     (== Admitted), each of the first three at most the outcomes of that
//     kind recorded, and no slow call;
//   - the sum over Transitions is the final generation (far below 2^20),
//     and each cell equals the notifications of that pair.
func TestMetricsConserved(t *testing.T) {
	procs(t, 8)
	g, k := size(16, 8), size(20_000, 2_000)
	common := core.Config{
		OpenDuration: 2 * time.Millisecond, OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Millisecond,
		PermittedCallsInHalfOpen: 3, SuccessesToClose: 2,
		MaxWaitInHalfOpen: 5 * time.Millisecond,
		RampUpDuration:    4 * time.Millisecond, RampUpStartPercent: 25,
		MaxRetryAfter:  6 * time.Millisecond,
		CollectMetrics: true,
	}
	for _, tc := range []struct {
		name string
		set  func(*core.Config)
	}{
		{"consecutive", func(c *core.Config) { c.ConsecutiveFailures = 3 }},
		{"time-window", func(c *core.Config) {
			c.WindowType, c.WindowSize, c.FailureRateThreshold, c.MinimumNumberOfCalls = core.TimeBased, 1, 50, 6
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				cfg := common
				tc.set(&cfg)
				metricsRun(t, newB, cfg, g, k)
			})
		})
	}
}

func metricsRun(t *testing.T, newB newFunc, cfg core.Config, g, k int) {
	clock := core.NewManualClock(0)
	var rec transitions
	cfg.Clock, cfg.OnStateChange = clock, rec.listen
	b := mustNew(t, newB, cfg)

	// Per writer: Allow results (admitted, ErrOpen, ErrHalfOpenFull,
	// ErrForcedOpen, ErrRampingUp) and outcomes recorded (success,
	// failure, ignored).
	allows := make([][5]uint64, g)
	recorded := make([][3]uint64, g)
	var (
		writers, readers sync.WaitGroup
		stop             atomic.Bool
		reads            atomic.Int64
		fault            atomic.Pointer[string]
	)
	fail := func(s string) { fault.CompareAndSwap(nil, &s) }
	for range 2 {
		readers.Go(func() {
			var prev core.Metrics
			for n := int64(0); ; n++ {
				done := stop.Load()
				m := b.Metrics()
				if msg := metricsDecrease(prev, m); msg != "" {
					fail("a reader saw " + msg)
					return
				}
				prev = m
				if done {
					reads.Add(n + 1)
					return
				}
			}
		})
	}
	hinted := core.WithRetryAfter(errFail, 50*time.Millisecond)
	for gid := range g {
		writers.Go(func() {
			for i := range k {
				clock.Advance(200 * time.Microsecond)
				p, err := b.Allow()
				switch breakers.Reason(err) {
				case nil:
					allows[gid][0]++
				case core.ErrOpen:
					allows[gid][1]++
					continue
				case core.ErrHalfOpenFull:
					allows[gid][2]++
					continue
				case core.ErrForcedOpen:
					allows[gid][3]++
					continue
				case core.ErrRampingUp:
					allows[gid][4]++
					continue
				default:
					fail(fmt.Sprintf("Allow: unexpected error %v", err))
					return
				}
				o := core.Success
				switch r := (gid*k + i) % 32; {
				case r < 20:
					b.Record(p, core.Success)
				case r < 23:
					b.Record(p, core.Failure)
					o = core.Failure
				case r < 25:
					b.Record(p, core.Ignored)
					o = core.Ignored
				case r == 25:
					b.RecordHint(p, 4*time.Millisecond)
					o = core.Failure
				case r == 26:
					b.RecordHint(p, 0) // no hint: a plain failure
					o = core.Failure
				case r < 29:
					b.Done(p, nil)
				case r == 29:
					b.Done(p, context.Canceled)
					o = core.Ignored
				case r == 30:
					b.Done(p, hinted) // bounded to MaxRetryAfter
					o = core.Failure
				default:
					b.Done(p, errFail)
					o = core.Failure
				}
				recorded[gid][o]++
			}
		})
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	if p := fault.Load(); p != nil {
		t.Fatal(*p)
	}

	var sumA [5]uint64
	var sumO [3]uint64
	for gid := range g {
		for j := range sumA {
			sumA[j] += allows[gid][j]
		}
		for j := range sumO {
			sumO[j] += recorded[gid][j]
		}
	}
	m := b.Metrics()
	gotA := [5]uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp}
	if total := gotA[0] + gotA[1] + gotA[2] + gotA[3] + gotA[4]; total != uint64(g*k) || gotA != sumA {
		t.Fatalf("metrics count %v Allow results (admitted, open, half-open full, forced open, ramping up), %d in all; the callers saw %v, %d in all", gotA, total, sumA, g*k)
	}
	outcomes := sumO[0] + sumO[1] + sumO[2]
	if acted := m.Successes + m.Failures + m.Ignored + m.Dropped; acted != outcomes || outcomes != m.Admitted {
		t.Fatalf("metrics %+v count %d outcomes, %d were recorded for %d admitted calls", m, acted, outcomes, m.Admitted)
	}
	if m.Successes > sumO[0] || m.Failures > sumO[1] || m.Ignored > sumO[2] || m.SlowCalls != 0 {
		t.Fatalf("metrics %+v: more successes, failures or ignored outcomes acted on than recorded %v, or a slow call", m, sumO)
	}
	trs := rec.get()
	c := b.Counts()
	if transitionsSum(m) != uint64(c.Generation) || len(trs) != int(c.Generation) || m.Transitions != pairsOf(trs) {
		t.Fatalf("metrics transitions %v (sum %d), %d notifications %v, final generation %d", m.Transitions, transitionsSum(m), len(trs), pairsOf(trs), c.Generation)
	}
	kinds := map[string]int{}
	for _, tr := range trs {
		kinds[pairName(tr.From, tr.To)]++
	}
	for _, kd := range []string{"C>O", "O>H", "H>O", "H>C"} {
		if kinds[kd] == 0 {
			t.Fatalf("the run never reached %s (%s): too tame to prove anything", kd, sortedKinds(kinds))
		}
	}
	t.Logf("%d x %d calls: %d admitted, rejected %d open / %d half-open full / %d ramping; outcomes %d success / %d failure / %d ignored / %d dropped; %d transitions (%s); %d concurrent snapshots",
		g, k, m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedRampUp, m.Successes, m.Failures, m.Ignored, m.Dropped, c.Generation, sortedKinds(kinds), reads.Load())
}

// metricsDecrease names the first counter of next below prev, or "".
func metricsDecrease(prev, next core.Metrics) string {
	flat := func(m core.Metrics) []uint64 {
		return []uint64{m.Admitted, m.RejectedOpen, m.RejectedHalfOpenFull, m.RejectedForcedOpen, m.RejectedRampUp,
			m.Successes, m.Failures, m.Ignored, m.SlowCalls, m.Dropped}
	}
	names := []string{"Admitted", "RejectedOpen", "RejectedHalfOpenFull", "RejectedForcedOpen", "RejectedRampUp",
		"Successes", "Failures", "Ignored", "SlowCalls", "Dropped"}
	p, n := flat(prev), flat(next)
	for i := range p {
		if n[i] < p[i] {
			return fmt.Sprintf("%s decrease from %d to %d", names[i], p[i], n[i])
		}
	}
	for i := range prev.Transitions {
		for j := range prev.Transitions[i] {
			if next.Transitions[i][j] < prev.Transitions[i][j] {
				return fmt.Sprintf("Transitions[%v][%v] decrease from %d to %d", core.State(i), core.State(j), prev.Transitions[i][j], next.Transitions[i][j])
			}
		}
	}
	return ""
}

// tickClock gives every reading its own value: each Now moves it 1 ns on
// first, and counts itself.
type tickClock struct{ now, reads atomic.Int64 }

func (c *tickClock) Now() time.Duration {
	c.reads.Add(1)
	return time.Duration(c.now.Add(1))
}

func (c *tickClock) Set(t time.Duration) { c.now.Store(int64(t)) }

// Ramp-up under contention (Config.RampUpDuration, R13). A breaker with a
// 4 ms ramp (units of 1 ms) and only the consecutive-failures rule, at its
// highest threshold (so it never trips), is forced open, probed and closed:
// it ramps. Its clock hands every reading its own value, 1 ns apart, so
// each ramping Allow decides on a reading of its own, and which readings
// admit is a function of the reading alone (docs/design.md, Ramp-up after
// close). An oracle, a second breaker of the same implementation closed at
// the same reading on a manual clock, is asked sequentially at each reading.
//
//   - Phase 1, at the start of the ramp: G goroutines make K1 calls each,
//     recording successes and failures. Every Allow reads the clock exactly
//     once, so the admitted calls are exactly the readings that the oracle
//     admits, whatever the interleaving.
//   - One sequential success resets the run of failures.
//   - Phase 2: the clock is set G*K2/4 readings before the end of the ramp,
//     and G goroutines make K2 calls each and record every admitted one as
//     a failure: the ramp ends a quarter of the way in, and the Allow that
//     clears the ramp flag (closed -> closed in the same generation, a CAS
//     in the lock-free word) races the Records incrementing the run of
//     consecutive failures in the same word. A ramping Allow that finds
//     the word moved after its reading (here: the flag cleared) decides
//     again from the new word, so its reading, if before the end, is
//     decided by no one: the rejections are the oracle's for the readings
//     before the end, less at most one per other goroutine (each has at
//     most one Allow in flight across the clear), and never more; the run of
//     consecutive failures ends at exactly the failures recorded (no
//     increment lost to the flag clear, none counted twice); the generation
//     is unchanged; and the flag is cleared for good: afterwards Allow reads
//     no clock and admits everything.
//   - Metrics: admitted, ramp rejections, successes and failures are exactly
//     what the callers saw and recorded; nothing dropped; three transitions.
func TestRampUpUnderContention(t *testing.T) {
	procs(t, 8)
	const g = 8
	rounds, k1, k2 := size(2000, 40), 50, 200
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		workers := newGang(g)
		defer workers.stop()
		var admitted, rejected, failures int
		for round := range rounds {
			a, r, f := rampRound(t, newB, workers, g, k1, k2, round)
			admitted, rejected, failures = admitted+a, rejected+r, failures+f
		}
		t.Logf("%d rounds x %d calls: %d admitted, %d shed by the ramp; %d concurrent consecutive failures across the ramp's end, all counted",
			rounds, g*(k1+k2), admitted, rejected, failures)
	})
}

func rampRound(t *testing.T, newB newFunc, workers *gang, g, k1, k2, round int) (admitted, rejected, phase2 int) {
	pct := []int{10, 50, 90}[round%3]
	clk := &tickClock{}
	var rec transitions
	cfg := core.Config{
		ConsecutiveFailures: core.MaxConsecutiveFailures,
		OpenDuration:        time.Second,
		RampUpDuration:      4 * time.Millisecond, RampUpStartPercent: pct,
		CollectMetrics: true,
		Clock:          clk, OnStateChange: rec.listen,
	}
	b := mustNew(t, newB, cfg)
	if err := b.ForceOpen(time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Set(2 * time.Second)
	p, err := b.Allow()
	if err != nil || !p.Probe {
		t.Fatalf("round %d: %+v %v, want the probe", round, p, err)
	}
	b.Record(p, core.Success)
	trs := rec.get()
	if len(trs) != 3 || trs[2].From != core.HalfOpen || trs[2].To != core.Closed {
		t.Fatalf("round %d: notifications %+v, want C->O, O->H, H->C", round, trs)
	}
	// The first reading at which the ramp is over: with units of 1 ms, the
	// first whole millisecond at or after the close plus the ramp-up
	// (Config.MaxWaitInHalfOpen's rounding).
	end := (trs[2].At + cfg.RampUpDuration + time.Millisecond - 1).Truncate(time.Millisecond)
	// The oracle: the same ramp, closed at the same reading on a manual clock.
	oclk := core.NewManualClock(0)
	ocfg := cfg
	ocfg.Clock, ocfg.OnStateChange = oclk, nil
	oracle := mustNew(t, newB, ocfg)
	if err := oracle.ForceOpen(time.Second); err != nil {
		t.Fatal(err)
	}
	oclk.Set(trs[2].At)
	if op, err := oracle.Allow(); err != nil || !op.Probe {
		t.Fatalf("round %d: oracle %+v %v, want the probe", round, op, err)
	} else {
		oracle.Record(op, core.Success)
	}
	if c := oracle.Counts(); c.State != core.Closed || c.Generation != 3 {
		t.Fatalf("round %d: oracle %+v, want closed at generation 3", round, c)
	}
	// expect is how many of the n readings after from the ramp sheds. A
	// ramping Allow that is admitted or shed changes nothing, so the oracle
	// answers each reading as the ramp would at it; it stops before the
	// end, whose Allow would end its ramp.
	expect := func(from time.Duration, n int) (shed int) {
		for r := from + 1; r <= from+time.Duration(n) && r < end; r++ {
			oclk.Set(r)
			switch _, err := oracle.Allow(); breakers.Reason(err) {
			case nil:
			case core.ErrRampingUp:
				shed++
			default:
				t.Fatalf("round %d: oracle at %v: %v", round, r, err)
			}
		}
		return shed
	}
	counts := make([][4]int, g) // admitted, shed, failures recorded, other errors
	phase := func(k int, outcome func(i, j int) core.Outcome) {
		for i := range counts {
			counts[i] = [4]int{}
		}
		workers.run(func(i int) {
			for j := range k {
				p, err := b.Allow()
				switch breakers.Reason(err) {
				case nil:
					counts[i][0]++
					o := outcome(i, j)
					if o == core.Failure {
						counts[i][2]++
					}
					b.Record(p, o)
				case core.ErrRampingUp:
					counts[i][1]++
				default:
					counts[i][3]++
				}
			}
		})
	}
	sum := func() (a, r, f int) {
		for _, c := range counts {
			if c[3] != 0 {
				t.Fatalf("round %d: %d calls refused with an error other than ErrRampingUp", round, c[3])
			}
			a, r, f = a+c[0], r+c[1], f+c[2]
		}
		return a, r, f
	}

	// Phase 1: the start of the ramp.
	from, reads := clk.now.Load(), clk.reads.Load()
	phase(k1, func(i, j int) core.Outcome {
		if (i+j)%3 == 0 {
			return core.Failure
		}
		return core.Success
	})
	a1, r1, f1 := sum()
	if n := clk.reads.Load() - reads; n != int64(g*k1) {
		t.Fatalf("round %d: %d ramping calls read the clock %d times, want once each", round, g*k1, n)
	}
	if want := expect(time.Duration(from), g*k1); r1 != want || a1+r1 != g*k1 {
		t.Fatalf("round %d (start %d%%): phase 1 admitted %d and shed %d of %d calls; the ramp sheds exactly %d of their readings", round, pct, a1, r1, g*k1, want)
	}

	// One success in between: the run of failures starts at zero.
	sepA, sepR := 0, 0
	for {
		p, err := b.Allow()
		if errors.Is(err, core.ErrRampingUp) {
			sepR++
			continue
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sepA++
		b.Record(p, core.Success)
		break
	}
	if c := b.Counts(); c.State != core.Closed || c.Generation != 3 || c.ConsecutiveFailures != 0 {
		t.Fatalf("round %d: counts %+v after a success, want closed generation 3 with no failures in a row", round, c)
	}

	// Phase 2: across the end of the ramp, failures only.
	before := g * k2 / 4
	clk.Set(end - time.Duration(before))
	reads = clk.reads.Load()
	phase(k2, func(int, int) core.Outcome { return core.Failure })
	a2, r2, f2 := sum()
	if want := expect(end-time.Duration(before), before); r2 > want || r2 < want-(g-1) || a2+r2 != g*k2 || f2 != a2 {
		t.Fatalf("round %d (start %d%%): phase 2 admitted %d and shed %d of %d calls; the ramp sheds %d of the readings before its end, less at most the %d Allows that can be in flight across the clear", round, pct, a2, r2, g*k2, want, g-1)
	}
	if n := clk.reads.Load() - reads; n < int64(before) {
		t.Fatalf("round %d: %d clock readings in phase 2, fewer than the %d to the end of the ramp", round, n, before)
	}
	c := b.Counts()
	if c.State != core.Closed || c.Generation != 3 || c.ConsecutiveFailures != uint64(f2) {
		t.Fatalf("round %d: counts %+v after %d failures recorded across the end of the ramp, want closed generation 3 with %d consecutive failures", round, c, f2, f2)
	}
	m := b.Metrics()
	wantM := core.Metrics{
		Admitted:       uint64(1 + a1 + sepA + a2),
		RejectedRampUp: uint64(r1 + sepR + r2),
		Successes:      uint64(1 + a1 - f1 + sepA),
		Failures:       uint64(f1 + f2),
	}
	wantM.Transitions[core.Closed][core.Open] = 1
	wantM.Transitions[core.Open][core.HalfOpen] = 1
	wantM.Transitions[core.HalfOpen][core.Closed] = 1
	if m != wantM {
		t.Fatalf("round %d: metrics\n%+v, want\n%+v", round, m, wantM)
	}
	// The flag is cleared for good: no clock, no shedding.
	reads = clk.reads.Load()
	for i := range 16 {
		if p, err := b.Allow(); err != nil || p.Generation != 3 {
			t.Fatalf("round %d: call %d after the ramp: %+v %v", round, i, p, err)
		}
	}
	if n := clk.reads.Load() - reads; n != 0 {
		t.Fatalf("round %d: Allow after the end of the ramp read the clock %d times: the ramp flag is still set", round, n)
	}
	if n := len(rec.get()); n != 3 {
		t.Fatalf("round %d: %d notifications, want 3", round, n)
	}
	return a1 + a2, r1 + r2, f2
}
