package core

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// WindowType selects how the sliding window that the rate and count rules
// read is bounded. The zero value is CountBased.
type WindowType uint8

const (
	// CountBased keeps the last WindowSize counted calls (Resilience4j
	// COUNT_BASED).
	CountBased WindowType = iota
	// TimeBased keeps the calls completed in the last WindowSize whole seconds
	// of the breaker clock (Resilience4j TIME_BASED), in per-second buckets.
	TimeBased
)

// String returns "count-based" or "time-based".
func (t WindowType) String() string {
	if t == TimeBased {
		return "time-based"
	}
	if t == CountBased {
		return "count-based"
	}
	return fmt.Sprintf("WindowType(%d)", uint8(t))
}

// Limits of the configuration. They come from the widths of the packed words
// (docs/design.md): the count window packs five counts of up to 8 bits into one
// word, the half-open probe counts have 8 bits each, and the backoff step 5.
const (
	MaxCountWindow       = 255                  // calls
	MaxTimeWindow        = 3600                 // seconds
	MaxPermittedInHalf   = 255                  // calls: 8 bits of the state word
	MaxBackoffSteps      = 31                   // re-opens: 5 bits of the state word
	MaxOpenDurationLimit = 365 * 24 * time.Hour // a year, well inside the 2^35 ms deadline range
	// MaxConsecutiveFailures is the largest ConsecutiveFailures: the run of
	// failures is counted in 16 bits of the state word (the rest of the
	// closed payload holds the ramp-up deadline).
	MaxConsecutiveFailures = 1<<16 - 1 // calls
	defaultWindowSize      = 100
	defaultMinCalls        = 100
	defaultOpenDuration    = 60 * time.Second
)

// WaitForever is the Config.MaxWaitInHalfOpen that turns the half-open max
// wait off: a half-open breaker whose probes never report stays half-open,
// rejecting every other call with ErrHalfOpenFull, until a manual control.
// It is the only negative value Validate accepts there.
const WaitForever time.Duration = -1

// minDefaultMaxWait is the floor of the default half-open max wait: a
// probe call may take longer than a short open duration, and one superseded
// before it can report would keep the breaker from ever closing.
const minDefaultMaxWait = time.Minute

// ErrInvalidConfig is what every configuration error matches with errors.Is.
// The constructors return errors.Join of one *ConfigError per problem found.
var ErrInvalidConfig = errors.New("core: invalid config")

// ConfigError names one configuration field and what is wrong with it.
// It matches ErrInvalidConfig with errors.Is.
type ConfigError struct {
	Field   string // the Config field, for example "MinimumNumberOfCalls"
	Problem string // what is wrong, with the offending value
}

func (e *ConfigError) Error() string {
	return "core: Config." + e.Field + ": " + e.Problem
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Config describes a breaker. Field names follow Resilience4j and gobreaker.
// Every field's zero value is documented; a zero Config is invalid only
// because it enables no trip rule. Config is read once by the
// constructor; changing it afterwards has no effect.
type Config struct {
	// Name labels the breaker in Transition notifications, and through the
	// observability packages in metric labels and log lines. It must be
	// valid UTF-8, which metric label values must be: Validate rejects any
	// other name rather than let one breaker fail a whole scrape. Any valid
	// UTF-8 is accepted, control characters included: label values may hold
	// them, and the exporters and log handlers quote them. Zero: "".
	Name string

	// WindowType selects a count-based or time-based sliding window. Zero:
	// CountBased.
	WindowType WindowType
	// WindowSize is the window length: calls for CountBased (1..255), whole
	// seconds for TimeBased (1..3600). Zero: 100 when a rule needs a window
	// (a rate threshold or FailureCountThreshold), otherwise no window.
	WindowSize int
	// MinimumNumberOfCalls is the number of calls the window must hold before
	// the rate rules may trip (a partial window is never judged). Zero:
	// WindowSize for CountBased, 100 for TimeBased. When set (non-zero) it
	// also applies to FailureCountThreshold. It never applies to
	// ConsecutiveFailures or in half-open.
	//
	// Pick it from the lowest traffic that should still trip: a time window
	// holds about rate x WindowSize calls, and with fewer than the minimum
	// the rate rules never trip. The time-window default of 100 needs 10
	// calls a second in a 10 s window: at 5 calls a second a 10 s window
	// holds 50, and a dependency failing every call stays closed. For such
	// a window set it to, say, half of rate x WindowSize (25 there).
	MinimumNumberOfCalls int

	// FailureRateThreshold trips the breaker when failures*100 >=
	// threshold*calls, in percent, 0..100 (inclusive). Zero: disabled.
	FailureRateThreshold int
	// SlowCallRateThreshold trips the breaker when slow*100 >= threshold*calls,
	// in percent, 0..100. Zero: disabled. Needs SlowCallDurationThreshold.
	SlowCallRateThreshold int
	// SlowCallDurationThreshold marks a counted call slower than it as slow.
	// Zero: no call is slow, and no duration is measured (no clock read on
	// Allow or Done for it).
	SlowCallDurationThreshold time.Duration
	// FailureCountThreshold trips the breaker when the window holds at least
	// this many failures (for example 3 failures within a 600 s window). Zero:
	// disabled.
	FailureCountThreshold int
	// ConsecutiveFailures trips the breaker after this many counted failures
	// in a row while closed (gobreaker's ConsecutiveFailures > N). Zero:
	// disabled. It needs no window.
	ConsecutiveFailures int

	// OpenDuration is how long the breaker stays open before a call may probe
	// (Resilience4j waitDurationInOpenState, gobreaker Timeout). It is kept
	// at millisecond resolution, rounded up, so it is never shortened.
	// Zero: 60 s. At most a year.
	OpenDuration time.Duration
	// OpenDurationBackoff multiplies the open duration on every re-open from
	// half-open, up to MaxOpenDuration; closing resets it ("a
	// few seconds, growing to minutes"). Zero or 1: no backoff. The maximum
	// must be reached within 31 re-opens.
	OpenDurationBackoff float64
	// MaxOpenDuration caps the backed-off open duration. Zero: OpenDuration
	// (no growth); required when OpenDurationBackoff > 1, and rejected
	// without it (it would have no effect).
	MaxOpenDuration time.Duration

	// PermittedCallsInHalfOpen is how many probes may be in flight at once in
	// half-open, 1..255. Zero: 1.
	PermittedCallsInHalfOpen int
	// SuccessesToClose is how many probe successes close the breaker,
	// 1..255. Zero: PermittedCallsInHalfOpen.
	SuccessesToClose int

	// Classifier maps a call's error to an outcome. Zero:
	// DefaultClassifier. It runs on the caller's goroutine inside Done; if it
	// panics the permit is released as Ignored and the panic propagates.
	Classifier func(error) Outcome
	// Clock is the only source of time. Zero: a monotonic clock started
	// at construction (NewSystemClock); a zero SystemClock{} works too and
	// measures from the package's initialization. It must not panic or call
	// into the breaker: the baseline reads it under its mutex.
	Clock Clock
	// MaxWaitInHalfOpen bounds how long a half-open generation may go without
	// a verdict (Resilience4j maxWaitDurationInHalfOpenState). When it has
	// passed, the first call that would be rejected because every probe slot
	// is taken starts a new half-open generation instead and is its first
	// probe: the permits of the lost probes (a caller that never called Done,
	// a goroutine that died) become stale. Until then a call refused
	// with ErrHalfOpenFull gets the time left in Permit.RetryAfter. It is kept in
	// coarse units of max(1 ms, MaxWaitInHalfOpen/1024) rounded up, so it is
	// never shortened. At most a year.
	//
	// Zero: the open duration (OpenDuration, before any backoff), but at
	// least one minute, so that one lost probe costs at most about one more
	// open period, never the service (Resilience4j and gobreaker stay
	// half-open for good). Set it above the longest a probe call can take:
	// a probe still running when the wait ends is superseded, and its
	// outcome arrives stale. WaitForever turns it off: a lost probe then
	// keeps the breaker half-open until a manual control, and half-open
	// reads no clock for it. Any other negative value is rejected.
	MaxWaitInHalfOpen time.Duration
	// HalfOpenFullWait is the wait an ErrHalfOpenFull rejection asks its
	// caller for (Permit.RetryAfter and the rejection's RetryAfter): the probes in
	// flight decide the breaker's fate within about one call's duration, so a
	// refused caller should come back after about that long, neither at once
	// (a busy loop) nor after the whole max wait. The wait reported is the
	// shorter of this and what is left of MaxWaitInHalfOpen. Zero: a tenth
	// of OpenDuration, rounded up to whole milliseconds, at least 1 ms (6 s
	// for the default open duration of 60 s). 0..a year;
	// anything else is rejected.
	HalfOpenFullWait time.Duration

	// RampUpDuration is how long after half-open -> closed the breaker admits
	// only a linearly growing share of calls, from RampUpStartPercent to
	// 100 %, rejecting the rest with ErrRampingUp (against the pent-up
	// demand that re-trips a dependency the moment it recovers). The share
	// is decided per call from a hash of its clock reading, with no shared
	// counter: calls with the same reading (a frozen ManualClock, a coarse
	// clock) all get the same answer. A manual Reset closes without ramp-up.
	// Zero: off, and closed Allow reads no clock for it. At most a year.
	RampUpDuration time.Duration
	// RampUpStartPercent is the share of calls admitted at the instant of
	// closing, in percent, 0..100. Zero: 0 %. A non-zero value without
	// RampUpDuration is rejected (it would have no effect).
	RampUpStartPercent int

	// MaxRetryAfter enables retry-after hints and bounds them: a call whose
	// outcome is Failure and whose error carries a positive hint (RetryAfterOf)
	// trips the breaker at once, closed or half-open, and keeps it open for
	// at least min(hint, MaxRetryAfter), rounded up to whole milliseconds.
	// Zero: hints are ignored and errors are not inspected for them. At most
	// a year.
	MaxRetryAfter time.Duration

	// CollectMetrics turns on the cumulative counters that Metrics returns.
	// They cost one shared atomic add per Allow and per outcome. Zero: off,
	// Metrics returns zeros and no counter is written.
	CollectMetrics bool

	// OnStateChange is called once per committed transition, in generation
	// order, outside every internal critical section, on the goroutine of one
	// of the callers involved. It may call back into the breaker. Zero:
	// no notifications.
	//
	// A panic in it propagates out of the call that was delivering (Allow,
	// Done, Record, RecordHint or a manual control; the transition stays
	// committed, and an Allow releases as ignored the probe permit its
	// caller never gets). The notifications queued behind the panicking one
	// are delivered first, on the same goroutine as the panic unwinds; a
	// panic among them is recovered and dropped, so that the rest still go
	// out: the caller gets the first.
	OnStateChange func(Transition)
}

// Settings is a validated Config with every default resolved: plain data.
// Both breaker implementations are built from it, so they can never
// disagree about a default, and each decides the rules from it with its own
// code. Build one with Config.Validate.
type Settings struct {
	Name                      string
	WindowType                WindowType
	WindowSize                int // 0: no window
	MinimumNumberOfCalls      int
	MinimumAppliesToCount     bool
	FailureRateThreshold      int
	SlowCallRateThreshold     int
	SlowCallDurationThreshold time.Duration
	FailureCountThreshold     int
	ConsecutiveFailures       int
	OpenDuration              time.Duration // after a trip from closed
	OpenDurationBackoff       float64       // 1: no backoff
	MaxOpenDuration           time.Duration // OpenDuration when there is no backoff
	PermittedCallsInHalfOpen  int
	SuccessesToClose          int
	MaxWaitInHalfOpen         time.Duration // resolved: > 0, or WaitForever
	HalfOpenFullWait          time.Duration // resolved: > 0
	RampUpDuration            time.Duration
	RampUpStartPercent        int
	MaxRetryAfter             time.Duration
	CollectMetrics            bool
	Classifier                func(error) Outcome
	Clock                     Clock
	OnStateChange             func(Transition)

	rule          trip.Rule
	halfOpenWait  coarse
	rampUp        coarse
	openDurations [MaxBackoffSteps + 1]time.Duration
	lastStep      uint8
}

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
		MaxWaitInHalfOpen:         c.MaxWaitInHalfOpen,
		RampUpDuration:            c.RampUpDuration,
		RampUpStartPercent:        c.RampUpStartPercent,
		MaxRetryAfter:             c.MaxRetryAfter,
		CollectMetrics:            c.CollectMetrics,
		Classifier:                c.Classifier,
		Clock:                     c.Clock,
		OnStateChange:             c.OnStateChange,
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
	c.resolveHalfOpenWaits(&s, &errs)
	c.validateRampUpAndHints(&errs)
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

// resolveWindow checks and resolves the sliding window's size and then
// the minimum number of calls into s.
func (c Config) resolveWindow(s *Settings, needWindow bool, errs *problems) {
	s.WindowSize = c.WindowSize
	maxWindow, unit := MaxCountWindow, "calls"
	if c.WindowType == TimeBased {
		maxWindow, unit = MaxTimeWindow, "seconds"
	}
	switch {
	case c.WindowSize < 0 || c.WindowSize > maxWindow:
		errs.add("WindowSize", "%d is outside 1..%d %s for a %v window", c.WindowSize, maxWindow, unit, c.WindowType)
	case c.WindowSize == 0 && needWindow:
		s.WindowSize = defaultWindowSize
	}
	c.resolveMinimumCalls(s, errs)
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
// probe successes that close the breaker into s.
func (c Config) resolveProbes(s *Settings, errs *problems) {
	s.PermittedCallsInHalfOpen = c.PermittedCallsInHalfOpen
	switch {
	case c.PermittedCallsInHalfOpen < 0 || c.PermittedCallsInHalfOpen > MaxPermittedInHalf:
		errs.add("PermittedCallsInHalfOpen", "%d is outside 1..%d calls", c.PermittedCallsInHalfOpen, MaxPermittedInHalf)
	case c.PermittedCallsInHalfOpen == 0:
		s.PermittedCallsInHalfOpen = 1
	}
	s.SuccessesToClose = c.SuccessesToClose
	switch {
	case c.SuccessesToClose < 0 || c.SuccessesToClose > MaxPermittedInHalf:
		errs.add("SuccessesToClose", "%d is outside 1..%d calls", c.SuccessesToClose, MaxPermittedInHalf)
	case c.SuccessesToClose == 0:
		s.SuccessesToClose = s.PermittedCallsInHalfOpen
	}
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
	limit, ok := c.openDurationLimit(base, factor, errs)
	if !ok {
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
	case limit == 0:
		return base, true
	case factor == 1 && limit != base:
		errs.add("MaxOpenDuration", "%v has no effect without an OpenDurationBackoff above 1", limit)
	case limit < base:
		errs.add("MaxOpenDuration", "%v is below OpenDuration %v", limit, base)
	case limit > MaxOpenDurationLimit:
		errs.add("MaxOpenDuration", "%v exceeds the limit of %v", limit, MaxOpenDurationLimit)
	default:
		return limit, true
	}
	return 0, false
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
