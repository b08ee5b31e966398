package core

import "time"

// coarse measures one configured duration d (the half-open max wait, the
// ramp-up) in units of max(1 ms, d/1024) rounded up to whole milliseconds,
// so that a deadline d ahead fits in the 19 or 15 bits the state word has
// for it with room to spare: d is at most 1024 units, and a signed
// difference of 15 bits stays exact for 2^14 units, 16 times d.
type coarse struct {
	d    time.Duration
	unit time.Duration // 0: the feature is off
	span uint64        // d in whole units, rounded up: 1..1024
}

func newCoarse(d time.Duration) coarse {
	if d <= 0 || d > MaxOpenDurationLimit {
		return coarse{}
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	unit := max(1, (ms+1023)/1024) * time.Millisecond
	return coarse{d: d, unit: unit, span: uint64((d + unit - 1) / unit)}
}

// at is the number of whole units of the clock up to now; a negative
// reading counts as zero, as everywhere else in the breaker.
func (c coarse) at(now time.Duration) uint64 { return uint64(max(now, 0) / c.unit) }

// deadline is the first unit boundary at or after now+d: a call at a clock
// reading r has reached it exactly when at(r) >= deadline(now).
func (c coarse) deadline(now time.Duration) uint64 { return ceilUnits(now, c.d, c.unit) }

// ceilUnits is ceil((now + d) / unit) with a negative reading counted as
// zero, computed in quotient and remainder so that no reading up to
// 2^63-1 ns and no duration up to a year overflows. The open deadline
// (deadlineMillis) and the coarse deadlines are all this rule.
func ceilUnits(now, d, unit time.Duration) uint64 {
	now = max(now, 0)
	return uint64(now/unit) + uint64(d/unit) + uint64((now%unit+d%unit+unit-1)/unit)
}

// halfOpenDeadline is the half-open max-wait deadline of a generation that
// starts at now, in the coarse units of Config.MaxWaitInHalfOpen; it has
// passed at a reading r when halfOpenUnits(r) >= halfOpenDeadline(now).
// Zero when the max wait is off (WaitForever).
func (s *Settings) halfOpenDeadline(now time.Duration) uint64 {
	if s.halfOpenWait.unit == 0 {
		return 0
	}
	return s.halfOpenWait.deadline(now)
}

// halfOpenUnits is the clock reading now in the units of halfOpenDeadline.
func (s *Settings) halfOpenUnits(now time.Duration) uint64 {
	if s.halfOpenWait.unit == 0 {
		return 0
	}
	return s.halfOpenWait.at(now)
}

// rampDeadline is the end of a ramp-up that starts when the breaker closes
// at now, in the coarse units of Config.RampUpDuration; zero when ramp-up is
// off. The ramp is over at a reading r when rampUnits(r) >= the deadline.
func (s *Settings) rampDeadline(now time.Duration) uint64 {
	if s.rampUp.unit == 0 {
		return 0
	}
	return s.rampUp.deadline(now)
}

// halfOpenExpired reports whether the max wait has passed when its deadline
// is remaining units ahead of the clock (deadline minus halfOpenUnits, as a
// signed difference). A deadline is never set more than span+1 units ahead
// (span: the max wait in whole units), so a larger remainder can only be a
// deadline that passed so long ago that the lock-free word's 15-bit
// difference wrapped, or a clock that went backwards by more than the max
// wait: both count as passed.
func (s *Settings) halfOpenExpired(remaining int64) bool {
	return remaining <= 0 || uint64(remaining) > s.halfOpenWait.span+1
}

// rampOver is halfOpenExpired for the ramp-up deadline (19 bits in the
// lock-free word): the ramp is over when its deadline is not ahead, or
// impossibly far ahead.
func (s *Settings) rampOver(remaining int64) bool {
	return remaining <= 0 || uint64(remaining) > s.rampUp.span+1
}

// rampUnits is the clock reading now in the units of rampDeadline.
func (s *Settings) rampUnits(now time.Duration) uint64 {
	if s.rampUp.unit == 0 {
		return 0
	}
	return s.rampUp.at(now)
}

// rampAdmits decides whether a call at clock reading now, remaining units
// before the ramp-up deadline (a ramp that is not rampOver), is admitted.
// The admitted share grows linearly from RampUpStartPercent at the start of
// the ramp to 100 % at its end. The decision is a hash of the reading
// compared with the share, rounded down to a 32-bit fraction, so it needs
// no shared counter and is a function of the reading alone (the baseline
// computes the same function with its own code); calls whose readings
// differ are decided independently, which makes the admitted fraction of
// many calls the share.
func (s *Settings) rampAdmits(remaining uint64, now time.Duration) bool {
	span := s.rampUp.span
	elapsed := span - min(remaining, span)
	start := uint64(s.RampUpStartPercent)
	// share of 2^32: (start% of the span + the rest of 100% grown linearly)
	// over 100% of the span. At most 100*1024*2^32 < 2^47: no overflow.
	threshold := (start*span + (100-start)*elapsed) << 32 / (100 * span)
	return uint64(rampHash(now)) < threshold
}

// rampHash spreads clock readings over 32 bits with the 64-bit finalizer
// of MurmurHash3 (two multiplies, three shifts): every input bit moves
// every output bit, so readings a fixed step apart (a caller every 1 ms, a
// coarse clock) land independently, where a single multiply would turn a
// fixed step into a fixed increment and admit or shed them in runs.
func rampHash(now time.Duration) uint32 {
	x := uint64(now)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return uint32(x >> 32)
}
