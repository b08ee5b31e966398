package core

import (
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// Reason says why a transition was committed (Transition.Reason).
//
// The zero value is no reason; no notification carries it.
type Reason uint8

const (
	// ReasonFailureRate: the window's failure rate reached
	// Config.FailureRateThreshold.
	ReasonFailureRate Reason = iota + 1
	// ReasonSlowCallRate: the window's slow-call rate reached
	// Config.SlowCallRateThreshold.
	ReasonSlowCallRate
	// ReasonFailureCount: the window held Config.FailureCountThreshold
	// failures.
	ReasonFailureCount
	// ReasonConsecutiveFailures: Config.ConsecutiveFailures failures came
	// in a row.
	ReasonConsecutiveFailures
	// ReasonRetryAfter: a failure carried a retry-after hint
	// (Config.MaxRetryAfter), which trips a closed breaker at once; also a
	// half-open probe's failure that carried one.
	ReasonRetryAfter
	// ReasonOpenDurationElapsed: open -> half-open, committed by the first
	// call after the open duration.
	ReasonOpenDurationElapsed
	// ReasonProbesPassed: half-open -> closed, the needed probe successes
	// were counted.
	ReasonProbesPassed
	// ReasonProbeFailed: half-open -> open, a probe failed (without a
	// retry-after hint: that is ReasonRetryAfter).
	ReasonProbeFailed
	// ReasonMaxWaitInHalfOpen: half-open -> half-open, the half-open max
	// wait passed without a verdict and a new probe generation started.
	ReasonMaxWaitInHalfOpen
	// ReasonManual: a manual control (ForceOpen, HalfOpen, Disable,
	// MetricsOnly, Reset).
	ReasonManual
	// ReasonCapped: closed -> closed, a trip that Config.OpenGate refused
	// (no open slot free): "would have opened", in a new generation with a
	// fresh window.
	ReasonCapped
	// ReasonReconfigured: s -> s in the same generation, Reconfigure
	// changed the breaker's rules (Transition.Changed names them). It is
	// the one notification that commits no new generation.
	ReasonReconfigured
)

// String returns the reason in lower case with dashes, "failure-rate" and
// so on, or "reason(N)" for a value no breaker produces. It allocates
// nothing for the real reasons.
func (r Reason) String() string {
	switch r {
	case ReasonFailureRate:
		return "failure-rate"
	case ReasonSlowCallRate:
		return "slow-call-rate"
	case ReasonFailureCount:
		return "failure-count"
	case ReasonConsecutiveFailures:
		return "consecutive-failures"
	case ReasonRetryAfter:
		return "retry-after"
	case ReasonOpenDurationElapsed:
		return "open-duration-elapsed"
	case ReasonProbesPassed:
		return "probes-passed"
	case ReasonProbeFailed:
		return "probe-failed"
	case ReasonMaxWaitInHalfOpen:
		return "half-open-max-wait"
	case ReasonManual:
		return "manual"
	case ReasonCapped:
		return "capped"
	case ReasonReconfigured:
		return "reconfigured"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ruleReason is the reason of a trip (closed -> open, or metrics-only's
// "would have opened") whose window holds c, when several rules hold at
// once: the first that holds of the failure rate, the slow-call rate, the
// failure count and the consecutive failures (the last needs no window, so
// it is the reason whenever no window rule holds on c and the rule is on).
// If no rule holds on c, which only outcomes recorded concurrently with
// the trip can cause, it is the first enabled of the four. The baseline
// decides the same rule with its own code.
//
// Each window rule is asked of trip.Rule, restricted to its one
// threshold, so the reason and the trip share one arithmetic.
func (s *Settings) ruleReason(c window.Counts) Reason {
	rate := trip.Rule{MinimumNumberOfCalls: s.rule.MinimumNumberOfCalls, MinimumAppliesToCount: s.rule.MinimumAppliesToCount}
	slow, count := rate, rate
	rate.FailureRateThreshold = s.rule.FailureRateThreshold
	slow.SlowCallRateThreshold = s.rule.SlowCallRateThreshold
	count.FailureCountThreshold = s.rule.FailureCountThreshold
	switch {
	case rate.FailureRateThreshold > 0 && rate.Trips(c):
		return ReasonFailureRate
	case slow.SlowCallRateThreshold > 0 && slow.Trips(c):
		return ReasonSlowCallRate
	case count.FailureCountThreshold > 0 && count.Trips(c):
		return ReasonFailureCount
	case s.ConsecutiveFailures > 0:
		return ReasonConsecutiveFailures
	case s.FailureRateThreshold > 0:
		return ReasonFailureRate
	case s.SlowCallRateThreshold > 0:
		return ReasonSlowCallRate
	}
	return ReasonFailureCount
}

// tripReason is the reason of the trip of counting generation gen just
// committed, with bounded hint h, from the window as the trip left it (the
// window of gen is abandoned, not cleared, until the notification's
// bookkeeping advances it). Only a breaker with a listener asks.
func (b *Breaker) tripReason(gen uint64, h time.Duration) Reason {
	if h > 0 {
		return ReasonRetryAfter
	}
	var c window.Counts
	switch {
	case b.ring != nil:
		c, _ = b.ring.SnapshotClosed(uint32(gen))
	case b.buckets != nil:
		c = b.buckets.Snapshot(uint32(gen), b.cfg.Clock.Now())
	}
	return b.cfg.ruleReason(c)
}

// WallClock is a Clock that can also tell the wall-clock time of a reading,
// for Transition.Time. SystemClock is one; ManualClock is not.
type WallClock interface {
	Clock
	// Wall returns the wall-clock time at which the clock read reading.
	Wall(reading time.Duration) time.Time
}

// Wall returns the wall-clock time of reading: the process-wide base plus
// the reading, so the Times of two SystemClocks compare (their monotonic
// readings too) and print as dates. It is for showing; the breaker never
// times anything by it. It allocates nothing.
func (c SystemClock) Wall(reading time.Duration) time.Time {
	return processBase.Add(c.since + reading)
}

// wallOf is Transition.Time for the reading at on clock c.
func wallOf(c Clock, at time.Duration) time.Time {
	if w, ok := c.(WallClock); ok {
		return w.Wall(at)
	}
	return time.Time{}
}
