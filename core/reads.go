package core

import (
	"time"

	"github.com/casbreaker/casbreaker/window"
)

// Metrics returns the cumulative counters (all zero without
// Config.CollectMetrics); see Metrics for what a read concurrent with
// writers may show. It allocates nothing.
func (b *Breaker) Metrics() Metrics {
	b.mustBeNew()
	if b.metrics == nil {
		return Metrics{}
	}
	return b.metrics.snapshot()
}

// State returns the current state. It is time-aware: an open breaker
// whose open duration has elapsed reports HalfOpen although no call has
// arrived yet. It reads the clock only in open state and commits nothing
// of its own (a transition another call has claimed it completes first):
// the open -> half-open transition, its new generation and its
// notification come with the next Allow, whose caller is the first probe,
// stamped with that Allow's clock reading (Transition.At). Until then a
// clock that steps back makes State report Open again.
func (b *Breaker) State() State {
	b.mustBeNew()
	for {
		w := b.load()
		if w == moving {
			return b.successor().State()
		}
		if s := w.state(); s != Open {
			return s
		}
		passed := untilDeadline(w.deadline(), b.now()) == 0
		if b.peek() != w {
			continue // a transition came between the load and the reading
		}
		if passed {
			return HalfOpen
		}
		return Open
	}
}

// RetryAfter returns how long from now until the breaker may admit a call:
// the wait a rejection at this moment would carry (Permit.RetryAfter,
// RetryAfterOf), without admitting a call, committing a transition or
// notifying. It is 0 when a call may go now: closed (ramping up included,
// where the next call may be admitted), metrics-only, disabled, an open
// duration that has elapsed (the next call probes), or a free probe slot in
// half-open. Open: the time left of the open duration. Half-open with every
// probe slot taken: Config.HalfOpenFullWait, or the time left of the
// half-open max wait if that is shorter. ForcedOpen: WaitForever, since only
// a manual control ends it (a ForcedOpen rejection carries no wait). It
// reads the clock in open and in full half-open states, allocates nothing,
// and may run concurrently with every method; on a zero Breaker it panics,
// naming New.
func (b *Breaker) RetryAfter() time.Duration {
	b.mustBeNew()
	return b.retryAfter(WaitForever)
}

// Counts returns a snapshot; see Counts. It allocates nothing. It reads the
// state word, then the window, then the word again, and starts over if a
// transition committed in between, so the window it reports belongs to the
// generation it reports. It may commit a trip that an outcome has already
// decided but whose recorder has not committed yet (with a count window:
// the window is closed; with a time window: the window, holding an outcome
// of its current second, trips the rule), so that no snapshot shows a
// closed breaker with a window that has tripped.
func (b *Breaker) Counts() Counts {
	b.mustBeNew()
	for {
		base := b.base.Load() // before the word, as in Allow
		w := b.load()
		if w == moving {
			return b.successor().Counts()
		}
		u := w.fields()
		c := Counts{State: u.state, Generation: fullGen(base, w)}
		switch u.state {
		case Closed, MetricsOnly:
			c.ConsecutiveFailures = uint64(u.consec)
			var wc window.Counts
			owed := false // a time window's state that trips the rule owes a trip
			switch {
			case b.ring != nil:
				var closed bool
				if wc, closed = b.ring.SnapshotClosed(uint32(c.Generation)); closed {
					b.finishTrip(c.Generation, false)
					continue
				}
			case b.buckets != nil:
				wc, owed = b.buckets.SnapshotOwed(uint32(c.Generation), b.now())
			}
			if !b.peek().sameIn(w, stateAndGen) {
				// A transition committed between the two reads: the window
				// may already be the next generation's, so the snapshot
				// could miss outcomes that had returned. Read again.
				continue
			}
			if owed && b.cfg.rule.Trips(wc) {
				// The window as its newest outcome left it, in some order
				// of the outcomes, trips the rule: the trip is decided, and
				// the outcome that decided it may not have committed it
				// yet. A closed breaker with that window is no state of any
				// order, so commit the trip, as for a closed count window,
				// and read again. (A window whose rate eviction raised
				// since its last outcome is a state of every order: no
				// outcome has been judged on it yet.)
				b.finishTrip(c.Generation, false)
				continue
			}
			c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = wc.Calls, wc.Failures, wc.SlowCalls, wc.SlowFailures
		case Open:
			if untilDeadline(u.deadline, b.now()) == 0 {
				c.State = HalfOpen
			}
			if b.peek() != w {
				continue // a transition came between the load and the reading
			}
		case HalfOpen:
			c.ProbesInFlight, c.ProbeSuccesses, c.ProbeFailures = int(u.inFlight), int(u.success), int(u.failure)
		}
		return c
	}
}
