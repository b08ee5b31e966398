// Package suite holds the benchmark bodies that bench (casbreaker's own
// implementations) and bench/peers (the Go circuit breakers people use, in a
// nested module) share, so that every implementation runs the very same body
// under the very same benchmark name, and benchstat -col /impl can put them
// side by side.
//
// A body takes a table of Impl: a name (the value of the /impl= key) and a
// factory that builds a Breaker, the small adapter a body drives, for a Spec.
// A factory that cannot express a Spec returns Unsupported with the reason,
// and the body skips that implementation with it.
//
// The adapter cost. The hot bodies (closed success, mixed, open reject) hand
// the whole loop to the adapter, Breaker.Run or Breaker.Parallel, which calls
// the implementation's own API concretely, so a benchmark pays one interface
// call per b.N loop, not per operation, and the adapters of casbreaker's
// breakers allocate nothing. BenchmarkAdapter in bench measures what a call
// per operation through the interface would add.
package suite

import (
	"errors"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Policy is a closed-state trip rule, named for the /policy= key, with the
// core.Config that expresses it in casbreaker. A peer reads its RateRule
// (or, for consecutive, the name) and configures its own closest
// equivalent.
type Policy struct {
	Name   string
	Config core.Config
}

// The three policies the targets name. MinimumNumberOfCalls is left at its default:
// the window size for countrate (100), 100 calls for timerate. The time
// window reads the default system clock: that is what users run, and its
// reading is part of the cost.
var (
	CountRate   = Policy{Name: "countrate", Config: core.Config{WindowSize: 100, FailureRateThreshold: 50}}
	TimeRate    = Policy{Name: "timerate", Config: core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50}}
	Consecutive = Policy{Name: "consecutive", Config: core.Config{ConsecutiveFailures: 5}}

	// Policies is the table every policy-keyed body iterates, in this order.
	Policies = []Policy{CountRate, TimeRate, Consecutive}
)

// Spec is what a body asks of a breaker.
type Spec struct {
	// Policy is the closed-state trip rule.
	Policy Policy
	// AnyRule says the body only needs a breaker that trips on a run of
	// failures; an implementation that cannot express Policy may use its
	// closest rule instead of returning Unsupported (the open, half-open and
	// churn bodies set it).
	AnyRule bool
	// FailurePct is the share of calls, in percent, that the body fails
	// while it needs the breaker to stay closed (ClosedMixed). An
	// implementation that would trip on such a mix returns Unsupported.
	FailurePct int
	// FailurePerMille is FailurePct in per mille, for the rates below 1%
	// that Mix runs (one failure in 1000 calls is 1). A body sets one of
	// the two; Failing reads both.
	FailurePerMille int
	// OpenDuration is how long the breaker stays open. Zero: 60 s, longer
	// than any benchmark. An implementation whose Expire would otherwise
	// have to sleep may use the shortest open duration it can express
	// instead (docs/benchmarks.md lists which do).
	OpenDuration time.Duration
	// Probes is the number of half-open probes allowed in flight and of
	// probe successes that close the breaker. Zero: 1.
	Probes int
	// FastExpire says the body calls Expire on its hot path (Churn, after
	// every rejection): an implementation whose Expire has to wait out real
	// time returns Unsupported.
	FastExpire bool
	// Clock, when set, is the clock an implementation that takes one must
	// read; its Expire advances it by the open duration instead of
	// sleeping. Implementations without a clock option read real time.
	Clock *core.ManualClock
}

// Config is the core.Config of the spec: the policy's config with the open
// duration, the probe counts and the clock filled in.
func (s Spec) Config() core.Config {
	c := s.Policy.Config
	c.OpenDuration = s.OpenDuration
	c.PermittedCallsInHalfOpen = s.probes()
	c.SuccessesToClose = s.probes()
	if s.Clock != nil {
		c.Clock = s.Clock
	}
	return c
}

// OpenFor is the open duration with its default resolved.
func (s Spec) OpenFor() time.Duration {
	if s.OpenDuration == 0 {
		return time.Minute
	}
	return s.OpenDuration
}

func (s Spec) probes() int { return max(s.Probes, 1) }

// Failing reports whether the body fails some of the calls it needs the
// breaker to admit (FailurePct or FailurePerMille set): an implementation
// that trips on any failure mix returns Unsupported for such a spec.
func (s Spec) Failing() bool { return s.FailurePct > 0 || s.FailurePerMille > 0 }

// RateRule is a policy's failure-rate rule with casbreaker's defaults
// resolved, in the terms a peer configures its own window with.
type RateRule struct {
	// TimeBased says the window is Size seconds of time; otherwise it is
	// the last Size calls.
	TimeBased bool
	// Size is the window length: calls, or whole seconds.
	Size int
	// BucketWidth is a time window's bucket width, the step it slides in
	// (1 s unless the policy's BucketWidth says otherwise); 0 for a count
	// window. A peer whose buckets cannot be that wide returns Unsupported.
	BucketWidth time.Duration
	// Threshold is the failure rate that trips, in percent (failures*100
	// >= Threshold*calls).
	Threshold int
	// MinCalls is the number of calls the window must hold before the rate
	// may trip.
	MinCalls int
}

// RateRule returns the policy's failure-rate rule, or false for a policy
// without one (consecutive). A peer maps it rather than the policy's name,
// so that every window a body builds (Mix's time60 and time300 too) reaches
// the peer's configuration.
func (p Policy) RateRule() (RateRule, bool) {
	c := p.Config
	if c.FailureRateThreshold == 0 {
		return RateRule{}, false
	}
	r := RateRule{TimeBased: c.WindowType == core.TimeBased, Size: c.WindowSize, Threshold: c.FailureRateThreshold, MinCalls: c.MinimumNumberOfCalls}
	if r.Size == 0 {
		r.Size = 100
	}
	if r.TimeBased {
		r.BucketWidth = c.BucketWidth
		if r.BucketWidth == 0 {
			r.BucketWidth = time.Second
		}
	}
	if r.MinCalls == 0 {
		// core.Config's defaults: the window for a count window, 100
		// calls for a time window.
		r.MinCalls = 100
		if !r.TimeBased {
			r.MinCalls = r.Size
		}
	}
	return r, true
}

// Breaker is the adapter a body drives. All methods must be safe for
// concurrent use.
type Breaker interface {
	// Run makes n calls, one after the other: each asks the breaker for
	// admission and, when admitted, finishes with outcome
	// outcomes[i%len(outcomes)] (nil: success). It returns how many calls
	// were admitted. The loop is the adapter's, so each call goes to the
	// implementation's concrete API without an interface call.
	Run(n int, outcomes []error) (admitted int)
	// Parallel is Run for the body of b.RunParallel: one call per
	// pb.Next(), outcomes indexed from 0 in each goroutine.
	Parallel(pb *testing.PB, outcomes []error) (admitted int)
	// Hold makes one call that stays in flight until release is closed and
	// then finishes with outcome. It calls decided exactly once, as soon as
	// the breaker has admitted (true) or rejected (false) the call, and
	// returns when the call is over.
	Hold(release <-chan struct{}, outcome error, decided func(admitted bool))
	// State is the breaker's state as the implementation reports it, mapped
	// to core.State.
	State() core.State
	// Snapshot reads the breaker's state and counts n times, the way a
	// metrics exporter would, and returns something derived from the reads.
	Snapshot(n int) int
	// Expire makes the open duration elapse: it advances Spec.Clock, or
	// waits out real time when the implementation reads its own.
	Expire()
}

// A Breaker that also has a Close method is closed when the benchmark or
// test that built it ends.

// Impl is one implementation in a benchmark table.
type Impl struct {
	// Name is the value of the /impl= key.
	Name string
	// New builds a breaker for a spec, or returns Unsupported.
	New func(Spec) (Breaker, error)
	// Construct builds the bare breaker of a spec, without the adapter,
	// for BenchmarkNew. Nil, or Unsupported: BenchmarkNew skips it.
	Construct func(Spec) (any, error)
	// ExactProbes says the implementation guarantees that a half-open
	// breaker admits exactly Spec.Probes concurrent calls; ProbeStorm fails
	// the benchmark if any round admits another number.
	ExactProbes bool
}

// Unsupported is the error a factory returns for a spec its implementation
// cannot express; the body skips with it as the reason.
type Unsupported string

func (u Unsupported) Error() string { return string(u) }

// ErrCall is the error of a failed call.
var ErrCall = errors.New("suite: call failed")

// Outcome patterns.
var (
	allSuccess = []error{nil}
	allFailure = []error{ErrCall}
)

// Pattern returns a pattern of n outcomes of which failures fail, spread
// evenly: one every n/failures outcomes, from half a step in, so that no
// two are adjacent (while failures <= n/2) and no consecutive-failure rule
// trips on a mix. Pattern(pct, 100) is a mix of pct percent; Pattern(1,
// 1000) one failure in 1000 calls.
func Pattern(failures, n int) []error {
	out := make([]error, n)
	if failures <= 0 {
		return out
	}
	step := n / failures
	for i := step / 2; i < n; i += step {
		out[i] = ErrCall
	}
	return out
}

// build runs a factory and skips or fails b on an error.
func build(tb testing.TB, im Impl, s Spec) Breaker {
	tb.Helper()
	br, err := im.New(s)
	var u Unsupported
	switch {
	case errors.As(err, &u):
		tb.Skip(im.Name + ": " + string(u))
	case err != nil:
		tb.Fatalf("%s: %v", im.Name, err)
	}
	if c, ok := br.(interface{ Close() }); ok {
		tb.Cleanup(c.Close)
	}
	return br
}

// Trip drives br with failures until it leaves the closed state. Some
// implementations count asynchronously, so it gives up only after a
// generous number of calls and a few seconds.
func Trip(tb testing.TB, br Breaker) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; br.State() == core.Closed; i++ {
		br.Run(1, allFailure)
		if i > 1_000_000 || time.Now().After(deadline) {
			tb.Fatalf("the breaker did not trip after %d failures", i)
		}
		if i > 1000 {
			time.Sleep(time.Millisecond) // let an asynchronous counter catch up
		}
	}
}

// forEach runs fn as the sub-benchmark impl=NAME of every implementation.
func forEach(b *testing.B, impls []Impl, fn func(b *testing.B, im Impl)) {
	for _, im := range impls {
		b.Run("impl="+im.Name, func(b *testing.B) { fn(b, im) })
	}
}
