package baseline

import (
	"context"
	"math/bits"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// The rules of docs/semantics.md and docs/design.md, decided here from
// their text, plainly and independently of core's code: the two breakers
// share only the validated configuration (core.Settings' fields), so a bug
// in either side's rules shows as a difference in the differential tests.
// baseline/rules_test.go checks each rule against the hand-computed values
// of internal/rulecases, as core/rules_test.go checks core's.
//
// Time is taken in uint64 nanoseconds: a clock reading is at most 2^63-1 ns
// and every configured duration at most a year (under 2^55 ns), so a
// reading plus a duration, rounded up to any unit here, stays below 2^64.

// nanos is a clock reading in nanoseconds, a negative one counted as zero
// (R14).
func nanos(now time.Duration) uint64 {
	if now < 0 {
		return 0
	}
	return uint64(now)
}

// ceilDiv is a/b rounded up.
func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

const msec = uint64(time.Millisecond)

// openDeadline is the first whole millisecond of the clock at which a call
// may probe a breaker that opened at now for d: the open duration is kept at
// millisecond resolution, rounded up, so it is never shortened (R4,
// Config.OpenDuration).
func openDeadline(now, d time.Duration) uint64 { return ceilDiv(nanos(now)+uint64(d), msec) }

// untilOpenDeadline is how long a call at now waits for the deadline ms
// (Permit.RetryAfter), 0 from the deadline on.
func untilOpenDeadline(ms uint64, now time.Duration) time.Duration {
	end, t := ms*msec, nanos(now)
	if t >= end {
		return 0
	}
	return time.Duration(end - t)
}

// span is a configured duration d (the half-open max wait, the ramp-up)
// measured in coarse units: d/1024 rounded up to whole milliseconds (so at
// least 1 ms), with d itself kept in whole units rounded up
// (Config.MaxWaitInHalfOpen). The zero span is a feature that is off.
type span struct {
	d, unit uint64 // nanoseconds
	units   uint64 // d in units, rounded up: 1..1024
}

func newSpan(d time.Duration) span {
	if d <= 0 {
		return span{}
	}
	unit := ceilDiv(uint64(d), 1024*msec) * msec
	return span{d: uint64(d), unit: unit, units: ceilDiv(uint64(d), unit)}
}

// at is the reading now in whole units.
func (s span) at(now time.Duration) uint64 { return nanos(now) / s.unit }

// deadline is the first unit boundary at or after now + d, in units: it has
// passed at a reading r when at(r) >= deadline.
func (s span) deadline(now time.Duration) uint64 { return ceilDiv(nanos(now)+s.d, s.unit) }

// left is how many units the deadline is ahead of the reading now.
func (s span) left(deadline uint64, now time.Duration) int64 {
	return int64(deadline) - int64(s.at(now))
}

// until is how long a call at now waits for a deadline that has not passed
// (Permit.RetryAfter of a half-open-full rejection): to the deadline's unit
// boundary, at most d rounded up plus one unit.
func (s span) until(deadline uint64, now time.Duration) time.Duration {
	return time.Duration(deadline*s.unit - nanos(now))
}

// over reports whether a deadline left units ahead has passed: it is not
// ahead, or it is further ahead than any deadline is ever set (d rounded
// up, plus one unit), which only a clock that went back by more than d can
// make it, and the lock-free word's 19- or 15-bit difference after a long
// idle (docs/design.md, Known limits).
func (s span) over(left int64) bool {
	return left <= 0 || left > int64(s.units)+1
}

// admits decides a call at reading now during a ramp-up from startPercent
// whose deadline is left units ahead (a ramp that is not over): the share
// admitted grows linearly from startPercent to 100 % over the span, and the
// call is admitted when the high 32 bits of fmix64 of its reading are below
// that share of 2^32, rounded down (docs/design.md, Ramp-up after close).
func (s span) admits(startPercent int, left uint64, now time.Duration) bool {
	elapsed := s.units - min(left, s.units)
	// The share is num/den: at most 100*1024 over 100*1024.
	num := uint64(startPercent)*s.units + uint64(100-startPercent)*elapsed
	den := 100 * s.units
	h := uint64(fmix64(uint64(now)) >> 32)
	// h < floor(num * 2^32 / den) exactly when h+1 <= num * 2^32 / den, as
	// h+1 is a whole number. Both sides stay below 2^50.
	return (h+1)*den <= num<<32
}

// fmix64 is the 64-bit finalizer of MurmurHash3 (Austin Appleby's
// reference, MurmurHash3.cpp).
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// backoff is the open duration of a re-open from half-open after a period
// that opened for d (without a hint): d times the factor, in float64 and
// truncated to whole nanoseconds, up to the maximum (R4).
func backoff(s *core.Settings, d time.Duration) time.Duration {
	next := float64(d) * s.OpenDurationBackoff
	if next >= float64(s.MaxOpenDuration) {
		return s.MaxOpenDuration
	}
	return time.Duration(next)
}

// hinted is the open duration of a trip or re-open whose period opens for
// d with the bounded hint h: the hint, rounded up to whole milliseconds, if
// that is longer; a hint never shortens the open duration.
func hinted(d, h time.Duration) time.Duration { return max(d, wholeMillis(h)) }

// wholeMillis is d (not negative) rounded up to whole milliseconds: how a
// retry-after hint and ForceOpen's duration are kept.
func wholeMillis(d time.Duration) time.Duration {
	return time.Duration(ceilDiv(uint64(d), msec) * msec)
}

// bound is the retry-after hint d bounded by Config.MaxRetryAfter: 0 (no
// hint) when hints are off or d is not positive.
func bound(s *core.Settings, d time.Duration) time.Duration {
	switch {
	case s.MaxRetryAfter <= 0 || d <= 0:
		return 0
	case d > s.MaxRetryAfter:
		return s.MaxRetryAfter
	}
	return d
}

// isSlow reports whether a call that took d is slow: strictly slower than a
// configured threshold.
func isSlow(s *core.Settings, d time.Duration) bool {
	return s.SlowCallDurationThreshold > 0 && d > s.SlowCallDurationThreshold
}

// trips is R1: whether a closed breaker whose window holds w, with a run of
// consec failures, must trip.
func trips(s *core.Settings, w windowCounts, consec uint64) bool {
	if s.ConsecutiveFailures > 0 && consec >= uint64(s.ConsecutiveFailures) {
		return true // minimum calls never applies to the run of failures
	}
	enough := w.n >= uint64(s.MinimumNumberOfCalls)
	if s.FailureCountThreshold > 0 && w.f >= uint64(s.FailureCountThreshold) && (enough || !s.MinimumAppliesToCount) {
		return true
	}
	// Percentages of at most 100 times at most 2^56 calls: 64 bits suffice.
	return enough && (s.FailureRateThreshold > 0 && w.f*100 >= uint64(s.FailureRateThreshold)*w.n ||
		s.SlowCallRateThreshold > 0 && w.s*100 >= uint64(s.SlowCallRateThreshold)*w.n)
}

// tripReason is the reason of a trip whose window holds w (trips holds):
// the first rule that holds of the failure rate, the slow-call rate, the
// failure count and the consecutive failures, as core.Transition.Reason
// documents.
func tripReason(s *core.Settings, w windowCounts) core.Reason {
	enough := w.n >= uint64(s.MinimumNumberOfCalls)
	if enough && s.FailureRateThreshold > 0 && w.f > 0 && w.f*100 >= uint64(s.FailureRateThreshold)*w.n {
		return core.ReasonFailureRate
	}
	if enough && s.SlowCallRateThreshold > 0 && w.s > 0 && w.s*100 >= uint64(s.SlowCallRateThreshold)*w.n {
		return core.ReasonSlowCallRate
	}
	if s.FailureCountThreshold > 0 && w.f >= uint64(s.FailureCountThreshold) && (enough || !s.MinimumAppliesToCount) {
		return core.ReasonFailureCount
	}
	return core.ReasonConsecutiveFailures
}

// wall is a Transition's wall-clock time: the clock's, if it tells one.
func wall(c core.Clock, at time.Duration) time.Time {
	if w, ok := c.(core.WallClock); ok {
		return w.Wall(at)
	}
	return time.Time{}
}

// classify is R9's default: a call that gave up (context.Canceled) or that
// a local limit refused (core.ErrIgnored) is ignored, every other error a
// failure. (Done never classifies nil: it is
// a success.)
func classify(err error) core.Outcome {
	if matchesIgnored(err) {
		return core.Ignored
	}
	return core.Failure
}

// matchesIgnored reports whether any error in err's tree is, or says by its
// Is method that it is, context.Canceled or core.ErrIgnored: what
// errors.Is decides for each target, in one walk for both, so a failure
// pays for one (errors.Is takes the tree depth first; the answer does not
// depend on the order).
func matchesIgnored(err error) bool {
	if err == nil {
		return false
	}
	if err == context.Canceled || err == core.ErrIgnored {
		return true
	}
	if is, ok := err.(interface{ Is(error) bool }); ok && (is.Is(context.Canceled) || is.Is(core.ErrIgnored)) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return matchesIgnored(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if matchesIgnored(e) {
				return true
			}
		}
	}
	return false
}

// retryAfter is the first positive hint in err's tree, walked depth first
// as errors.As walks it, or 0.
func retryAfter(err error) time.Duration {
	if err == nil {
		return 0
	}
	if h, ok := err.(core.RetryAfterHint); ok {
		if d := h.RetryAfter(); d > 0 {
			return d
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return retryAfter(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if d := retryAfter(e); d > 0 {
				return d
			}
		}
	}
	return 0
}

// openDurationOf is core.Config.OpenDurationFunc's open duration after
// reopens consecutive re-opens, for the failure err: the function's result
// in whole milliseconds, rounded up, where zero or less (or a panic) means
// the open duration and above the maximum means the maximum. A panic is
// recovered and returned in pv, never nil for a panic (panic(nil) raises a
// *runtime.PanicNilError).
func openDurationOf(s *core.Settings, reopens int, err error) (d time.Duration, pv any) {
	func() {
		defer func() { pv = recover() }()
		d = s.OpenDurationFunc(reopens, err)
	}()
	if pv != nil || d <= 0 {
		d = s.OpenDuration
	}
	return wholeMillis(min(d, s.MaxOpenDuration)), pv
}

// jitterShare is the jitter fraction j (0..1, validated) in units of 2^-32.
func jitterShare(j float64) uint64 { return uint64(j * (1 << 32)) }

// jitter is the open duration d of a transition to Open committed at
// reading now into generation gen, lengthened by the jitter fraction share
// (units of 2^-32) times a hash: the high 32 bits of fmix64 of the reading
// (negative counted as zero) plus the generation's low 20 bits times
// 0x9e3779b97f4a7c15, mod 2^64, times share over 2^32, rounded down: this
// transition's fraction, in units of 2^-32. The extra is d in whole
// milliseconds rounded up times that fraction, in whole milliseconds
// rounded down, and the result at most core.MaxOpenDurationLimit
// (docs/design.md, Open-duration jitter).
func jitter(share uint64, d, now time.Duration, gen uint64) time.Duration {
	if share == 0 {
		return d
	}
	h := fmix64(nanos(now)+(gen&(1<<20-1))*0x9e3779b97f4a7c15) >> 32
	frac := h * share >> 32 // h < 2^32, share <= 2^32
	hi, lo := bits.Mul64(frac, ceilDiv(uint64(d), msec))
	extra := time.Duration(hi<<32|lo>>32) * time.Millisecond // < 2^35 ms, as d is
	return min(d+extra, core.MaxOpenDurationLimit)
}
