package suite

import (
	"strconv"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// MixRate is a value of /failures= in Mix: one failure in every Every calls,
// or none when Every is 0.
type MixRate struct {
	Name  string
	Every int
}

// Outcomes is the rate's outcome pattern: Every outcomes with one failure
// in the middle, or a single success. Each pattern is only as long as its
// rate needs, so failures=0 reads one slot over and over; the longest
// (1in1000, 16 KB) is read in order, which the prefetcher hides.
func (r MixRate) Outcomes() []error {
	if r.Every == 0 {
		return allSuccess
	}
	return Pattern(1, r.Every)
}

// perMille is the rate for Spec.FailurePerMille; no rate of MixRates is
// rarer than one in 1000, so none rounds to 0.
func (r MixRate) perMille() int {
	if r.Every == 0 {
		return 0
	}
	return 1000 / r.Every
}

// MixRates are the values of /failures= in Mix, from none to one call in
// ten: the failure rates a healthy or degraded dependency shows without
// being down.
var MixRates = []MixRate{{"0", 0}, {"1in1000", 1000}, {"1in100", 100}, {"1in10", 10}}

// timeWindow is a failure-rate policy of 50% over a time window of n
// seconds, named timeN, with the default minimum number of calls (100).
func timeWindow(n int) Policy {
	return Policy{Name: "time" + strconv.Itoa(n), Config: core.Config{WindowType: core.TimeBased, WindowSize: n, FailureRateThreshold: 50}}
}

// narrowWindow is timeWindow(n) in buckets of 100 ms, named timeNat100ms:
// ten times the buckets, and a new one to recycle and judge ten times a
// second.
func narrowWindow(n int) Policy {
	p := timeWindow(n)
	p.Name += "at100ms"
	p.Config.BucketWidth = 100 * time.Millisecond
	return p
}

// MixWindows are the values of /window= in Mix: the count window of 100
// calls (CountRate) and time windows of 10 s (TimeRate), 60 s and 300 s,
// and of 10 s and 300 s in buckets of 100 ms (100 and 3,000 of them), each
// at a 50% threshold, far above the highest rate of MixRates, so that no
// cell ever trips. The time windows read the default system clock: real
// time, as users run them.
var MixWindows = []struct {
	Name   string
	Policy Policy
}{
	{"count100", CountRate},
	{"time10", TimeRate},
	{"time60", timeWindow(60)},
	{"time300", timeWindow(300)},
	{"time10at100ms", narrowWindow(10)},
	{"time300at100ms", narrowWindow(300)},
}

// Mix is BenchmarkMix/failures=F/window=W/impl=I: GOMAXPROCS goroutines
// (set by -cpu) share one closed breaker and make calls of which one in
// 1000, 100 or 10 fail (or none), spread evenly through the outcome
// pattern, over each window of MixWindows. It is the matrix the windows are
// judged by: every cell is a closed breaker recording outcomes, which is
// what a breaker does nearly all of its life, and the geomean of benchstat
// -col /impl sums it up in one ratio.
//
// Each goroutine's loop is the adapter's (Breaker.Parallel): one interface
// call per goroutine, not per call. A cell whose breaker left the closed
// state fails: it would have measured rejections, not recording.
func Mix(b *testing.B, impls []Impl) {
	for _, r := range MixRates {
		b.Run("failures="+r.Name, func(b *testing.B) {
			outcomes := r.Outcomes()
			for _, w := range MixWindows {
				b.Run("window="+w.Name, func(b *testing.B) {
					forEach(b, impls, func(b *testing.B, im Impl) {
						br := build(b, im, Spec{Policy: w.Policy, FailurePerMille: r.perMille()})
						closedParallel(b, br, outcomes)
						if s := br.State(); s != core.Closed {
							b.Fatalf("the breaker is %v after the timed loop: it tripped, so the cell measured the wrong thing", s)
						}
					})
				})
			}
		})
	}
}
