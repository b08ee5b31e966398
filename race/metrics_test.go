package race_test

// Contention tests of Metrics: every counter conserved under contention.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

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
