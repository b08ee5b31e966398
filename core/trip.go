package core

import (
	"runtime"
	"time"
)

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
	var wait int64 // reserveSlot's deadline, over every attempt
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
		if !w.counting() || !b.ofWord(w, gen) || b.trip(w, gen, 0, deferredCount{}, cause{decided: own}, &wait) {
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
// whose panic goes on once the trip (or its cap) is committed and
// notified. wait is the caller's deadline for reserveSlot's wait, zero
// until its first wait, kept over the caller's attempts at this trip.
func (b *Breaker) trip(w stateWord, gen uint64, hint time.Duration, c deferredCount, why cause, wait *int64) bool {
	g := gen + 1
	if w.state() == MetricsOnly {
		if !b.cas(w, word{state: MetricsOnly, gen: lowGen(g)}.packed()) {
			return false
		}
		b.countDeferred(c)
		b.notify(MetricsOnly, MetricsOnly, g, b.clockIfListening(), b.tripReasonIfListening(gen, hint))
		return true
	}
	// Config.OpenDurationFunc runs here, before a slot is reserved: a
	// call the gate refuses waits, briefly, for a slot this breaker's
	// other calls hold (reserveSlot), and must not wait on user code.
	claim, d, pv := b.claimOpenBy(0, lowGen(g), hint, why)
	// closed -> open: a successful claim is the one trip of this
	// generation; every other recorder of the old generation becomes
	// stale and the window is abandoned with it (R8, R11). The open slot
	// is reserved before the claim, so the gate never counts fewer open
	// breakers than there are, and given back if the claim loses.
	var now time.Duration
	var ok bool
	if gate := b.cfg.OpenGate; gate == nil {
		now, ok = b.commit(w, claim)
	} else {
		switch b.reserveSlot(gate, w, wait) {
		case slotMoved:
			return false
		case slotRefused:
			if !b.capped(w, gen, c) {
				return false
			}
			if pv != nil {
				panic(pv)
			}
			return true
		}
		now, ok = b.commitHolding(gate, w, claim)
	}
	if !ok {
		return false
	}
	b.countDeferred(c)
	b.notifyOpen(Closed, g, now, b.tripReasonIfListening(gen, hint), b.cfg.jittered(d, now, lowGen(g)))
	if pv != nil {
		panic(pv)
	}
	return true
}

// slotAnswer is what reserveSlot got for a trip.
type slotAnswer uint8

const (
	// slotHeld: the gate reserved the trip's slot; the caller's ask stays
	// counted until its claim has committed or it has given the slot back.
	slotHeld slotAnswer = iota
	// slotRefused: no slot is free, and no other call of the breaker was
	// asking for one or holding one, or the wait for them ran out.
	slotRefused
	// slotMoved: the state word moved while the refused call waited: the
	// caller reloads.
	slotMoved
)

// slotWait bounds how long, by the system's monotonic clock, a refused
// call waits for the breaker's other asks (reserveSlot) before it takes
// the refusal as the answer: the scheduler's time slice, past which the
// call it waits for has been descheduled rather than merely running.
const slotWait = 10 * time.Millisecond

// reserveSlot asks gate for the slot of a trip from the closed word w.
//
// Several calls may commit one trip: the one whose outcome decided it and
// any that find it decided but not committed (Counts, a later outcome).
// Each asks the gate, and only one claim wins. A refusal is the answer
// only if no slot is free for the breaker: with one slot left, the first
// asker takes it, and a second is refused the very slot the trip will
// hold. So a refused call that finds another ask counted (slotAsks)
// yields until none is: by then that ask has committed the trip (the word
// has moved: the caller reloads), or was refused too, or gave its slot
// back, and the call asks again. The gate is opaque, so nothing else tells
// a slot held for this trip from one another breaker took, and a call
// paused between its reservation and its claim cannot be helped; so the
// wait is bounded, by slotWait, after which the refusal stands
// (docs/design.md, Known limits). The bound is the calling call's, over
// all its attempts at the trip (deadline, zero until its first wait): a
// call the word's moving sends back to try again (another outcome of the
// generation changed its run of failures) would otherwise start a fresh
// wait each time, and wait as long as the paused call it waits for. The
// wait reads the system clock, not Config.Clock: it bounds a wait on the
// scheduler, not a rule's time.
func (b *Breaker) reserveSlot(gate OpenGate, w stateWord, deadline *int64) slotAnswer {
	for {
		if b.ask(gate) {
			return slotHeld
		}
		if b.asks.Load() == 0 {
			return slotRefused
		}
		for b.asks.Load() != 0 {
			switch now := nanotime(); {
			case *deadline == 0:
				*deadline = now + int64(slotWait)
			case now > *deadline:
				return slotRefused
			}
			runtime.Gosched()
			if b.peek() != w {
				return slotMoved
			}
		}
		// The count fell to zero: the call waited for may have committed
		// the trip just before; ask again only if it did not.
		if b.peek() != w {
			return slotMoved
		}
	}
}

// ask is one TryAcquire of gate, counted in slotAsks while it runs and,
// when it reserves a slot, until the caller is done with it. A refusal or
// a panic of the gate takes the count back at once.
func (b *Breaker) ask(gate OpenGate) (granted bool) {
	b.asks.Inc()
	defer func() {
		if !granted {
			b.asks.Dec()
		}
	}()
	return gate.TryAcquire()
}

// commitHolding is commit for a trip whose slot of gate reserveSlot has
// reserved: the slot is given back if the claim loses, and the ask is
// taken back once the slot is the open breaker's or the gate's again,
// even if the clock or the gate panics.
func (b *Breaker) commitHolding(gate OpenGate, w, c stateWord) (now time.Duration, ok bool) {
	defer b.asks.Dec()
	if now, ok = b.commit(w, c); !ok {
		gate.Release()
	}
	return now, ok
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
	var wait int64 // reserveSlot's deadline, over every attempt
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
			if b.trip(w, p.Generation, h, deferredCount{o: Failure, due: true}, cause{err: err, decided: true}, &wait) {
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
