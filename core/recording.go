package core

import (
	"time"

	"github.com/casbreaker/casbreaker/internal/window/atomicring"
)

// Done records the outcome of the call made with p, classifying err with
// Config.Classifier (nil is always Success). A Failure whose error carries a
// retry-after hint is recorded with RecordHint when Config.MaxRetryAfter is
// set. A panicking classifier releases the permit as Ignored and the panic
// propagates. Call Done or Record exactly once per permit: a second
// call for the same half-open probe may release another probe's slot.
func (b *Breaker) Done(p Permit, err error) {
	if err != nil {
		b.doneError(p, err)
		return
	}
	// The fast paths for a success outside half-open, the outcome nearly
	// every call reports, taken here rather than in Record: a call level
	// less on the hottest path. Record(p, Success) comes here too.
	if !p.Probe {
		switch b.success {
		case successIgnored:
			// The word's low generation bits suffice: a stale success here
			// would change nothing either, so base is not loaded.
			if b.peek().closedNoRun(p.Generation) {
				return // no window, no slow calls, no metrics: nothing to do
			}
		case successInRing:
			// A count window full of fast successes stays as it is: two
			// loads, no write, no call (atomicring.Ring.RecordFastSuccess).
			// As above, a stale success would change nothing either.
			if !b.peek().closedNoRun(p.Generation) || !b.ring.RecordFastSuccess(uint32(p.Generation)) {
				// A tail call: with nothing to restore after it, p needs
				// no spill on the path above.
				b.recordRingOutcome(p, Success)
			}
			return
		case successInBuckets:
			// recordInBuckets for a success, spelled out here: a call
			// level less, the clock read inline (b.now is too big to
			// inline) and the window's steady-state path, RecordSuccess.
			// What it cannot take it leaves to record, with no clock read
			// yet.
			if !b.closedOf(b.peek(), p.Generation) {
				break
			}
			var now time.Duration
			if b.sysClock {
				now = readSystem(b.sysOrigin)
			} else {
				now = b.cfg.Clock.Now()
			}
			switch ok, trips := b.buckets.RecordSuccess(uint32(p.Generation), now, &b.cfg.rule); {
			case !ok:
				// As in recordInBuckets, and with the same reading of the
				// clock: one per outcome (docs/design.md).
				b.dropped(p.Generation, Success)
			case trips:
				b.finishTrip(p.Generation, true) // as record does on a time window
			}
			return
		}
	}
	b.mustBeNew() // a zero Breaker takes successRecorded
	b.record(p, Success, nil)
}

// doneError is Done for an error. The default classification of a plain
// error, with no Is and no Unwrap method, runs no code of the caller's: on
// a breaker whose window is all it records, its failure goes to the
// window's path at once, without recordError's deferred release, its
// indirect call and Record. Not on a reconfigured breaker: its plainErrors
// are its first Config's, and the rules in force may classify the error
// otherwise, or want it for their OpenDurationFunc (recordError
// classifies it on the successor).
func (b *Breaker) doneError(p Permit, err error) {
	if b.plainErrors && !p.Probe && plainFailure(err) && b.peek() != moving {
		if b.success == successInRing {
			b.recordRingOutcome(p, Failure)
		} else {
			b.recordBucketsFailure(p)
		}
		return
	}
	b.mustBeNew()
	b.recordError(p, err)
}

// Record records outcome o for the call made with p. An outcome whose permit
// is of another generation is stale and changes nothing, nor does one
// recorded while Disabled. An Outcome value other than Success, Failure and
// Ignored counts as Failure.
func (b *Breaker) Record(p Permit, o Outcome) {
	if o == Success {
		b.Done(p, nil) // Done's fast paths
		return
	}
	// A failure outside half-open on a breaker whose window is all there is
	// to record in has paths of its own too, kept apart from the rest of
	// record's frame and spills.
	if o == Failure && !p.Probe {
		switch b.success {
		case successInRing:
			b.recordRingOutcome(p, Failure)
			return
		case successInBuckets:
			b.recordBucketsFailure(p)
			return
		}
	}
	b.mustBeNew() // a zero Breaker takes successRecorded
	b.record(p, o, nil)
}

// recordOf is Record of the outcome o that Done classified from err: with
// Config.OpenDurationFunc, err goes with it to the trip it may decide
// (Record's fast paths carry no error, so it takes record's path).
func (b *Breaker) recordOf(p Permit, o Outcome, err error) {
	if b.cfg.OpenDurationFunc == nil {
		b.Record(p, o)
		return
	}
	b.record(p, o, err)
}

// counting reports whether s counts outcomes in a window.
func counting(s State) bool { return s == Closed || s == MetricsOnly }

// recordRingOutcome records a success or a failure o on a breaker whose
// only state to keep is its count window (successInRing): one claim on the
// ring. What it cannot take (a run of failures to end, a stale or a very
// old generation) it leaves to record, with nothing recorded.
//
// It and the time window's paths (Done's, recordBucketsFailure) repeat
// recordInRing's and recordInBuckets' window writes on purpose: one shared
// function for both, called from here, costs the extra call these paths
// exist to avoid (docs/benchmarks.md, What the profiles showed).
func (b *Breaker) recordRingOutcome(p Permit, o Outcome) {
	if w := b.peek(); !b.closedOf(w, p.Generation) {
		if w == moving {
			// Reconfigured: at once, not through record's frame.
			if n := b.successor(); o == Success {
				n.Done(p, nil)
			} else {
				n.Record(p, o)
			}
			return
		}
		b.mustBeNew()
		b.record(p, o, nil)
		return
	}
	switch v := b.ring.Claim(uint32(p.Generation), o == Failure, false, &b.cfg.rule); v {
	case atomicring.Recorded:
	case atomicring.Tripped, atomicring.AfterTrip:
		// This outcome's trip, or another's that came first (then this
		// one is stale, and commits that trip on its behalf): commit it,
		// as record does. One case for both keeps Recorded's test one
		// branch.
		b.finishTrip(p.Generation, v == atomicring.Tripped)
	default:
		b.record(p, o, nil) // Stale: nothing was recorded; record decides
	}
}

// recordBucketsFailure is Done's success path on a time window, for a
// failure: where a time
// window is all there is to record in (successInBuckets), a failure has
// nothing to keep but its window write and the trip that may follow.
func (b *Breaker) recordBucketsFailure(p Permit) {
	if w := b.peek(); !b.closedOf(w, p.Generation) {
		if w == moving {
			b.successor().Record(p, Failure) // as recordRingOutcome
			return
		}
		b.mustBeNew()
		b.record(p, Failure, nil)
		return
	}
	var now time.Duration
	if b.sysClock {
		now = readSystem(b.sysOrigin)
	} else {
		now = b.cfg.Clock.Now()
	}
	ok, trips := b.buckets.RecordFailure(uint32(p.Generation), now, &b.cfg.rule)
	if !ok {
		b.dropped(p.Generation, Failure)
		return
	}
	if trips {
		b.finishTrip(p.Generation, true)
	}
}

// record is Record past its fast paths. A success or failure outside
// half-open is recorded in the sliding window, if there is one, then in the
// run of consecutive failures, and trips the breaker when the window rule
// fired or the run reached Config.ConsecutiveFailures. Why it is long: the
// run's loop stays in this frame because in a function of its own it made a
// failure-heavy consecutive-failures breaker measurably slower
// (docs/benchmarks.md, What the profiles showed).
//
// With a count window, the ring closed this generation's window in the
// swap that added the outcome, so the record and the trip are one step to
// every observer (Counts, other recorders help commit it). With a time
// window, the rule was judged on the window as this outcome's own write
// left it: the outcome that made the rule hold trips the breaker (R1), even
// if records that landed since would not (docs/design.md, Known limits).
// err is the error Done classified o from (nil from Record), for
// Config.OpenDurationFunc.
func (b *Breaker) record(p Permit, o Outcome, err error) {
	if o > Ignored {
		o = Failure // an Outcome no classifier should return: the safe side
	}
	if p.Probe {
		b.recordProbe(p, o, err)
		return
	}
	if o == Ignored {
		b.recordIgnored(p.Generation)
		return
	}
	w := b.load()
	if w == moving {
		// recordOf, not record: the successor's fast paths take it, as
		// they take its own permits' outcomes.
		b.successor().recordOf(p, o, err)
		return
	}
	if !w.counting() || !b.ofWord(w, p.Generation) {
		b.countDropped()
		return
	}
	trips, more := false, true
	var c deferredCount // counted by the window write, if there is one
	var wait int64      // trip's wait for an OpenGate slot, over every attempt
	switch {
	case b.ring != nil:
		trips, more = b.recordInRing(p, o, err)
	case b.buckets != nil:
		trips, more = b.recordInBuckets(p, o, err)
	default:
		// No window: counted at the swap of the state word.
		c = deferredCount{o: o, slow: b.slow && b.cfg.isSlow(b.now()-p.Start), due: true}
	}
	for more {
		run := w.consec()
		switch {
		case b.cfg.ConsecutiveFailures == 0:
			// Not tracked: a success then costs no write to the state word.
		case o != Failure:
			run = 0
		case run < maxConsec:
			run++
		}
		if trips || b.cfg.consecutiveTrips(uint64(run)) {
			if b.trip(w, p.Generation, 0, c, cause{err: err, decided: true}, &wait) {
				return
			}
		} else {
			if run == w.consec() {
				b.countDeferred(c)
				return // a success after a success: nothing to write
			}
			// closed -> closed with the new run of failures; the ramp-up
			// bits ride along unchanged.
			if b.cas(w, w.withConsec(run)) {
				b.countDeferred(c)
				return
			}
		}
		if w = b.load(); w == moving {
			// A Reconfigure replaced the rules after the window write: the
			// run and the trip are the successor's to decide, and a trip
			// the old rule found stands if the new rule trips on the window
			// it carried.
			var stands bool
			b, w, stands = b.carriedTrip(p.Generation)
			trips = trips && stands
		}
		if more = w.counting() && b.ofWord(w, p.Generation); !more && c.due {
			b.countDropped() // the generation passed before the outcome took effect
		}
	}
}

// recordIgnored takes an Ignored outcome of generation gen outside
// half-open: nothing to record, but the metrics' count of it.
func (b *Breaker) recordIgnored(gen uint64) {
	if b.metrics == nil {
		return
	}
	if b.current(gen) {
		b.countOutcome(Ignored, false)
	} else {
		b.countDropped()
	}
}

// recordInRing writes the success or failure o of p to the count window
// and counts it in Metrics there, where it takes effect (a write that
// closed the window always ends in its trip: every other transition out of
// the generation commits that trip first). It reports whether the window
// rule trips with it in, and whether record has more to do: a trip, or a
// run of failures to keep; a stale outcome is counted as dropped instead.
func (b *Breaker) recordInRing(p Permit, o Outcome, err error) (trips, more bool) {
	gen, fail := uint32(p.Generation), o == Failure
	slow := b.slow && b.cfg.isSlow(b.now()-p.Start)
	v := b.ring.RecordOutcome(gen, fail, slow, &b.cfg.rule)
	for ; v == atomicring.Stale; v = b.ring.RecordOutcome(gen, fail, slow, &b.cfg.rule) {
		if b.forwardSealed(p, o, err) {
			return false, false
		}
		if !b.current(p.Generation) {
			b.countDropped()
			return false, false // stale (R8)
		}
		// Current, yet the ring judged it old: the ring saw no outcome
		// while 2^15 or more generations passed (a long outage).
		b.ring.Reset(gen)
	}
	if v == atomicring.AfterTrip {
		// Another outcome closed this generation's window with the trip
		// it warranted: this one comes after that trip, so it is stale.
		// Commit the trip in case its owner has not yet, so that no call
		// returns while the breaker still looks closed.
		b.countDropped()
		b.finishTrip(p.Generation, false)
		return false, false
	}
	b.countOutcome(o, slow)
	trips = v == atomicring.Tripped
	return trips, trips || b.cfg.ConsecutiveFailures != 0
}

// recordInBuckets is recordInRing for the time window, with one clock
// reading for the outcome's second and its duration. The judgement is O(1)
// but for about one outcome a second (buckets.Window.RecordTrip).
func (b *Breaker) recordInBuckets(p Permit, o Outcome, err error) (trips, more bool) {
	now := b.now()
	slow := b.slow && b.cfg.isSlow(now-p.Start)
	// A drop is final: the outcome's generation is stale, or its second
	// left the window while it was recorded. (Taking the bucket over for
	// a generation that was current a moment before would wipe a
	// successor's second; Advance's sweeps keep any current bucket from
	// reading as newer, so no takeover is needed.)
	recorded, trips := b.buckets.RecordTrip(uint32(p.Generation), now, o == Failure, slow, &b.cfg.rule)
	if !recorded {
		if !b.forwardSealed(p, o, err) {
			b.countDropped()
		}
		return false, false
	}
	b.countOutcome(o, slow)
	return trips, trips || b.cfg.ConsecutiveFailures != 0
}

// deferredCount is an outcome to count in Metrics once the swap that gives
// it effect wins (due false: counted already, or nothing to count).
type deferredCount struct {
	o    Outcome
	slow bool
	due  bool
}

// countDeferred counts c if it is due; its caller's swap has won.
func (b *Breaker) countDeferred(c deferredCount) {
	if c.due {
		b.countOutcome(c.o, c.slow)
	}
}

// forwardSealed records, on the successor, the outcome o of p (classified
// from err) that b's window refused, and reports whether it did: it did
// if a Reconfigure sealed the window (b's word is moving), and otherwise
// the refusal is the caller's to handle (stale, or a ring to reset).
func (b *Breaker) forwardSealed(p Permit, o Outcome, err error) bool {
	if b.peek() != moving {
		return false
	}
	b.successor().recordOf(p, o, err)
	return true
}

// dropped takes the outcome o, of a closed permit of generation gen, that
// the time window's fast paths did not record: stale, and counted as
// dropped, unless a Reconfigure sealed the window, and then the successor
// records it. Those paths measure no slow call and carry no error, so the
// generation is all of the permit they need, and all they keep live
// across the window's call.
func (b *Breaker) dropped(gen uint64, o Outcome) {
	if b.peek() == moving {
		b.successor().Record(Permit{Generation: gen}, o)
		return
	}
	b.countDropped()
}

// countDropped counts a stale outcome, which changed nothing, in Metrics.
func (b *Breaker) countDropped() {
	if b.metrics != nil {
		b.metrics.dropped.Inc()
	}
}

// countOutcome counts an outcome the breaker acted on (slow: a slow window call).
func (b *Breaker) countOutcome(o Outcome, slow bool) {
	if b.metrics != nil {
		b.metrics.outcome(o, slow)
	}
}

// recordProbe records the outcome o of the probe permit p, classified
// from err, then tells Config.ProbeGate, if there is one: after the
// breaker's part, and also when a listener it runs panics.
func (b *Breaker) recordProbe(p Permit, o Outcome, err error) {
	if g := b.cfg.ProbeGate; g != nil {
		defer g.ProbeDone(p, o)
	}
	b.settleProbe(p, o, err, true)
}

// settleProbe is recordProbe without the gate: the probe's slot returned
// and its outcome counted toward the verdict. counted says whether Metrics
// count it (false for a probe the gate refused, which Allow counts as a
// rejection instead).
func (b *Breaker) settleProbe(p Permit, o Outcome, err error, counted bool) {
	for {
		w := b.load()
		if w == moving {
			b = b.successor()
			continue
		}
		u := w.fields()
		if u.state != HalfOpen || !b.ofWord(w, p.Generation) || u.inFlight == 0 {
			if counted {
				b.countDropped()
			}
			return
		}
		u.inFlight--
		var done bool
		switch o {
		case Ignored:
			// half-open -> half-open with the slot returned (R9, B05).
			if done = b.cas(w, u.packed()); done && counted {
				b.countOutcome(Ignored, false)
			}
		case Success:
			done = b.probeSucceeded(w, u, p.Generation)
		default:
			done = b.probeFailed(w, u, p.Generation, err)
		}
		if done {
			return
		}
	}
}

// probeSucceeded records a success of a probe of generation gen on the
// half-open word w, unpacked with the probe's slot returned in u. It
// reports false if the word moved first (the caller reloads).
func (b *Breaker) probeSucceeded(w stateWord, u word, gen uint64) bool {
	if int(u.success)+1 < b.cfg.SuccessesToClose {
		u.success++
		ok := b.cas(w, u.packed())
		if ok {
			b.countOutcome(Success, false)
		}
		return ok
	}
	g := gen + 1
	// half-open -> closed: the swap that counts the last needed success;
	// every probe still in flight becomes stale (R7, R8). A ramp-up's
	// deadline comes from the clock: claimed first, read after the claim.
	var t time.Duration
	if b.cfg.RampUpDuration > 0 {
		var ok bool
		if t, ok = b.commit(w, claimRampUp(lowGen(g))); !ok {
			return false
		}
	} else {
		t = b.clockIfListening()
		if !b.cas(w, word{state: Closed, gen: lowGen(g)}.packed()) {
			return false
		}
	}
	b.releaseIf(HalfOpen, Closed)
	b.countOutcome(Success, false)
	b.notify(HalfOpen, Closed, g, t, ReasonProbesPassed)
	return true
}

// probeFailed records a failure, classified from err, of a probe of
// generation gen on the half-open word w, unpacked with the probe's slot
// returned in u: counted while the generation tolerates it, else the
// re-open. It reports false if the word moved first (the caller reloads).
func (b *Breaker) probeFailed(w stateWord, u word, gen uint64, err error) bool {
	if int(u.failure)+1 < b.cfg.FailuresToReopen {
		u.failure++
		ok := b.cas(w, u.packed())
		if ok {
			b.countOutcome(Failure, false)
		}
		return ok
	}
	return b.reopen(w, u, gen, 0, cause{err: err, decided: true})
}
