// Package window holds what the two lock-free sliding windows share: the
// aggregate they report. The windows themselves live in window/atomicring
// (count-based: the last W calls) and window/buckets (time-based: per-second
// buckets over the last B seconds).
//
// Both windows tag what they hold with the breaker generation, which every
// committed transition of the breaker advances: an outcome recorded under an
// older generation than the window holds is stale and dropped, and a newer
// generation starts an empty window, as every state a breaker enters starts
// fresh, without a separate clear step that could race with writers. The
// rules both windows keep are written out in
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md.
package window

// Counts is the aggregate of the outcomes in a window.
//
// Invariants, in every value a window returns, under any concurrency:
// 0 <= Failures <= Calls, 0 <= Slow <= Calls, and
// SlowFailures <= min(Slow, Failures). A count window also keeps
// Calls <= its size W. The zero value is an empty window.
type Counts struct {
	// Calls is the number of counted outcomes (successes and failures; ignored
	// outcomes are never counted).
	Calls uint64
	// Failures is the number of counted outcomes that were failures.
	Failures uint64
	// Slow is the number of counted outcomes slower than the slow-call
	// duration threshold.
	Slow uint64
	// SlowFailures is the number of outcomes that were both slow and failures.
	SlowFailures uint64
}

// Rule is the part of the trip rule that reads a window: whether a closed
// breaker whose window holds c must trip, judged after every counted
// outcome. (The rest of the trip rule, the run of consecutive failures, is
// the breaker's.) A window that is given a
// Rule can decide the trip in the same atomic step that records the
// outcome (atomicring.Ring.RecordTrip), which is what makes the record and
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
func (r *Rule) Trips(c Counts) bool {
	if c.Failures == 0 && c.Slow == 0 {
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
	return r.SlowCallRateThreshold > 0 && c.Slow*100 >= r.SlowCallRateThreshold*c.Calls
}
