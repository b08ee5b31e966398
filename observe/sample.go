package observe

import "github.com/casbreaker/casbreaker/core"

// Sample is one breaker as one read found it.
type Sample struct {
	// Name is the breaker label: the breaker's Settings().Name as
	// LabelValue makes it valid UTF-8.
	Name string
	// State is State(): time-aware, so an open breaker whose open
	// duration has elapsed reads HalfOpen before any call commits it.
	State core.State
	// Counts is Counts(): the current window and the half-open probes.
	Counts core.Counts
	// Windowed is true when the breaker has a sliding window
	// (Settings().WindowSize > 0); the window series exist only then.
	Windowed bool
	// Collecting is true when the breaker keeps cumulative counters
	// (Config.CollectMetrics); the counter series exist only then.
	Collecting bool
	// Capped is true when the breaker has a cap on open breakers
	// (Settings().OpenGate is set); the capped-trips series exists only
	// then, and only when Collecting.
	Capped bool
	// Metrics is Metrics(): all zero unless Collecting.
	Metrics core.Metrics
	// Fleet is true when the breaker is a FleetMember; the fleet series
	// exist only then.
	Fleet bool
	// FleetStats is FleetStats(): all zero unless Fleet.
	FleetStats FleetStats
	// Transitions are the breaker's committed transitions, each pair of
	// states with a count: by reason too when the read had a
	// Transitions listener (NewReader's tr), otherwise from Metrics with a
	// zero Reason (none when not Collecting). Ordered by From, To and
	// Reason.
	Transitions []TransitionCount
}

// TransitionCount is how many transitions from From to To, for Reason,
// a breaker committed (Reason zero: not told apart).
type TransitionCount struct {
	From, To core.State
	Reason   core.Reason
	Count    uint64
}

// FailureRatio is the window's failures over its calls, 0..1, and false
// when the window holds no call (no window, open, half-open, or a fresh
// window), where a ratio would say nothing. It is the figure the
// failure-rate threshold is judged on, shown whether or not the window
// holds the minimum number of calls yet.
func (s Sample) FailureRatio() (float64, bool) {
	return ratio(s.Counts.Failures, s.Counts.Calls)
}

// SlowCallRatio is the window's slow calls over its calls, 0..1, and false
// when the window holds no call, as for FailureRatio.
func (s Sample) SlowCallRatio() (float64, bool) {
	return ratio(s.Counts.SlowCalls, s.Counts.Calls)
}

func ratio(n, of uint64) (float64, bool) {
	if of == 0 {
		return 0, false
	}
	return float64(n) / float64(of), true
}
