// Package trip holds the part of the trip rule that the windows judge: a
// Rule, given to a window by the breaker, so that the window can decide a
// trip in the same atomic step that records the outcome.
package trip

import "github.com/casbreaker/casbreaker/window"

// Rule is the part of the trip rule that reads a window: whether a closed
// breaker whose window holds c must trip, judged after every counted
// outcome. (The rest of the trip rule, the run of consecutive failures, is
// the breaker's.) A window that is given a
// Rule can decide the trip in the same atomic step that records the
// outcome (the internal atomicring.Ring.RecordTrip), which is what makes the record and
// its trip one linearizable step. Thresholds are in calls or percent; a
// zero threshold is disabled. The zero Rule never trips.
type Rule struct {
	// MinimumNumberOfCalls is how many calls the window must hold before a
	// rate threshold may trip, and before FailureCountThreshold may when
	// MinimumAppliesToCount is set.
	MinimumNumberOfCalls  uint64
	MinimumAppliesToCount bool
	// FailureCountThreshold trips at this many failures in the window.
	FailureCountThreshold uint64
	// FailureRateThreshold trips at failures*100 >= threshold*calls.
	FailureRateThreshold uint64
	// SlowCallRateThreshold trips at slow*100 >= threshold*calls.
	SlowCallRateThreshold uint64
}

// Trips reports whether a window holding c trips the rule. Products are
// 64-bit: calls are at most 2^56 and thresholds at most 100.
func (r *Rule) Trips(c window.Counts) bool {
	if c.Failures == 0 && c.SlowCalls == 0 {
		return false // every threshold needs a failure or a slow call
	}
	enough := c.Calls >= r.MinimumNumberOfCalls
	if r.FailureCountThreshold > 0 && c.Failures >= r.FailureCountThreshold && (enough || !r.MinimumAppliesToCount) {
		return true
	}
	if !enough {
		return false
	}
	if r.FailureRateThreshold > 0 && c.Failures*100 >= r.FailureRateThreshold*c.Calls {
		return true
	}
	return r.SlowCallRateThreshold > 0 && c.SlowCalls*100 >= r.SlowCallRateThreshold*c.Calls
}
