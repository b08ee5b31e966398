package core

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/internal/window/buckets"
)

// Validate checks c against the configuration rules and resolves its defaults. It returns every
// problem at once, as errors.Join of *ConfigError values that each match
// ErrInvalidConfig; it never panics and never clamps a value.
func (c Config) Validate() (Settings, error) {
	var errs problems
	s := Settings{
		Name:                      c.Name,
		WindowType:                c.WindowType,
		FailureRateThreshold:      c.FailureRateThreshold,
		SlowCallRateThreshold:     c.SlowCallRateThreshold,
		SlowCallDurationThreshold: c.SlowCallDurationThreshold,
		FailureCountThreshold:     c.FailureCountThreshold,
		ConsecutiveFailures:       c.ConsecutiveFailures,
		OpenDurationFunc:          c.OpenDurationFunc,
		MaxWaitInHalfOpen:         c.MaxWaitInHalfOpen,
		RampUpDuration:            c.RampUpDuration,
		InitialState:              c.InitialState,
		RampUpStartPercent:        c.RampUpStartPercent,
		MaxRetryAfter:             c.MaxRetryAfter,
		CollectMetrics:            c.CollectMetrics,
		Classifier:                c.Classifier,
		Clock:                     c.Clock,
		OnStateChange:             c.OnStateChange,
		OpenGate:                  c.OpenGate, ProbeGate: c.ProbeGate,
	}
	// Each step reads what the ones before it resolved, and the errors come
	// out in the order of the steps.
	if !utf8.ValidString(c.Name) {
		errs.add("Name", "%q is not valid UTF-8", c.Name)
	}
	needWindow := c.validateRules(&errs)
	c.resolveWindow(&s, needWindow, &errs)
	c.resolveProbes(&s, &errs)
	c.resolveOpenDurations(&s, &errs)
	c.resolveJitter(&s, &errs)
	c.resolveHalfOpenWaits(&s, &errs)
	c.validateRampUpAndHints(&errs)
	if c.InitialState >= NumStates {
		errs.add("InitialState", "%d is not a state", uint8(c.InitialState))
	}
	// Negative values are errors above, and an invalid config returns no
	// Settings, so the conversions below only ever see valid values.
	s.rule = trip.Rule{
		MinimumNumberOfCalls:  uint64(s.MinimumNumberOfCalls),
		MinimumAppliesToCount: s.MinimumAppliesToCount,
		FailureCountThreshold: uint64(c.FailureCountThreshold),
		FailureRateThreshold:  uint64(c.FailureRateThreshold),
		SlowCallRateThreshold: uint64(c.SlowCallRateThreshold),
	}
	s.halfOpenWait = newCoarse(s.MaxWaitInHalfOpen) // off (zero) for WaitForever
	s.rampUp = newCoarse(c.RampUpDuration)

	if s.Classifier == nil {
		s.Classifier = DefaultClassifier
	}
	if s.Clock == nil {
		s.Clock = NewSystemClock()
	}
	if len(errs) > 0 {
		return Settings{}, errors.Join(errs...)
	}
	return s, nil
}

// problems collects the configuration errors Validate returns.
type problems []error

// add records that field is wrong, as the formatted problem.
func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// validateRules checks the window type and the trip rules' thresholds, and
// reports whether a rule reads the window (a rate or a failure count).
func (c Config) validateRules(errs *problems) (needWindow bool) {
	if c.WindowType != CountBased && c.WindowType != TimeBased {
		errs.add("WindowType", "unknown window type %d", uint8(c.WindowType))
	}
	for _, r := range []struct {
		field string
		v     int
	}{{"FailureRateThreshold", c.FailureRateThreshold}, {"SlowCallRateThreshold", c.SlowCallRateThreshold}} {
		if r.v < 0 || r.v > 100 {
			errs.add(r.field, "%d is outside 0..100 percent", r.v)
		}
	}
	c.validateSlowCalls(errs)
	if c.FailureCountThreshold < 0 {
		errs.add("FailureCountThreshold", "%d is negative", c.FailureCountThreshold)
	}
	if c.ConsecutiveFailures < 0 || c.ConsecutiveFailures > MaxConsecutiveFailures {
		errs.add("ConsecutiveFailures", "%d is outside 0..%d calls", c.ConsecutiveFailures, MaxConsecutiveFailures)
	}
	needWindow = c.FailureRateThreshold > 0 || c.SlowCallRateThreshold > 0 || c.FailureCountThreshold > 0
	if !needWindow && c.ConsecutiveFailures <= 0 {
		errs.add("FailureRateThreshold", "no trip rule is enabled: set FailureRateThreshold, SlowCallRateThreshold, FailureCountThreshold or ConsecutiveFailures")
	}
	return needWindow
}

// validateSlowCalls checks the slow-call duration threshold and that the
// slow-call rate threshold has one.
func (c Config) validateSlowCalls(errs *problems) {
	if c.SlowCallDurationThreshold < 0 {
		errs.add("SlowCallDurationThreshold", "%v is negative", c.SlowCallDurationThreshold)
	}
	if c.SlowCallRateThreshold > 0 && c.SlowCallDurationThreshold == 0 {
		errs.add("SlowCallRateThreshold", "%d%% needs SlowCallDurationThreshold to say what is slow", c.SlowCallRateThreshold)
	}
}

// resolveWindow checks and resolves the sliding window's size, a time
// window's bucket width and then the minimum number of calls into s.
func (c Config) resolveWindow(s *Settings, needWindow bool, errs *problems) {
	s.WindowSize = c.WindowSize
	maxWindow, unit := MaxCountWindow, "calls"
	narrow := c.WindowType == TimeBased && buckets.ValidWidth(c.BucketWidth) && c.BucketWidth != time.Second
	if c.WindowType == TimeBased {
		maxWindow, unit = MaxTimeWindow, "seconds"
	}
	if narrow {
		maxWindow = MaxTimeBuckets / int(time.Second/c.BucketWidth)
	}
	switch {
	case narrow && (c.WindowSize < 0 || c.WindowSize > maxWindow):
		errs.add("WindowSize", "%d is outside 1..%d seconds for a %v window of BucketWidth %v (at most %d buckets)",
			c.WindowSize, maxWindow, c.WindowType, c.BucketWidth, MaxTimeBuckets)
	case c.WindowSize < 0 || c.WindowSize > maxWindow:
		errs.add("WindowSize", "%d is outside 1..%d %s for a %v window", c.WindowSize, maxWindow, unit, c.WindowType)
	case c.WindowSize == 0 && needWindow:
		s.WindowSize = defaultWindowSize
	}
	c.resolveBucketWidth(s, errs)
	c.resolveMinimumCalls(s, errs)
}

// resolveBucketWidth checks and resolves a time window's bucket width into
// s, whose window size is resolved: 1 s for zero, none without a time
// window.
func (c Config) resolveBucketWidth(s *Settings, errs *problems) {
	switch w := c.BucketWidth; {
	case w == 0:
		if c.WindowType == TimeBased && s.WindowSize > 0 {
			s.BucketWidth = time.Second
		}
	case c.WindowType != TimeBased:
		errs.add("BucketWidth", "%v has no effect on a %v window: only a time-based window has buckets", w, c.WindowType)
	case !buckets.ValidWidth(w):
		errs.add("BucketWidth", "%v is not a whole number of milliseconds from %v to 1s that divides 1s (100ms, 125ms, 200ms, 250ms, 500ms or 1s; 0: 1s)", w, MinBucketWidth)
	case s.WindowSize == 0:
		errs.add("BucketWidth", "%v has no effect without a window (no rate or failure-count threshold uses one)", w)
	default:
		s.BucketWidth = w
	}
}

// resolveMinimumCalls checks and resolves the minimum number of calls into
// s, whose window size is resolved, and checks the failure count against a
// count window's size.
func (c Config) resolveMinimumCalls(s *Settings, errs *problems) {
	s.MinimumNumberOfCalls = c.MinimumNumberOfCalls
	s.MinimumAppliesToCount = c.MinimumNumberOfCalls != 0
	switch {
	case c.MinimumNumberOfCalls < 0:
		errs.add("MinimumNumberOfCalls", "%d is below 1 call", c.MinimumNumberOfCalls)
	case c.MinimumNumberOfCalls == 0 && c.WindowType == CountBased && s.WindowSize > 0:
		s.MinimumNumberOfCalls = s.WindowSize
	case c.MinimumNumberOfCalls == 0:
		s.MinimumNumberOfCalls = defaultMinCalls
	case c.WindowType == CountBased && s.WindowSize > 0 && c.MinimumNumberOfCalls > s.WindowSize:
		errs.add("MinimumNumberOfCalls", "%d exceeds WindowSize %d: a count window of %d calls can never hold that many", c.MinimumNumberOfCalls, s.WindowSize, s.WindowSize)
	}
	if c.WindowType == CountBased && s.WindowSize > 0 && c.FailureCountThreshold > s.WindowSize {
		errs.add("FailureCountThreshold", "%d exceeds WindowSize %d: the breaker could never trip on it", c.FailureCountThreshold, s.WindowSize)
	}
}

// resolveProbes checks and resolves half-open's permitted calls and the
// probe successes that close the breaker and failures that re-open it
// into s.
func (c Config) resolveProbes(s *Settings, errs *problems) {
	s.PermittedCallsInHalfOpen = probeCount("PermittedCallsInHalfOpen", c.PermittedCallsInHalfOpen, 1, errs)
	s.SuccessesToClose = probeCount("SuccessesToClose", c.SuccessesToClose, s.PermittedCallsInHalfOpen, errs)
	s.FailuresToReopen = probeCount("FailuresToReopen", c.FailuresToReopen, 1, errs)
}

// probeCount checks the half-open count v of Config field, 1..
// MaxPermittedInHalf calls, and resolves it: zero is def. A value out of
// range is named in errs and kept as given (the Settings are not used).
func probeCount(field string, v, def int, errs *problems) int {
	switch {
	case v < 0 || v > MaxPermittedInHalf:
		errs.add(field, "%d is outside 1..%d calls", v, MaxPermittedInHalf)
	case v == 0:
		return def
	}
	return v
}

// resolveHalfOpenWaits checks and resolves the half-open max wait and the
// wait of an ErrHalfOpenFull rejection into s; both defaults derive from
// the open duration, resolved before.
func (c Config) resolveHalfOpenWaits(s *Settings, errs *problems) {
	switch w := c.MaxWaitInHalfOpen; {
	case w == WaitForever:
	case w < 0 || w > MaxOpenDurationLimit:
		errs.add("MaxWaitInHalfOpen", "%v is outside 0..%v (0: the default, max(OpenDuration, %v); WaitForever (%v): never)",
			w, MaxOpenDurationLimit, minDefaultMaxWait, WaitForever)
	case w == 0:
		// Zero only for an invalid config's open duration.
		s.MaxWaitInHalfOpen = max(s.OpenDuration, minDefaultMaxWait)
	}
	switch w := c.HalfOpenFullWait; {
	case w < 0 || w > MaxOpenDurationLimit:
		errs.add("HalfOpenFullWait", "%v is outside 0..%v (0: the default, OpenDuration/10)", w, MaxOpenDurationLimit)
	case w == 0:
		s.HalfOpenFullWait = max(wholeMillis(s.OpenDuration/10), time.Millisecond)
	default:
		s.HalfOpenFullWait = w
	}
}

// validateRampUpAndHints checks the ramp-up after closing and the bound on
// retry-after hints.
func (c Config) validateRampUpAndHints(errs *problems) {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"RampUpDuration", c.RampUpDuration}, {"MaxRetryAfter", c.MaxRetryAfter}} {
		if d.v < 0 || d.v > MaxOpenDurationLimit {
			errs.add(d.field, "%v is outside 0..%v (0 means off)", d.v, MaxOpenDurationLimit)
		}
	}
	switch {
	case c.RampUpStartPercent < 0 || c.RampUpStartPercent > 100:
		errs.add("RampUpStartPercent", "%d is outside 0..100 percent", c.RampUpStartPercent)
	case c.RampUpStartPercent > 0 && c.RampUpDuration == 0:
		errs.add("RampUpStartPercent", "%d%% has no effect without a RampUpDuration", c.RampUpStartPercent)
	}
}

// resolveOpenDurations resolves the open duration, the backoff factor and
// the maximum into s, and fills the backoff table: openDurations[0] is the
// open duration after a trip from closed, openDurations[i] after the i-th
// consecutive re-open from half-open. The table is computed once so that no
// float arithmetic runs on a transition. The first problem found ends the
// check: each value's rule reads the ones before it.
func (c Config) resolveOpenDurations(s *Settings, errs *problems) {
	base, ok := c.openDurationBase(errs)
	if !ok {
		return
	}
	factor, ok := c.backoffFactor(errs)
	if !ok {
		return
	}
	if c.OpenDurationFunc != nil && factor > 1 {
		errs.add("OpenDurationBackoff", "%v and OpenDurationFunc both decide the open duration; set one", factor)
		return
	}
	limit, ok := c.openDurationLimit(base, factor, errs)
	if !ok {
		return
	}
	if c.OpenDurationFunc != nil {
		// The function decides each duration; the table holds its
		// fallback, and the step counts re-opens for it up to the field's
		// width.
		for i := range s.openDurations {
			s.openDurations[i] = base
		}
		s.OpenDuration, s.OpenDurationBackoff, s.MaxOpenDuration, s.lastStep = base, factor, limit, MaxBackoffSteps
		return
	}
	last, ok := fillBackoff(&s.openDurations, base, factor, limit)
	if !ok {
		errs.add("OpenDurationBackoff", "factor %v needs more than %d re-opens to grow %v to MaxOpenDuration %v; raise the factor or lower the maximum", factor, MaxBackoffSteps, base, limit)
		return
	}
	s.OpenDuration, s.OpenDurationBackoff, s.MaxOpenDuration, s.lastStep = base, factor, limit, last
}

// openDurationBase is the open duration after a trip from closed: the
// default for zero; ok is false after a problem.
func (c Config) openDurationBase(errs *problems) (base time.Duration, ok bool) {
	switch base = c.OpenDuration; {
	case base < 0:
		errs.add("OpenDuration", "%v is negative", base)
		return 0, false
	case base == 0:
		return defaultOpenDuration, true
	case base > MaxOpenDurationLimit:
		errs.add("OpenDuration", "%v exceeds the limit of %v", base, MaxOpenDurationLimit)
		return 0, false
	}
	return base, true
}

// backoffFactor is the factor of the open-duration backoff: 1 (none) for
// zero; ok is false after a problem.
func (c Config) backoffFactor(errs *problems) (factor float64, ok bool) {
	switch factor = c.OpenDurationBackoff; {
	case math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 0 || (factor > 0 && factor < 1):
		errs.add("OpenDurationBackoff", "%v is not a factor >= 1 (0 means no backoff)", factor)
		return 0, false
	case factor == 0:
		return 1, true
	}
	return factor, true
}

// openDurationLimit is the backed-off open duration's maximum for the
// resolved base and factor: base for zero; ok is false after a problem.
func (c Config) openDurationLimit(base time.Duration, factor float64, errs *problems) (limit time.Duration, ok bool) {
	switch limit = c.MaxOpenDuration; {
	case limit < 0:
		errs.add("MaxOpenDuration", "%v is negative", limit)
	case limit == 0 && factor > 1:
		errs.add("MaxOpenDuration", "must be set when OpenDurationBackoff is %v", factor)
	case limit == 0 && c.OpenDurationFunc != nil:
		errs.add("MaxOpenDuration", "must be set when OpenDurationFunc is set: it bounds the function's result")
	case limit == 0:
		return base, true
	case factor == 1 && limit != base && c.OpenDurationFunc == nil:
		errs.add("MaxOpenDuration", "%v has no effect without an OpenDurationBackoff above 1 or an OpenDurationFunc", limit)
	case limit < base:
		errs.add("MaxOpenDuration", "%v is below OpenDuration %v", limit, base)
	case limit > MaxOpenDurationLimit:
		errs.add("MaxOpenDuration", "%v exceeds the limit of %v", limit, MaxOpenDurationLimit)
	default:
		return limit, true
	}
	return 0, false
}

// resolveJitter checks the open-duration jitter and resolves it into s as
// a share of 2^32, so that no float arithmetic runs on a transition.
func (c Config) resolveJitter(s *Settings, errs *problems) {
	j := c.OpenDurationJitter
	if !(j >= 0 && j <= 1) { // NaN fails both
		errs.add("OpenDurationJitter", "%v is outside 0..1 (a fraction of the open duration; 0 means none)", j)
		return
	}
	s.OpenDurationJitter, s.jitterScale = j, uint64(j*(1<<32))
}

// fillBackoff fills d with the open duration after each number of
// consecutive re-opens, growing from base by factor up to limit, and
// returns the first step whose duration is limit; ok is false when no step
// reaches it.
func fillBackoff(d *[MaxBackoffSteps + 1]time.Duration, base time.Duration, factor float64, limit time.Duration) (last uint8, ok bool) {
	d[0] = base
	for i := 1; i <= MaxBackoffSteps; i++ {
		next := float64(d[i-1]) * factor
		if next >= float64(limit) || d[i-1] == limit {
			d[i] = limit
		} else {
			d[i] = time.Duration(next)
		}
	}
	for i, v := range d {
		if v == limit {
			return uint8(i), true
		}
	}
	return 0, false
}
