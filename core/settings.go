package core

import (
	"time"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// Settings is a validated Config with every default resolved: plain data,
// what a breaker runs with. Breaker.Settings returns a breaker's, for
// observers that need its name or its resolved window (the exporters read
// both). Both breaker implementations are built from it, so they can never
// disagree about a default, and each decides the rules from it with its own
// code. Build one with Config.Validate.
type Settings struct {
	Name                      string
	WindowType                WindowType
	WindowSize                int           // 0: no window
	BucketWidth               time.Duration // a time window's bucket width; 0: no time window
	MinimumNumberOfCalls      int
	MinimumAppliesToCount     bool
	FailureRateThreshold      int
	SlowCallRateThreshold     int
	SlowCallDurationThreshold time.Duration
	FailureCountThreshold     int
	ConsecutiveFailures       int
	OpenDuration              time.Duration // after a trip from closed
	OpenDurationBackoff       float64       // 1: no backoff
	MaxOpenDuration           time.Duration // OpenDuration when there is no backoff nor function
	OpenDurationFunc          func(reopens int, lastFailure error) time.Duration
	OpenDurationJitter        float64 // 0..1
	PermittedCallsInHalfOpen  int
	SuccessesToClose          int
	FailuresToReopen          int
	MaxWaitInHalfOpen         time.Duration // resolved: > 0, or WaitForever
	HalfOpenFullWait          time.Duration // resolved: > 0
	InitialState              State
	RampUpDuration            time.Duration
	RampUpStartPercent        int
	MaxRetryAfter             time.Duration
	CollectMetrics            bool
	Classifier                func(error) Outcome
	Clock                     Clock
	OnStateChange             func(Transition)
	OpenGate                  OpenGate  // nil: no cap
	ProbeGate                 ProbeGate // nil: no gate

	rule          trip.Rule
	halfOpenWait  coarse
	rampUp        coarse
	openDurations [MaxBackoffSteps + 1]time.Duration
	lastStep      uint8
	jitterScale   uint64 // OpenDurationJitter in units of 2^-32
}

// openDuration returns the open duration after step consecutive re-opens
// from half-open (0 after a trip from closed).
func (s *Settings) openDuration(step uint8) time.Duration {
	if step > s.lastStep {
		step = s.lastStep
	}
	return s.openDurations[step]
}

// nextStep returns the backoff step of a re-open that follows step. It stops
// at the first step whose duration is the maximum, so the 5-bit field never
// overflows.
func (s *Settings) nextStep(step uint8) uint8 {
	if step >= s.lastStep {
		return s.lastStep
	}
	return step + 1
}

// admitsProbe reports whether a half-open generation whose word holds
// inFlight probes in flight and success and failure probe outcomes counted
// has a probe slot to give: fewer than PermittedCallsInHalfOpen in flight,
// and no more admitted than outcomes can still arrive before a verdict (the
// verdict comes at the SuccessesToClose-th success or the
// FailuresToReopen-th failure, so at most SuccessesToClose +
// FailuresToReopen - 1 outcomes are ever counted).
func (s *Settings) admitsProbe(inFlight, success, failure uint8) bool {
	return int(inFlight) < s.PermittedCallsInHalfOpen &&
		int(inFlight)+int(success)+int(failure) < s.SuccessesToClose+s.FailuresToReopen-1
}

// slowEnabled reports whether call durations are measured at all.
func (s *Settings) slowEnabled() bool { return s.SlowCallDurationThreshold > 0 }

// isSlow reports whether a call that took d counts as slow: strictly slower
// than the threshold, as in Resilience4j.
func (s *Settings) isSlow(d time.Duration) bool {
	return s.SlowCallDurationThreshold > 0 && d > s.SlowCallDurationThreshold
}

// shouldTrip is rule R1: whether a closed breaker whose window holds c and
// whose last consecutive failures number consecutive must trip.
func (s *Settings) shouldTrip(c window.Counts, consecutive uint64) bool {
	return s.consecutiveTrips(consecutive) || s.rule.Trips(c)
}

// consecutiveTrips is the part of R1 that reads the run of failures.
func (s *Settings) consecutiveTrips(consecutive uint64) bool {
	return s.ConsecutiveFailures > 0 && consecutive >= uint64(s.ConsecutiveFailures)
}
