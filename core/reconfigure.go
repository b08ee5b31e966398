package core

import "strings"

// Reconfigured returns the settings a breaker running with s has after
// Reconfigure(c): c validated as New validates it, with the wiring that a
// live breaker keeps (Name, Clock, OnStateChange, CollectMetrics,
// OpenGate, ProbeGate and InitialState) taken from s instead of c; and
// the names of the Config fields whose resolved values differ, in
// Config's order, comma-separated (as Transition.Changed has them), or ""
// when none does. Functions cannot be compared, so Classifier and
// OpenDurationFunc are named whenever either side sets one. It returns
// the errors of Config.Validate (each matching ErrInvalidConfig) and
// changes nothing; it never panics. Both breaker implementations decide
// what a reconfiguration keeps from the names it returns.
func (s Settings) Reconfigured(c Config) (Settings, string, error) {
	c.Name, c.Clock, c.OnStateChange, c.CollectMetrics = s.Name, s.Clock, s.OnStateChange, s.CollectMetrics
	c.OpenGate, c.ProbeGate, c.InitialState = s.OpenGate, s.ProbeGate, s.InitialState
	n, err := c.Validate()
	if err != nil {
		return Settings{}, "", err
	}
	return n, s.changed(&n), nil
}

// changed names the rule fields whose values differ between s and n.
func (s *Settings) changed(n *Settings) string {
	var names []string
	add := func(name string, differs bool) {
		if differs {
			names = append(names, name)
		}
	}
	add("WindowType", s.WindowType != n.WindowType)
	add("WindowSize", s.WindowSize != n.WindowSize)
	add("BucketWidth", s.BucketWidth != n.BucketWidth)
	add("MinimumNumberOfCalls", s.MinimumNumberOfCalls != n.MinimumNumberOfCalls || s.MinimumAppliesToCount != n.MinimumAppliesToCount)
	add("FailureRateThreshold", s.FailureRateThreshold != n.FailureRateThreshold)
	add("SlowCallRateThreshold", s.SlowCallRateThreshold != n.SlowCallRateThreshold)
	add("SlowCallDurationThreshold", s.SlowCallDurationThreshold != n.SlowCallDurationThreshold)
	add("FailureCountThreshold", s.FailureCountThreshold != n.FailureCountThreshold)
	add("ConsecutiveFailures", s.ConsecutiveFailures != n.ConsecutiveFailures)
	add("OpenDuration", s.OpenDuration != n.OpenDuration)
	add("OpenDurationBackoff", s.OpenDurationBackoff != n.OpenDurationBackoff)
	add("MaxOpenDuration", s.MaxOpenDuration != n.MaxOpenDuration)
	add("OpenDurationFunc", s.OpenDurationFunc != nil || n.OpenDurationFunc != nil)
	add("OpenDurationJitter", s.OpenDurationJitter != n.OpenDurationJitter)
	add("PermittedCallsInHalfOpen", s.PermittedCallsInHalfOpen != n.PermittedCallsInHalfOpen)
	add("SuccessesToClose", s.SuccessesToClose != n.SuccessesToClose)
	add("FailuresToReopen", s.FailuresToReopen != n.FailuresToReopen)
	add("Classifier", s.Classifier != nil || n.Classifier != nil)
	add("MaxWaitInHalfOpen", s.MaxWaitInHalfOpen != n.MaxWaitInHalfOpen)
	add("HalfOpenFullWait", s.HalfOpenFullWait != n.HalfOpenFullWait)
	add("RampUpDuration", s.RampUpDuration != n.RampUpDuration)
	add("RampUpStartPercent", s.RampUpStartPercent != n.RampUpStartPercent)
	add("MaxRetryAfter", s.MaxRetryAfter != n.MaxRetryAfter)
	return strings.Join(names, ",")
}
