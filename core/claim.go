package core

import "time"

// peek returns the state word as it is, claimed or not; load is for a
// caller that decides on it.
func (b *Breaker) peek() stateWord { return stateWord(b.state.Load()) }

// cas swaps the state word from old to n, and reports whether it did.
func (b *Breaker) cas(old, n stateWord) bool {
	return b.state.CompareAndSwap(uint64(old), uint64(n))
}

// load returns the state word, first completing any transition that
// another call has claimed (help): no decision is made on a claimed word.
// The one claim it returns as it is, moving, is final: the caller goes on
// with the breaker's successor (reconfigure.go).
func (b *Breaker) load() stateWord {
	for {
		w := b.peek()
		if !w.claimed() || w == moving {
			return w
		}
		b.help(w)
	}
}

// commit makes the transition from w whose claim is c: it swaps w for c,
// reads the clock, and swaps c for the word c settles to at that reading. It
// reports the reading and true once the claim won, whether its own commit
// or another call's help completed it; false when the claim lost (the word
// moved), and the caller reloads.
func (b *Breaker) commit(w, c stateWord) (time.Duration, bool) {
	if !b.cas(w, c) {
		return 0, false
	}
	now := b.now()
	b.cas(c, b.settle(c, now))
	return now, true
}

// help completes the transition claimed in c with a reading of the clock
// taken now, after the claim, unless another call completed it first.
func (b *Breaker) help(c stateWord) {
	b.cas(c, b.settle(c, b.now()))
}

// settle is the word that the claim c commits at clock reading now.
func (b *Breaker) settle(c stateWord, now time.Duration) stateWord {
	step, gen := c.step(), uint32(c.genField())
	ms, explicit := c.explicitMillis()
	if c.state() == claimOpen {
		d := b.cfg.openDuration(step)
		if explicit {
			d = time.Duration(ms) * time.Millisecond
		}
		return word{state: Open, step: step, gen: gen, deadline: deadline(now, b.cfg.jittered(d, now, gen))}.packed()
	}
	if explicit {
		return word{state: Closed, gen: gen, ramping: true, rampEnd: uint32(b.cfg.rampDeadline(now) & rampMask)}.packed()
	}
	inFlight := uint8(1)
	if c&noProbe != 0 {
		inFlight = 0
	}
	return word{state: HalfOpen, step: step, gen: gen, inFlight: inFlight, expiry: b.expiry(now)}.packed()
}

// claimOpen is the claim of a trip or re-open to generation gen at backoff
// step with the bounded hint h: for the step's open duration, or for the
// hint, rounded up to whole milliseconds, if that is longer
// (openDurationHinted).
func (b *Breaker) claimOpen(step uint8, gen uint32, h time.Duration) stateWord {
	if h = wholeMillis(h); h > b.cfg.openDuration(step) {
		return b.claimOpenFor(step, gen, h)
	}
	return claimOpenStep(step, gen)
}

// claimOpenFor is the claim of a transition to Open at step and generation
// gen for d (at most MaxOpenDurationLimit), rounded up to whole
// milliseconds.
func (b *Breaker) claimOpenFor(step uint8, gen uint32, d time.Duration) stateWord {
	ms := uint64(wholeMillis(d) / time.Millisecond)
	return claimOpenMillis(step, gen, ms)
}
