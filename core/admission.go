package core

import "time"

// Allow asks to make one call. It returns a Permit, or a rejection that
// matches ErrRejected and one reason with errors.Is: ErrOpen,
// ErrHalfOpenFull, ErrForcedOpen or ErrRampingUp; the rejection's
// Permit.RetryAfter and the rejection's RetryAfter (RetryAfterOf) say when to try again. In
// open state, the first call at or after
// the deadline moves the breaker to half-open and is one of its probes.
// Disabled and MetricsOnly admit every call.
func (b *Breaker) Allow() (Permit, error) {
	// Closed, not ramping up, nothing to time or count: the hot path, kept
	// apart from the rest of Allow's frame: base and the word (one cache
	// line), the plainAllow flag, no write. base is loaded first: a permit
	// granted on a word is then named by a base no newer than the word
	// (docs/design.md). Naming it costs the load of base and three ALU
	// operations (fullGen): 4 of about 24 instructions.
	base := b.base.Load()
	if w := b.peek(); w.plainClosed() && b.plainAllow {
		return Permit{Generation: fullGen(base, w)}, nil
	}
	return b.allow()
}

// allow is Allow past its fast path. A closed admission and an open
// rejection stay inline here, a call cheaper than in functions of their
// own; half-open, and
// metrics-only and disabled admissions, have their own. Why it is long:
// those two inline paths, and one case per state of the word (a
// reconfigured breaker's moving word among them).
func (b *Breaker) allow() (Permit, error) {
	for {
		// base before the word, as in Allow: the paths that admit without
		// a swap name the permit from them.
		base := b.base.Load()
		w := b.peek()
		gen := fullGen(base, w)
		switch w.state() {
		case Closed:
			if w.ramping() {
				return b.allowRamping(w, gen)
			}
			// A zero Breaker, never built by New, fails the fast path's
			// plainAllow test and always arrives here.
			b.mustBeNew()
			// The hot path: no write, no clock unless slow calls are measured.
			p := Permit{Generation: gen}
			if b.slow {
				if p.Start = b.now(); !b.unmoved(w) {
					continue
				}
			}
			b.countAdmitted()
			return p, nil
		case Open:
			now := max(b.now(), 0)
			if wait := untilDeadline(w.deadline(), now); wait > 0 {
				if b.peek() != w {
					// A transition (a manual control) came between the
					// load and the reading: the rejection and its wait
					// must come from one word at one reading.
					continue
				}
				return b.reject(Permit{RetryAfter: wait}, rejectOpen)
			}
			// open -> half-open: a successful swap hands this caller the
			// first probe slot of the new generation; losers reload and
			// compete for the remaining slots.
			if p, ok := b.startProbing(w, w.fields(), gen, now); ok {
				return b.gateProbe(p)
			}
		case HalfOpen:
			if p, decided, err := b.allowHalfOpen(w, gen); decided {
				return p, err
			}
		case ForcedOpen:
			return b.reject(Permit{}, rejectForcedOpen)
		case claimOpen, claimOther:
			if w == moving {
				return b.successor().Allow()
			}
			b.help(w)
		default: // Disabled, MetricsOnly
			if p, ok := b.admitUnchanged(w, gen); ok {
				return p, nil
			}
		}
	}
}

// admitUnchanged admits a call on the metrics-only or disabled word w of
// generation gen, with no write to the word. Where slow calls are measured
// (metrics-only, with a slow-call threshold) it reads the clock for
// Permit.Start and reports false, admitting nothing, if the word moved
// before the reading.
func (b *Breaker) admitUnchanged(w stateWord, gen uint64) (Permit, bool) {
	p := Permit{Generation: gen}
	if b.slow && w.state() == MetricsOnly {
		if p.Start = b.now(); !b.unmoved(w) {
			return Permit{}, false
		}
	}
	b.countAdmitted()
	return p, true
}

// allowHalfOpen is Allow on the half-open word w of generation gen: a
// probe slot while one is free, else a rejection until the max wait has
// passed, then the first probe of a new half-open generation; a probe goes
// out if Config.ProbeGate lets it. decided is false when the word moved
// and the caller reloads.
func (b *Breaker) allowHalfOpen(w stateWord, gen uint64) (p Permit, decided bool, err error) {
	u := w.fields()
	if b.cfg.admitsProbe(u.inFlight, u.success, u.failure) {
		u.inFlight++
		// half-open -> half-open with one more probe in flight: a
		// successful swap is the caller's probe slot (R6). A probe carries
		// no Start: nothing measures its duration.
		if !b.cas(w, u.packed()) {
			return Permit{}, false, nil
		}
		b.countProbe()
		p, err = b.gateProbe(Permit{Generation: gen, Probe: true})
		return p, true, err
	}
	if b.cfg.MaxWaitInHalfOpen == WaitForever {
		p, err = b.reject(Permit{RetryAfter: b.cfg.HalfOpenFullWait}, rejectHalfOpenFull)
		return p, true, err
	}
	now := max(b.now(), 0)
	if wait, expired := b.halfOpenFullWait(u, now); !expired {
		if b.peek() != w {
			// A probe's outcome (or any transition) came between the load
			// and the clock reading: the rejection and its wait must come
			// from one word at one reading, so decide again.
			return Permit{}, false, nil
		}
		p, err = b.reject(Permit{RetryAfter: wait}, rejectHalfOpenFull)
		return p, true, err
	}
	// half-open -> half-open: the max wait passed without a verdict. A
	// successful swap starts a new generation, whose first probe this
	// caller holds; the lost probes' permits are stale from here on (R8).
	if p, decided = b.startProbing(w, u, gen, now); decided {
		p, err = b.gateProbe(p)
	}
	return p, decided, err
}

// startProbing commits the word w (unpacked u, open or half-open, of
// generation gen), which the caller found ready to probe at reading now, to
// a new half-open generation whose first probe the caller holds, and admits
// that probe. It reports false when the swap lost, and the caller reloads.
// With a max wait the new word's deadline comes from the clock, so the
// transition is claimed first and the deadline read after the claim
// (commit); without one nothing in the new word depends on the reading and
// one swap does.
func (b *Breaker) startProbing(w stateWord, u word, gen uint64, now time.Duration) (Permit, bool) {
	g := gen + 1
	if b.cfg.halfOpenWait.unit == 0 {
		if !b.cas(w, word{state: HalfOpen, step: u.step, gen: lowGen(g), inFlight: 1}.packed()) {
			return Permit{}, false
		}
	} else {
		var ok bool
		if now, ok = b.commit(w, claimHalfOpen(u.step, lowGen(g))); !ok {
			return Permit{}, false
		}
		now = max(now, 0) // as the caller's reading: a negative one counts as zero
	}
	return b.admitProbe(u.state, Permit{Generation: g, Probe: true}, now), true
}

// unmoved reports whether the state word still has the state, generation
// and ramp-up flag of w: a closed or metrics-only Allow that read the clock
// after loading w then decided on w at that reading.
func (b *Breaker) unmoved(w stateWord) bool {
	return b.peek().sameIn(w, stateRampAndGen)
}

// allowRamping is Allow in closed state during the ramp-up after closing,
// on word w of generation gen.
func (b *Breaker) allowRamping(w stateWord, gen uint64) (Permit, error) {
	now := b.now()
	u := w.fields()
	if left := signedDiff(uint64(u.rampEnd), b.cfg.rampUnits(now), rampBits); !b.cfg.rampOver(left) {
		if !b.unmoved(w) {
			// A transition came between the load and the reading: decide
			// again, so the decision is one word's at one reading.
			return b.Allow()
		}
		if !b.cfg.rampAdmits(uint64(left), now) {
			return b.reject(Permit{}, rejectRampingUp)
		}
	} else {
		// The ramp is over. Clearing its flag (closed -> closed, same
		// generation) lets later calls skip the clock; a lost swap means the
		// word moved, and the call decides again from the new one.
		u.ramping, u.rampEnd = false, 0
		if !b.cas(w, u.packed()) {
			return b.Allow()
		}
	}
	b.countAdmitted()
	return Permit{Generation: gen, Start: b.startIf(now)}, nil
}

// countAdmitted counts an admitted call in Metrics.
func (b *Breaker) countAdmitted() {
	if b.metrics != nil {
		b.metrics.admitted.Inc()
	}
}

// countProbe counts an admitted probe in Metrics, unless Config.ProbeGate
// is yet to decide whether it goes out (gateProbe counts it then).
func (b *Breaker) countProbe() {
	if b.cfg.ProbeGate == nil {
		b.countAdmitted()
	}
}

// admitProbe counts and announces from -> half-open, whose caller holds
// probe p, and returns p. The listener runs before Allow can return p: if it
// panics, p is released as Ignored so the slot does not leak (R10), and the
// panic goes on; the probe gate, not asked yet, hears nothing of it.
func (b *Breaker) admitProbe(from State, p Permit, at time.Duration) Permit {
	b.committed(from, HalfOpen, p.Generation)
	b.countProbe()
	if b.dispatch == nil {
		return p
	}
	delivered := false
	defer func() {
		if !delivered {
			if b.cfg.ProbeGate != nil {
				b.countAdmitted() // counted as without a gate: admitted, then ignored
			}
			b.settleProbe(p, Ignored, nil, true)
		}
	}()
	why := ReasonOpenDurationElapsed
	if from == HalfOpen {
		why = ReasonMaxWaitInHalfOpen
	}
	b.dispatch.publish(b.reconfigs, from, HalfOpen, p.Generation, at, why, 0)
	delivered = true
	return p
}

// reject counts a rejection for reason (rejectOpen and the rest) and
// returns it.
func (b *Breaker) reject(p Permit, reason int) (Permit, error) {
	if b.metrics != nil {
		b.metrics.rejected(reason)
	}
	var err error
	switch reason {
	case rejectOpen:
		err = boundRejection[openReason]{b}
	case rejectHalfOpenFull:
		err = boundRejection[halfOpenFullReason]{b}
	case rejectForcedOpen:
		err = boundRejection[forcedOpenReason]{b}
	default:
		err = boundRejection[rampingUpReason]{b}
	}
	return p, err
}

// halfOpenFullWait is the wait of an ErrHalfOpenFull rejection on the full
// half-open word u at reading now (not negative), with a max wait on:
// HalfOpenFullWait, or the time left of the max wait if that is shorter;
// expired reports that the max wait has passed instead (the caller may
// start a new probe generation).
func (b *Breaker) halfOpenFullWait(u word, now time.Duration) (wait time.Duration, expired bool) {
	left := signedDiff(uint64(u.expiry), b.cfg.halfOpenUnits(now), expiryBits)
	if b.cfg.halfOpenExpired(left) {
		return 0, true
	}
	// left is 1 .. span+1 units: the wait is positive.
	unit := b.cfg.halfOpenWait.unit
	return min(time.Duration(left)*unit-now%unit, b.cfg.HalfOpenFullWait), false
}

// retryAfter is what a rejection's RetryAfter reports: how long from now
// until the breaker may admit a call, from one word at one reading, with
// forced for ForcedOpen, which no wait ends.
func (b *Breaker) retryAfter(forced time.Duration) time.Duration {
	for {
		w := b.load()
		if w == moving {
			return b.successor().retryAfter(forced)
		}
		var wait time.Duration
		switch w.state() {
		case ForcedOpen:
			return forced
		case Open:
			wait = untilDeadline(w.deadline(), b.now())
		case HalfOpen:
			u := w.fields()
			if b.cfg.admitsProbe(u.inFlight, u.success, u.failure) {
				return 0 // a probe slot is free
			}
			if b.cfg.MaxWaitInHalfOpen == WaitForever {
				return b.cfg.HalfOpenFullWait
			}
			wait, _ = b.halfOpenFullWait(u, max(b.now(), 0))
		default:
			return 0
		}
		if b.peek() == w {
			return wait
		}
	}
}

// expiry is the half-open max-wait deadline of a generation starting at now
// (zero when the max wait is off: WaitForever).
func (b *Breaker) expiry(now time.Duration) uint32 {
	return uint32(b.cfg.halfOpenDeadline(now) & expiryMask)
}

func (b *Breaker) startIf(now time.Duration) time.Duration {
	if b.slow {
		return now
	}
	return 0
}
