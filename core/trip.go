package core

import "time"

// tripPending commits the trip of the counting generation gen (the word
// unpacked in u) if an outcome has closed its count window but the trip is
// not committed yet, and reports whether it did (the caller reloads). Every
// transition out of a counting generation other than that trip calls it
// first, so an outcome that closed the window always ends in its own trip,
// never superseded: the outcome, counted where it entered the window, is
// never stale.
func (b *Breaker) tripPending(u word, gen uint64) bool {
	if b.ring == nil || !counting(u.state) {
		return false
	}
	if _, closed := b.ring.SnapshotClosed(uint32(gen)); !closed {
		return false
	}
	b.finishTrip(gen, false)
	return true
}

// finishTrip commits the trip of counting generation gen whose window has
// decided it (a count window a RecordTrip has closed, or a time window whose
// Snapshot trips the rule), unless the state word has moved on already.
// own says whether the caller is the call whose outcome (recorded with no
// error) decided the trip, rather than one committing it on its behalf.
func (b *Breaker) finishTrip(gen uint64, own bool) {
	for {
		w := b.load()
		if w == moving {
			// The trip was decided under rules a Reconfigure has replaced:
			// it stands if the new rules trip on the window it carried.
			var stands bool
			if b, w, stands = b.carriedTrip(gen); !stands {
				return
			}
		}
		if !w.counting() || !b.ofWord(w, gen) || b.trip(w, gen, 0, deferredCount{}, cause{decided: own}) {
			return
		}
	}
}

// trip commits the trip of the counting generation gen whose word was w
// (the caller checked it with ofWord):
// closed -> open for an open duration of at least hint, or, in
// MetricsOnly, MetricsOnly -> MetricsOnly ("would have opened": a fresh
// generation and window, and nothing rejected), or, when the OpenGate
// refuses a slot, closed -> closed (capped). It reports whether the swap
// won; a lost swap means the caller reloads.
//
// c is the outcome to count once the swap wins, before the notification
// goes out, so a listener never sees a transition without the outcome that
// caused it; why is what decided the trip, for Config.OpenDurationFunc,
// whose panic goes on once the trip is committed and notified.
func (b *Breaker) trip(w stateWord, gen uint64, hint time.Duration, c deferredCount, why cause) bool {
	g := gen + 1
	if w.state() == MetricsOnly {
		if !b.cas(w, word{state: MetricsOnly, gen: lowGen(g)}.packed()) {
			return false
		}
		b.countDeferred(c)
		b.notify(MetricsOnly, MetricsOnly, g, b.clockIfListening(), b.tripReasonIfListening(gen, hint))
		return true
	}
	// The open slot is reserved before the claim, so the gate never
	// counts fewer open breakers than there are, and given back if the
	// claim loses.
	gate := b.cfg.OpenGate
	if gate != nil && !gate.TryAcquire() {
		return b.capped(w, gen, c)
	}
	// closed -> open: a successful claim is the one trip of this
	// generation; every other recorder of the old generation becomes
	// stale and the window is abandoned with it (R8, R11).
	claim, d, pv := b.claimOpenBy(0, lowGen(g), hint, why)
	now, ok := b.commit(w, claim)
	if !ok {
		if gate != nil {
			gate.Release()
		}
		return false
	}
	b.countDeferred(c)
	b.notifyOpen(Closed, g, now, b.tripReasonIfListening(gen, hint), b.cfg.jittered(d, now, lowGen(g)))
	if pv != nil {
		panic(pv)
	}
	return true
}

// capped commits the trip of the closed word w of generation gen that the
// OpenGate refused: closed -> closed, a new generation with a fresh window
// (the old one is abandoned, as by a trip) and no ramp-up (the trip would
// have ended it), counting c once the swap wins. It reports whether the
// swap won.
func (b *Breaker) capped(w stateWord, gen uint64, c deferredCount) bool {
	g := gen + 1
	if !b.cas(w, word{state: Closed, gen: lowGen(g)}.packed()) {
		return false
	}
	b.countDeferred(c)
	if b.metrics != nil {
		b.metrics.capped.Inc()
	}
	b.notify(Closed, Closed, g, b.clockIfListening(), ReasonCapped)
	return true
}

// RecordHint records a failure for p that carries the dependency's
// retry-after hint: bounded by Config.MaxRetryAfter, it trips a closed
// breaker at once (MetricsOnly: "would have opened") or re-opens a
// half-open one, for the longer of the configured open duration and the
// hint, which is kept in whole milliseconds, rounded up (as ForceOpen's
// duration). With hints off or a hint of zero or less it is
// Record(p, Failure). A stale permit changes nothing.
func (b *Breaker) RecordHint(p Permit, retryAfter time.Duration) {
	b.recordHint(p, retryAfter, nil)
}

// recordHint is RecordHint of a failure whose error, err, was classified
// by Done (nil from RecordHint), for Config.OpenDurationFunc.
func (b *Breaker) recordHint(p Permit, retryAfter time.Duration, err error) {
	// The hint is bounded by the rules in force: a reconfigured breaker's
	// successor's, not the first Config's.
	b = b.inForce()
	h := b.cfg.hint(retryAfter)
	if h == 0 {
		b.recordOf(p, Failure, err)
		return
	}
	defer b.tellProbeGate(p, Failure)
	for {
		w := b.load()
		if w == moving {
			// Reconfigured since: bounded again by the new rules.
			if b, h = b.rehint(p, retryAfter, err); h == 0 {
				return
			}
			continue
		}
		u := w.fields()
		switch {
		case !b.ofWord(w, p.Generation):
		case !p.Probe && counting(u.state):
			if b.tripPending(u, p.Generation) {
				continue // this hint comes after that trip: stale
			}
			if b.trip(w, p.Generation, h, deferredCount{o: Failure, due: true}, cause{err: err, decided: true}) {
				return
			}
			continue
		case p.Probe && u.state == HalfOpen && u.inFlight > 0:
			if b.reopen(w, u, p.Generation, h, cause{err: err, decided: true}) {
				return
			}
			continue
		}
		b.countDropped()
		return
	}
}

// rehint is recordHint's step onto the successor of b, whose word it found
// moving: the successor and the hint bounded by its rules; with hints off
// there (zero), the failure is recorded as a plain one, recordHint having
// told the probe gate already.
func (b *Breaker) rehint(p Permit, retryAfter time.Duration, err error) (*Breaker, time.Duration) {
	n := b.successor()
	h := n.cfg.hint(retryAfter)
	switch {
	case h > 0:
	case p.Probe:
		n.settleProbe(p, Failure, err, true)
	default:
		n.recordOf(p, Failure, err)
	}
	return n, h
}

// tellProbeGate tells Config.ProbeGate, if there is one, the outcome o of
// probe p, and nothing of a permit that is no probe.
func (b *Breaker) tellProbeGate(p Permit, o Outcome) {
	if g := b.cfg.ProbeGate; g != nil && p.Probe {
		g.ProbeDone(p, o)
	}
}

// reopen commits half-open -> open for the half-open word w (unpacked u,
// of generation gen, checked by the caller with ofWord):
// the first failure of the generation re-opens with the next backoff step,
// for at least hint; later failures of the same generation are stale (R7,
// B12, B29). It reports whether the swap won, and counts the failure before
// notifying; a panic of Config.OpenDurationFunc goes on after that.
func (b *Breaker) reopen(w stateWord, u word, gen uint64, hint time.Duration, by cause) bool {
	g := gen + 1
	step := b.cfg.nextStep(u.step)
	claim, d, pv := b.claimOpenBy(step, lowGen(g), hint, by)
	t, ok := b.commit(w, claim)
	if !ok {
		return false
	}
	b.countOutcome(Failure, false)
	why := ReasonProbeFailed
	if hint > 0 {
		why = ReasonRetryAfter // the dependency's own word is the more telling reason
	}
	b.notifyOpen(HalfOpen, g, t, why, b.cfg.jittered(d, t, lowGen(g)))
	if pv != nil {
		panic(pv)
	}
	return true
}
