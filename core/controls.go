package core

import "time"

// ForceOpen moves the breaker, from any state, to ForcedOpen when d is 0
// (every call rejected with ErrForcedOpen until another manual control), or
// to Open for d when d > 0 (then half-open and probes as after a trip, with
// the backoff step reset; d is kept in whole milliseconds, rounded up, like
// every open duration, and lengthened by Config.OpenDurationJitter; it is
// not Config.OpenDurationFunc's to decide). It commits one transition and emits one
// notification, even when the breaker was already there. It returns an
// error matching ErrInvalidArgument, and changes nothing, when d is
// negative or above MaxOpenDurationLimit.
func (b *Breaker) ForceOpen(d time.Duration) error {
	b.mustBeNew()
	if err := checkForceOpen(d); err != nil {
		return err
	}
	if d == 0 {
		b.command(word{state: ForcedOpen}, b.clockIfListening())
		return nil
	}
	// Open for d from a reading taken after the claim (commit).
	b.control(Open, wholeMillis(d), func(c *Breaker, w stateWord, g uint32) (time.Duration, bool) {
		return c.commit(w, c.claimOpenFor(0, g, d))
	})
	return nil
}

// Disable moves the breaker, from any state, to Disabled: every call is
// admitted and no outcome recorded, until another manual control. One
// transition, one notification.
func (b *Breaker) Disable() { b.command(word{state: Disabled}, b.clockIfListening()) }

// MetricsOnly moves the breaker, from any state, to MetricsOnly with a fresh
// window: every call is admitted, outcomes are counted, and where the trip
// rule holds the breaker notifies MetricsOnly -> MetricsOnly instead of
// opening. One transition, one notification.
func (b *Breaker) MetricsOnly() { b.command(word{state: MetricsOnly}, b.clockIfListening()) }

// HalfOpen moves the breaker, from any state, to HalfOpen with no probe in
// flight and the backoff step reset, as if an open duration had just
// elapsed: the next calls are probes, up to Config.PermittedCallsInHalfOpen,
// and are judged as probes are (Config.SuccessesToClose successes close
// it, Config.FailuresToReopen failures re-open it for the open duration's
// next backoff step),
// and the half-open max wait starts now. One transition, one notification.
// It reads the clock when the max wait is on (after claiming the
// transition, as every transition whose word depends on the clock does).
func (b *Breaker) HalfOpen() {
	at := b.clockIfListening()
	b.control(HalfOpen, 0, func(c *Breaker, w stateWord, g uint32) (time.Duration, bool) {
		if c.cfg.MaxWaitInHalfOpen == WaitForever {
			return at, c.cas(w, word{state: HalfOpen, gen: g}.packed())
		}
		return c.commit(w, claimManualHalfOpen(g))
	})
}

// Reset moves the breaker, from any state, to Closed with a fresh window,
// no backoff and no ramp-up. One transition, one notification.
func (b *Breaker) Reset() { b.command(word{state: Closed}, b.clockIfListening()) }

// command commits a manual control: whatever the breaker was doing, the
// next generation is n, notified as at.
func (b *Breaker) command(n word, at time.Duration) {
	b.control(n.state, 0, func(c *Breaker, w stateWord, g uint32) (time.Duration, bool) {
		n.gen = g
		return at, c.cas(w, n.packed())
	})
}

// control commits a manual control to state to: move swaps the word w of
// breaker c (b, or the successor a Reconfigure gave it) for the next
// generation's (g, its low bits) and reports the transition's time
// and whether the swap won; a lost one is tried again from a new load. Every
// permit of the old generation becomes stale (R8). A control that ejects
// a breaker that was not takes an open slot of the OpenGate before its
// swap (and gives it back if the swap loses); one that ends an ejection
// gives the slot back after its swap.
func (b *Breaker) control(to State, openFor time.Duration, move func(c *Breaker, w stateWord, g uint32) (time.Duration, bool)) {
	b.mustBeNew()
	for {
		w := b.load()
		if w == moving {
			b = b.successor()
			continue
		}
		u := w.fields()
		gen := b.genOf(w)
		if b.tripPending(u, gen) {
			continue // the control comes after that trip
		}
		g := gen + 1
		took := b.acquireIf(u.state, to)
		if t, ok := move(b, w, lowGen(g)); ok {
			b.releaseIf(u.state, to)
			if to == Open {
				b.notifyOpen(u.state, g, t, ReasonManual, b.cfg.jittered(openFor, t, lowGen(g)))
			} else {
				b.notify(u.state, to, g, t, ReasonManual)
			}
			return
		}
		if took {
			b.cfg.OpenGate.Release()
		}
	}
}
