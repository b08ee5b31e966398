package core

import (
	"math/bits"
	"time"
)

// cause is what a trip or a re-open knows of the outcome that decided it,
// for Config.OpenDurationFunc. decided is false where a call commits a
// trip on behalf of the call whose outcome decided it (it found the count
// window closed, or a time window owing its trip, with the state word still
// closed): such a call knows no failure, runs no user code, and opens for
// the function's fallback.
type cause struct {
	err     error
	decided bool
}

// claimOpenBy is the claim of a trip or re-open to generation gen at
// backoff step with the bounded hint h, decided as why says, and the open
// duration it commits before jitter. With Config.OpenDurationFunc and a
// deciding outcome, the function runs here, before the claim, so that no
// call that finds the claim waits on user code; a panic in it comes back
// in pv, to go on once the transition has committed.
func (b *Breaker) claimOpenBy(step uint8, gen uint32, h time.Duration, why cause) (c stateWord, d time.Duration, pv any) {
	if b.cfg.OpenDurationFunc == nil || !why.decided {
		return b.claimOpen(step, gen, h), b.cfg.openDurationHinted(step, h), nil
	}
	d, pv = b.cfg.openDurationOf(step, h, why.err)
	return b.claimOpenFor(step, gen, d), d, pv
}

// openDurationOf is Config.OpenDurationFunc's open duration after reopens
// re-opens, for the failure err, with the bounded hint h: the function's
// result bounded by the rule (zero or less, or a panic: OpenDuration; above
// MaxOpenDuration: MaxOpenDuration), then lengthened to the hint, in whole
// milliseconds rounded up. A panic is recovered into pv.
func (s *Settings) openDurationOf(reopens uint8, h time.Duration, err error) (d time.Duration, pv any) {
	d, pv = callOpenDurationFunc(s.OpenDurationFunc, int(reopens), err)
	switch {
	case pv != nil || d <= 0:
		d = s.OpenDuration
	case d > s.MaxOpenDuration:
		d = s.MaxOpenDuration
	}
	return max(wholeMillis(d), wholeMillis(h)), pv
}

// callOpenDurationFunc calls f, returning what it returns or, if it
// panics, the panic's value (never nil: since Go 1.21 panic(nil) panics
// with a *runtime.PanicNilError).
func callOpenDurationFunc(f func(int, error) time.Duration, reopens int, err error) (d time.Duration, pv any) {
	defer func() {
		if r := recover(); r != nil {
			d, pv = 0, r
		}
	}()
	return f(reopens, err), nil
}

// jittered is the open duration d of a transition to Open committed at
// clock reading now into generation gen (its low 20 bits, as the state word
// holds them) lengthened by Config.OpenDurationJitter: by
// floor(ceil(d in ms) * share) whole milliseconds, where share is the
// jitter fraction times a hash of the reading and the generation, in
// units of 2^-32, at most MaxOpenDurationLimit in all. The hash is the
// ramp-up's (rampHash) of the reading, negative counted as zero, plus the
// generation times 2^64 over the golden ratio; the baseline computes the
// same rule with its own code.
func (s *Settings) jittered(d, now time.Duration, gen uint32) time.Duration {
	if s.jitterScale == 0 {
		return d
	}
	key := uint64(max(now, 0)) + uint64(gen&genMask)*0x9e3779b97f4a7c15
	share := uint64(rampHash(time.Duration(key))) * s.jitterScale >> 32
	hi, lo := bits.Mul64(uint64(wholeMillis(d)/time.Millisecond), share)
	return min(d+time.Duration(hi<<32|lo>>32)*time.Millisecond, MaxOpenDurationLimit)
}
