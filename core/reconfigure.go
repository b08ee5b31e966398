package core

import (
	"reflect"
	"strings"
	"time"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/internal/window/atomicring"
	"github.com/casbreaker/casbreaker/internal/window/buckets"
)

// Reconfigured returns the settings a breaker running with s has after
// Reconfigure(c): c validated as New validates it, with the wiring that a
// live breaker keeps (Name, Clock, OnStateChange, CollectMetrics,
// OpenGate, ProbeGate and InitialState) taken from s instead of c; and
// the names of the Config fields whose resolved values differ, in
// Config's order, comma-separated (as Transition.Changed has them), or ""
// when none does. Resolved: a field left zero takes its default, and a
// default may come from another field (MaxOpenDuration and
// HalfOpenFullWait from OpenDuration), so a new OpenDuration names them
// too when they follow it. A breaker built without a SlowCallDurationThreshold
// cannot be given one (its permits carry no start time to measure from):
// that is an error too. Functions cannot be compared, so Classifier is named
// unless both sides use DefaultClassifier, and OpenDurationFunc whenever
// either side sets one. It returns
// the errors of Config.Validate (each matching ErrInvalidConfig) and
// changes nothing; it never panics. Both breaker implementations decide
// what a reconfiguration keeps from the names it returns.
func (s Settings) Reconfigured(c Config) (Settings, string, error) {
	c.Name, c.Clock, c.OnStateChange, c.CollectMetrics = s.Name, s.Clock, s.OnStateChange, s.CollectMetrics
	c.OpenGate, c.ProbeGate, c.InitialState = s.OpenGate, s.ProbeGate, s.InitialState
	n, err := c.Validate()
	if err == nil && !s.slowEnabled() && n.slowEnabled() {
		err = &ConfigError{Field: "SlowCallDurationThreshold", Problem: "Reconfigure cannot start measuring slow calls: " +
			"the permits in flight carry no start time; set it in the Config given to New"}
	}
	if err != nil {
		return Settings{}, "", err
	}
	return n, s.changed(&n), nil
}

// changed names the rule fields whose values differ between s and n.
func (s *Settings) changed(n *Settings) string {
	var names []string
	add := func(name string, differs bool) {
		if differs {
			names = append(names, name)
		}
	}
	add("WindowType", s.WindowType != n.WindowType)
	add("WindowSize", s.WindowSize != n.WindowSize)
	add("BucketWidth", s.BucketWidth != n.BucketWidth)
	add("MinimumNumberOfCalls", s.MinimumNumberOfCalls != n.MinimumNumberOfCalls || s.MinimumAppliesToCount != n.MinimumAppliesToCount)
	add("FailureRateThreshold", s.FailureRateThreshold != n.FailureRateThreshold)
	add("SlowCallRateThreshold", s.SlowCallRateThreshold != n.SlowCallRateThreshold)
	add("SlowCallDurationThreshold", s.SlowCallDurationThreshold != n.SlowCallDurationThreshold)
	add("FailureCountThreshold", s.FailureCountThreshold != n.FailureCountThreshold)
	add("ConsecutiveFailures", s.ConsecutiveFailures != n.ConsecutiveFailures)
	add("OpenDuration", s.OpenDuration != n.OpenDuration)
	add("OpenDurationBackoff", s.OpenDurationBackoff != n.OpenDurationBackoff)
	add("MaxOpenDuration", s.MaxOpenDuration != n.MaxOpenDuration)
	add("OpenDurationFunc", s.OpenDurationFunc != nil || n.OpenDurationFunc != nil)
	add("OpenDurationJitter", s.OpenDurationJitter != n.OpenDurationJitter)
	add("PermittedCallsInHalfOpen", s.PermittedCallsInHalfOpen != n.PermittedCallsInHalfOpen)
	add("SuccessesToClose", s.SuccessesToClose != n.SuccessesToClose)
	add("FailuresToReopen", s.FailuresToReopen != n.FailuresToReopen)
	add("Classifier", !isDefaultClassifier(s.Classifier) || !isDefaultClassifier(n.Classifier))
	add("MaxWaitInHalfOpen", s.MaxWaitInHalfOpen != n.MaxWaitInHalfOpen)
	add("HalfOpenFullWait", s.HalfOpenFullWait != n.HalfOpenFullWait)
	add("RampUpDuration", s.RampUpDuration != n.RampUpDuration)
	add("RampUpStartPercent", s.RampUpStartPercent != n.RampUpStartPercent)
	add("MaxRetryAfter", s.MaxRetryAfter != n.MaxRetryAfter)
	return strings.Join(names, ",")
}

// Reconfigure replaces the rules of a live breaker with c's, keeping its
// state: c is validated as New validates it (Settings.Reconfigured), with
// the breaker's own Name, Clock, OnStateChange, CollectMetrics, OpenGate,
// ProbeGate and InitialState kept (c's are not read); an invalid c returns
// New's errors (each matching ErrInvalidConfig) and changes nothing, and a
// c that changes no rule changes nothing and notifies nothing.
//
// Otherwise, in one step that every other call sees whole (a breaker
// built without slow calls cannot start measuring them: an error):
//   - The state, the generation, the backoff step and the open deadline
//     are kept; permits in flight stay valid, and their outcomes are judged
//     by the new rules (a closed permit granted while slow calls were not
//     measured counts as not slow).
//   - Closed and metrics-only: the run of consecutive failures is kept if
//     ConsecutiveFailures is still set (else dropped), a ramp-up in
//     progress if RampUpDuration is unchanged (else it ends). A window of
//     the same kind, and for a time window the same BucketWidth, keeps
//     its newest outcomes that fit: a count window the last WindowSize
//     calls, in order; a time window the seconds inside its new span. Any
//     other window starts empty. Nothing is judged until the next outcome.
//   - Half-open: the probe counts are kept, and the max wait's deadline if
//     MaxWaitInHalfOpen is unchanged (else it restarts now). Counts that
//     already reach a verdict under the new rules commit it at once: a
//     re-open if FailuresToReopen failures were counted, else a close if
//     SuccessesToClose successes were, each a transition of its own.
//   - One notification: From and To the state, Reason
//     ReasonReconfigured, the generation unchanged, Changed naming what
//     changed.
//
// Reconfigure may run concurrently with every method of b; Reconfigure
// calls on one breaker take effect one at a time, and a listener may call
// it (also from the notification of a reconfiguration). Calls that find it half done
// complete it (so they may allocate a window, once). Every call on a
// reconfigured breaker goes through to the breaker that now holds its
// state, from the path its moving word sends it to: a few calls more than
// before its first Reconfigure (docs/benchmarks.md has the figures). It
// panics on a zero Breaker, naming New, and when
// Config.OpenDurationFunc panics while a verdict re-opens (after the
// reconfiguration and the re-open have been committed and notified). c's
// OpenDurationFunc, for such a re-open, runs in Reconfigure before the
// reconfiguration commits (with no error: no failing call decided it), so
// that no call that finds the reconfiguration half done runs user code.
func (b *Breaker) Reconfigure(c Config) error {
	b.mustBeNew()
	cur, err := b.propose(c)
	if cur == nil {
		return err
	}
	// Deferred: a listener that panics on the announcement (or a clock
	// that panics while the successor is built) must not leave b
	// forwarding through cur.
	defer b.forward(cur)
	// Outside the mutex: the announcement runs the listener, which may
	// call Reconfigure.
	cur.successor()
	return nil
}

// forward points b, the breaker New returned, at cur's successor, if cur
// has one: later calls on b go straight to the newest breaker, so a
// breaker reconfigured a thousand times forwards a call once, not a
// thousand times, and the breakers in between can be collected. Forward
// only: a Reconfigure that planned later may have stored its successor
// first. Without a successor (its builder panicked) b is left as it is:
// the next call that finds cur moving builds one, and the next
// Reconfigure forwards b to it.
func (b *Breaker) forward(cur *Breaker) {
	n := cur.next.Load()
	if n == nil {
		return
	}
	// The plan is done with: dropped, so that the breaker New returned,
	// which no one collects, does not keep its first plan (a whole
	// Settings) for good. A call that finds cur moving finds next first.
	cur.plan.Store(nil)
	for {
		old := b.next.Load()
		if old != nil && old.reconfigs >= n.reconfigs || b.next.CompareAndSwap(old, n) {
			return
		}
	}
}

// propose is Reconfigure's first step: it swaps the newest breaker's word
// for moving with the plan for c, and returns that breaker; or nil, with
// c's error or none when c changes no rule. A plan found unfinished (its
// Reconfigure is descheduled, or a clock or an open-duration function
// panicked in it) is finished first, outside the mutex, since finishing
// announces it.
func (b *Breaker) propose(c Config) (*Breaker, error) {
	for {
		cur, unfinished, err := b.tryPropose(c)
		if unfinished == nil {
			return cur, err
		}
		unfinished.successor()
	}
}

// tryPropose is one attempt of propose, under b's mutex, so that each plan
// is made on the settings of the newest breaker: the breaker planned, or
// the breaker whose plan is unfinished, or neither, with c's error or none.
func (b *Breaker) tryPropose(c Config) (planned, unfinished *Breaker, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.latest()
	for {
		w := cur.load()
		if w == moving {
			return nil, cur, nil
		}
		s, changed, err := cur.cfg.Reconfigured(c)
		if err != nil || changed == "" {
			return nil, nil, err
		}
		p := &reconfiguration{set: s, changed: changed, from: w, gen: cur.genOf(w)}
		if u := w.fields(); u.state == HalfOpen && int(u.failure) >= s.FailuresToReopen && s.OpenDurationFunc != nil {
			// The re-open the kept counts decide, for the function's
			// duration, found here, before the swap: run by a call that
			// finds the word moving, a function that calls into the
			// breaker would find it moving too, and build a successor of
			// its own, running itself again without end.
			p.open, p.openPanic = s.openDurationOf(s.nextStep(u.step), 0, nil)
		}
		// The plan is stored before the swap that publishes it: a call that
		// finds the word moving finds the plan of the swap that won.
		cur.plan.Store(p)
		if cur.cas(w, moving) {
			return cur, nil, nil
		}
	}
}

// reconfiguration is a Reconfigure in progress on the breaker whose plan it
// is: all a call needs to complete it.
type reconfiguration struct {
	set     Settings
	changed string
	from    stateWord // the word the swap to moving replaced
	gen     uint64    // from's breaker generation
	// With set's OpenDurationFunc, the open duration of the re-open that
	// from's probe counts decide under set, and the function's panic.
	open      time.Duration
	openPanic any
}

// latest is the newest breaker of b's line: b itself until its first
// Reconfigure.
func (b *Breaker) latest() *Breaker {
	for n := b.next.Load(); n != nil; n = b.next.Load() {
		b = n
	}
	return b
}

// inForce is the breaker whose rules are in force for a call on b: b, or
// the successor a Reconfigure gave it.
func (b *Breaker) inForce() *Breaker {
	for b.peek() == moving {
		b = b.successor()
	}
	return b
}

// successor is the breaker that holds b's state under its new rules; call
// it on a breaker whose word is moving: a reconfigured breaker forwards
// every call through it.
func (b *Breaker) successor() *Breaker {
	n := b.next.Load()
	if n == nil {
		n = b.takeOver()
	}
	return n
}

// takeOver completes the reconfiguration in progress on b: the caller
// builds a successor of its own from the plan and offers it; the first
// offer wins, and its maker announces it.
func (b *Breaker) takeOver() *Breaker {
	p := b.plan.Load()
	if p == nil {
		return b.next.Load() // done, and its plan dropped (forward) after next was set
	}
	n, v := b.successorOf(p)
	if b.next.CompareAndSwap(nil, n) {
		n.announce(p, v)
	}
	return b.next.Load()
}

// verdict is what a half-open breaker's kept probe counts decided under the
// new rules, for announce: the transition the successor starts in, if any.
type verdict struct {
	to  State // Closed or Open; HalfOpen: none
	at  time.Duration
	d   time.Duration // a re-open's open duration
	pv  any           // the panic of Config.OpenDurationFunc, if it panicked
	why Reason
}

// successorOf builds the breaker that takes over b's state, frozen in plan
// p, under p's settings: b's state word re-expressed for them, its window
// carried over (b's is sealed first, so that no outcome lands in it after
// the copy), and b's dispatcher, metrics and clock shared. Nothing else
// holds it until successor publishes it.
func (b *Breaker) successorOf(p *reconfiguration) (*Breaker, verdict) {
	s := p.set
	n := &Breaker{cfg: s, slow: s.slowEnabled(), sysOrigin: b.sysOrigin, sysClock: b.sysClock,
		dispatch: b.dispatch, metrics: b.metrics}
	n.reconfigs, n.asks = b.reconfigs+1, b.asks
	now := n.now()
	u, gen := p.from.fields(), p.gen
	// The backoff step stays, within the new ladder: a shorter one ends
	// at its last step, as the ladder's own re-opens do.
	u.step = min(u.step, s.lastStep)
	v := verdict{to: HalfOpen, at: now}
	switch u.state {
	case Closed, MetricsOnly:
		if s.ConsecutiveFailures == 0 {
			u.consec = 0
		}
		if u.ramping && b.cfg.RampUpDuration != s.RampUpDuration {
			u.ramping, u.rampEnd = false, 0
		}
	case HalfOpen:
		if b.cfg.MaxWaitInHalfOpen != s.MaxWaitInHalfOpen {
			u.expiry = n.expiry(now)
		}
		switch {
		case int(u.failure) >= s.FailuresToReopen:
			// claimOpenBy with the decided cause, the function already run
			// (tryPropose).
			step, claim := s.nextStep(u.step), stateWord(0)
			if s.OpenDurationFunc != nil {
				claim, v.d, v.pv = n.claimOpenFor(step, lowGen(gen+1), p.open), p.open, p.openPanic
			} else {
				claim, v.d = n.claimOpen(step, lowGen(gen+1), 0), s.openDurationHinted(step, 0)
			}
			u = n.settle(claim, now).fields()
			v.to, v.why, v.d = Open, ReasonProbeFailed, s.jittered(v.d, now, lowGen(gen+1))
		case int(u.success) >= s.SuccessesToClose:
			u = word{state: Closed, gen: lowGen(gen + 1)}
			if s.RampUpDuration > 0 {
				u = n.settle(claimRampUp(lowGen(gen+1)), now).fields()
			}
			v.to, v.why = Closed, ReasonProbesPassed
		}
	}
	n.carryWindow(b, u, gen, now)
	n.choosePaths()
	n.base.Store(n.genOfFields(u, gen))
	n.state.Store(uint64(u.packed()))
	return n, v
}

// genOfFields is the breaker generation of the successor's first word u,
// which is gen, or gen+1 after a verdict.
func (b *Breaker) genOfFields(u word, gen uint64) uint64 {
	if u.gen != lowGen(gen) {
		return gen + 1
	}
	return gen
}

// carryWindow gives the successor b, starting in word u, its window: of
// generation gen with the newest outcomes of old's that fit, when both
// count in windows of the same kind and width and u still counts in gen;
// else empty, holding u's generation.
func (b *Breaker) carryWindow(old *Breaker, u word, gen uint64, now time.Duration) {
	b.ring, b.buckets, _ = newWindow(&b.cfg) // validated: it cannot fail
	g := uint32(b.genOfFields(u, gen))
	same := counting(u.state) && u.gen == lowGen(gen)
	switch {
	case b.ring != nil:
		b.ring.Reset(g)
		if old.ring != nil && same {
			b.copyRing(old.ring, g)
		}
	case b.buckets != nil:
		// A window of the same width keeps the newest second the old one
		// saw, in every state, and the outcomes of its counting
		// generation; one of another width starts afresh.
		var sealed buckets.Sealed
		if old.buckets != nil && old.cfg.BucketWidth == b.cfg.BucketWidth {
			sealed = old.buckets.Seal(uint32(gen), now)
			if same {
				// A trip the old rule owes this window (decided, or left
				// undecided by a judge that summed across the seal) stays
				// owed on the successor's: a Counts there commits it if the
				// new rule trips too, as the recorder will.
				sealed.Judge(&old.cfg.rule)
			}
		}
		b.buckets.Seed(g, sealed, now)
	}
}

// copyRing seals old, the count window of generation gen, and records its
// newest outcomes that fit in b's ring, oldest first. A trip old's last
// outcome decided (the window closed, the trip not committed when the word
// moved) is judged again under the new rule on the copy: its recorder,
// finding the word moving, commits it on the successor if the new rule
// trips too (finishTrip, carriedTrip).
func (b *Breaker) copyRing(old *atomicring.Ring, gen uint32) {
	calls := make([]uint8, old.Size())
	k, closed := old.Seal(gen, calls)
	calls = calls[max(0, k-b.ring.Size()):k]
	for i, c := range calls {
		var rule *trip.Rule
		if closed && i == len(calls)-1 {
			rule = &b.cfg.rule
		}
		b.ring.RecordTrip(gen, c&1 != 0, c&2 != 0, rule)
	}
}

// announce notifies the reconfiguration that made b, then the verdict it
// started in, if any, with what that transition does beside its swap. The
// verdict's part runs before anything is delivered: a listener that
// panics on the reconfiguration's notification must not skip its
// OpenGate release or leave its notification unpublished (every later
// one would wait behind it).
func (b *Breaker) announce(p *reconfiguration, v verdict) {
	st := p.from.state()
	if b.dispatch != nil {
		b.dispatch.publishReconfigured(b.reconfigs, Transition{From: st, To: st, Reason: ReasonReconfigured,
			Generation: p.gen, At: v.at, Changed: p.changed})
	}
	switch v.to {
	case Closed:
		b.releaseIf(HalfOpen, Closed)
		b.notify(HalfOpen, Closed, p.gen+1, v.at, v.why) // delivers both
	case Open:
		b.notifyOpen(HalfOpen, p.gen+1, v.at, v.why, v.d) // delivers both
		if v.pv != nil {
			panic(v.pv)
		}
	default:
		if b.dispatch != nil {
			b.dispatch.deliver(false)
		}
	}
}

// isDefaultClassifier reports whether f is DefaultClassifier, by its code:
// the one function value Reconfigured can tell is unchanged.
func isDefaultClassifier(f func(error) Outcome) bool {
	return reflect.ValueOf(f).Pointer() == reflect.ValueOf(DefaultClassifier).Pointer()
}

// carriedTrip follows b, whose word the caller found moving, to the
// breaker that holds its state now, n, with n's word w (never moving), and
// reports whether a trip of generation gen that b's window decided, under
// rules a Reconfigure then replaced, stands on n: whether n's rules trip on
// the window carried to it (copyRing judged a count window's copy again).
// It is judged only on a breaker whose word is not moving: a window sealed
// for a later Reconfigure reads as empty, and would drop a trip that its
// copy, one successor on, still carries.
func (b *Breaker) carriedTrip(gen uint64) (n *Breaker, w stateWord, trips bool) {
	for {
		b = b.successor()
		if w = b.load(); w == moving {
			continue
		}
		// A false read after a seal (the word moved since the load) is
		// judged again one successor on.
		if trips = b.windowTrips(gen); trips || b.peek() != moving {
			return b, w, trips
		}
	}
}

// windowTrips reports whether b's rule trips on its window of generation
// gen: the count window closed by a trip (copyRing judged the copy), or a
// time window that owes a trip as Counts judges it: the rule holds on the
// window as an outcome in its current second left it (a trip the old
// window owed stays owed in the seeded one: Sealed.Judge). Not merely as
// it is now: eviction alone, after the clock moved on, trips nothing
// (R1). Both read as not tripping once a Reconfigure has sealed the
// window: carriedTrip asks it of a breaker whose word is not moving.
func (b *Breaker) windowTrips(gen uint64) bool {
	switch {
	case b.ring != nil:
		_, closed := b.ring.SnapshotClosed(uint32(gen))
		return closed
	case b.buckets != nil:
		c, owed := b.buckets.SnapshotOwed(uint32(gen), b.now())
		return owed && b.cfg.rule.Trips(c)
	}
	return false
}
