package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/internal/window/buckets"
)

// WindowType selects how the sliding window that the rate and count rules
// read is bounded. The zero value is CountBased.
type WindowType uint8

const (
	// CountBased keeps the last WindowSize counted calls (Resilience4j
	// COUNT_BASED).
	CountBased WindowType = iota
	// TimeBased keeps the calls completed in the last WindowSize whole seconds
	// of the breaker clock (Resilience4j TIME_BASED), in buckets of
	// BucketWidth (one second by default).
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
// word, the half-open probe counts (in flight, successes, failures) have 7
// bits each, and the backoff step 5.
const (
	MaxCountWindow       = 255                  // calls
	MaxTimeWindow        = 3600                 // seconds, in buckets of 1 s (MaxTimeBuckets)
	MaxPermittedInHalf   = 127                  // calls: 7 bits of the state word
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

// Limits of a time window's buckets. They bound its memory (40 bytes a
// bucket, plus 8 per success stripe) and the cost of a sum over it, which
// reads every bucket, so a window of narrower buckets spans less time.
const (
	// MaxTimeBuckets is the most buckets a time window holds: WindowSize
	// times the buckets per second (1 s / BucketWidth) is at most this,
	// so WindowSize is at most MaxTimeWindow seconds at the default width,
	// 360 at 100 ms.
	MaxTimeBuckets = buckets.MaxBuckets
	// MinBucketWidth is the narrowest BucketWidth.
	MinBucketWidth = buckets.MinWidth
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
	// seconds for TimeBased (1..3600, and at most MaxTimeBuckets buckets of
	// BucketWidth: 1..360 at 100 ms). Zero: 100 when a rule needs a window
	// (a rate threshold or FailureCountThreshold), otherwise no window.
	WindowSize int
	// BucketWidth is the width of a time window's buckets, the step in
	// which the window slides: an outcome counts from its completion until
	// the end of its bucket's WindowSize seconds, between WindowSize less
	// one width and WindowSize after it completed (with 1 s buckets, one
	// at 0.95 s in a 2 s window leaves at 2 s; with 100 ms buckets at
	// 2.9 s). It must be a whole number of milliseconds from
	// MinBucketWidth (100 ms) to 1 s that divides 1 s: 100, 125, 200, 250
	// or 500 ms, or 1 s. A window holds WindowSize x (1 s / BucketWidth)
	// buckets, at most MaxTimeBuckets; its memory and the cost of summing
	// it grow with them, not with the width. A width below 1 s costs New
	// one reading of Clock: the lock-free window counts time in 32 bits of
	// widths (136 years at 1 s, from the clock's base; 13.6 at 100 ms), so
	// a narrower one counts them from a whole second 2^30 widths before
	// that reading, which a Clock based at the Unix epoch needs, and stops
	// sliding 2^32 widths after it: at least 10.2 years after New at
	// 100 ms. Zero: 1 s for a time-based window. Any other value, and any
	// non-zero value for a count-based window or for a breaker without a
	// window, is rejected.
	BucketWidth time.Duration
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
	// (no growth); required when OpenDurationBackoff > 1 or
	// OpenDurationFunc is set, and rejected without either (it would have
	// no effect). It bounds OpenDurationFunc's result too.
	MaxOpenDuration time.Duration

	// OpenDurationFunc, when set, decides the open duration of each trip
	// from closed and each re-open from half-open, in place of OpenDuration
	// and its backoff (failsafe-go's WithDelayFunc, Polly's
	// BreakDurationGenerator). It is called with reopens, the number of
	// consecutive re-opens from half-open since the breaker last closed (0
	// for a trip from closed; it stops counting at 31), and lastFailure,
	// the error passed to Done by the call whose outcome decided the
	// transition (nil when that outcome came through Record or RecordHint,
	// or was a slow success). Validate rejects it beside an
	// OpenDurationBackoff above 1 (the error names OpenDurationBackoff) and
	// without a MaxOpenDuration (naming MaxOpenDuration).
	//
	// Its result is kept in whole milliseconds, rounded up. Zero or
	// negative means OpenDuration; above MaxOpenDuration means
	// MaxOpenDuration: the bound is the rule, not an error. A retry-after
	// hint still lengthens it (MaxRetryAfter), and OpenDurationJitter
	// applies on top. It does not decide ForceOpen's duration or that of a
	// breaker that starts open (InitialState): those follow no failure.
	//
	// It runs on the goroutine of the call that decided the transition
	// (Done, Record or RecordHint), before the transition commits; calls
	// on several goroutines may run it at once. The lock-free breaker runs
	// it outside every internal critical section, so a slow function
	// delays only its caller; the mutex baseline runs it under its mutex,
	// so it must not call into the breaker. It should be a function of its
	// arguments: a trip that races other calls may run it more than once
	// and keep one result, and a trip that another call commits on behalf
	// of the deciding one (a race only; docs/design.md, Known limits) opens
	// for OpenDuration without running it. A trip from closed runs it
	// before asking OpenGate, so a trip the gate caps has run it, its
	// result unused. If it panics, the transition (or the cap) still
	// commits, for OpenDuration, and is notified; then the panic
	// propagates out of the call that ran it, so no breaker is left wedged.
	// Zero: OpenDuration and its backoff decide.
	OpenDurationFunc func(reopens int, lastFailure error) time.Duration
	// OpenDurationJitter lengthens every open duration (OpenDuration, a
	// backed-off one, OpenDurationFunc's, one set by a retry-after hint,
	// ForceOpen's and an initial Open's) by a fraction of it between 0 and
	// this, so that replicas that tripped together do not probe together.
	// It is a fraction, 0..1; anything else (NaN included) is rejected.
	// Jitter only lengthens: a retry-after hint and OpenDuration stay
	// minimums, and MaxOpenDuration bounds the duration before jitter; the
	// jittered duration is at most MaxOpenDurationLimit. The fraction is
	// not random: it is a hash of the transition's clock reading and
	// generation, so both breaker implementations agree on it exactly, and
	// replicas differ because their clocks do. Zero: no jitter.
	OpenDurationJitter float64

	// PermittedCallsInHalfOpen is how many probes may be in flight at once in
	// half-open, 1..127. Zero: 1.
	PermittedCallsInHalfOpen int
	// SuccessesToClose is how many probe successes close the breaker,
	// 1..127. Zero: PermittedCallsInHalfOpen.
	SuccessesToClose int
	// FailuresToReopen is how many counted probe failures re-open the
	// breaker, 1..127: a half-open generation tolerates one fewer, and
	// closes once SuccessesToClose probes succeed before that many fail
	// ("close after 8 of 10 probes succeed" is PermittedCallsInHalfOpen 10,
	// SuccessesToClose 8, FailuresToReopen 3). A probe failure that does
	// not re-open returns its slot, as an ignored probe does. Half-open
	// admits no more probes than can still matter: probes in flight plus
	// the successes and failures counted stay below SuccessesToClose +
	// FailuresToReopen. A failure carrying an honoured retry-after hint
	// (MaxRetryAfter) re-opens at once, whatever this says. Zero: 1, the
	// first probe failure re-opens (Resilience4j's and gobreaker's rule).
	FailuresToReopen int

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

	// InitialState is the state a new breaker starts in, at generation 0,
	// with no transition and no notification: Closed (the zero value),
	// Open (for the open duration, from a clock reading New takes, as after
	// a trip), HalfOpen (no probe in flight, its max wait from New's
	// reading), ForcedOpen, Disabled or MetricsOnly. A service that knows
	// its dependency is down at start, or that restores a breaker's state,
	// starts it there. Any other value is rejected.
	InitialState State

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

	// MaxRetryAfter is the switch that honours the dependency's retry-after
	// hints (an HTTP Retry-After, a gRPC pushback, WithRetryAfter) and their
	// bound; unset, no hint is honoured. Set: a call whose
	// outcome is Failure and whose error carries a positive hint (RetryAfterOf)
	// trips the breaker at once, closed or half-open, and keeps it open for
	// at least min(hint, MaxRetryAfter), rounded up to whole milliseconds.
	// Zero: hints are ignored and errors are not inspected for them. At most
	// a year.
	MaxRetryAfter time.Duration

	// OpenGate, when set, caps how many of the breakers sharing it may be
	// ejected (open, half-open or forced open) at once: a trip that finds
	// no open slot free commits closed -> closed with ReasonCapped (a new
	// generation and a fresh window, like metrics-only's "would have
	// opened") and the breaker stays closed. The manual controls that
	// eject (ForceOpen, HalfOpen) and an ejecting InitialState take a slot
	// even when none is free. See OpenGate for when it is called. Zero:
	// no cap, and no gate is called.
	OpenGate OpenGate

	// ProbeGate, when set, is asked before each half-open probe goes out
	// and may refuse it with a wait, and is told each probe's outcome: a
	// probe budget shared beyond this breaker (the fleet module's). See
	// ProbeGate for when it is called. Zero: no gate, and every probe the
	// breaker admits goes out.
	ProbeGate ProbeGate

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
