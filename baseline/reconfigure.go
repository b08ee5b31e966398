package baseline

import (
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// earlyRules is what the paths before the mutex read of the rules; see
// Breaker.early.
type earlyRules struct {
	classify func(error) core.Outcome
	hints    bool // MaxRetryAfter > 0: a failure's error is searched for a hint
}

// setRules makes s the rules b decides by, with what it derives from them
// (the window's kind, the coarse spans, the jitter's share, the flags of
// the paths before the mutex). The caller holds the mutex, or has the
// breaker to itself (New); the windows themselves are the caller's.
func (b *Breaker) setRules(s core.Settings) {
	b.cfg = s
	b.maxWait, b.ramp = newSpan(s.MaxWaitInHalfOpen), newSpan(s.RampUpDuration)
	b.timed, b.consecOn = s.SlowCallDurationThreshold > 0, s.ConsecutiveFailures > 0
	b.jitter = jitterShare(s.OpenDurationJitter)
	switch {
	case s.WindowSize == 0:
		b.window = 0
	case s.WindowType == core.TimeBased:
		b.window = timeBased
	default:
		b.window = countBased
	}
	b.stamped = b.timed || b.window == timeBased
	e := &earlyRules{classify: s.Classifier, hints: s.MaxRetryAfter > 0}
	if e.classify == nil {
		e.classify = classify // R9's default, decided here too
	}
	b.early.Store(e)
}

// Settings returns the validated settings the breaker runs with: New's,
// or the last Reconfigure's; see core.Breaker.Settings.
func (b *Breaker) Settings() core.Settings {
	b.mustBeNew()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

// Reconfigure replaces the breaker's rules with c's while it runs; see
// core.Breaker.Reconfigure and docs/semantics.md R18, which it decides with
// its own code, sharing only core.Settings.Reconfigured (which fields a live
// breaker keeps, and which rule fields changed).
//
// c is validated as New validates it, with the breaker's own Name, Clock,
// OnStateChange, CollectMetrics, OpenGate, ProbeGate and InitialState in
// place of c's: if it is invalid, Reconfigure returns Validate's errors
// (each matching core.ErrInvalidConfig) and changes nothing. If no rule
// field changed, it does nothing and returns nil. Otherwise, in one
// critical section at one clock reading, the new rules govern every
// decision after it; the state, the generation, the backoff step and the
// open deadline are kept, and so are what R18 says of the run of failures,
// the window, the ramp-up and the probes; and one notification
// (core.ReasonReconfigured, From == To, the current generation, Changed
// naming the fields) is delivered the way every other is: in commit order,
// with the mutex released. A half-open breaker whose kept probe counts
// already reach a verdict by the new rules then commits it, as the probe
// outcome would have, with its own notification.
//
// Safe for concurrent use with every method; Reconfigure calls run one at
// a time. Permits in flight stay valid and their outcomes are judged by
// the new rules. It panics as every method does on a zero Breaker, and
// with a panic of core.Config.OpenDurationFunc raised by a verdict it
// commits (once the verdict is committed and notified).
func (b *Breaker) Reconfigure(c core.Config) error {
	b.mustBeNew()
	// One at a time: only Reconfigure writes the rules, so, holding
	// reconfig, it may read them (and validate c, which may take a while)
	// without the mutex. It is let go before the notifications go out: a
	// listener may call Reconfigure, from this reconfiguration's
	// notification too, on this goroutine.
	b.reconfig.Lock()
	n, changed, err := b.cfg.Reconfigured(c)
	if err != nil || changed == "" {
		b.reconfig.Unlock()
		return err
	}
	b.mu.Lock()
	// Under the mutex, so that the reading is the reconfiguration's own
	// (a verdict it commits takes its deadlines from it; one taken before
	// the mutex could be older than a transition committed in between);
	// a clock that panics leaves nothing locked.
	now := b.readClockReleasing(&b.mu, &b.reconfig)
	old, step := b.cfg, b.step()
	oldCount, oldTime, oldWindow := b.count, b.time, b.window
	b.setRules(n)
	switch b.state {
	case core.Open, core.HalfOpen:
		// The step is kept (the lock-free word keeps it, not a duration):
		// the next re-open backs off from its open duration by the new
		// rules.
		b.openFor, b.reopens = b.stepDuration(step), int(step)
	}
	b.rewindow(&old, oldWindow, &oldCount, &oldTime, now)
	if !b.consecOn {
		b.consec = 0 // dropped; kept otherwise (it is 0 unless counting)
	}
	if b.ramping && n.RampUpDuration != old.RampUpDuration {
		b.ramping, b.rampEnd = false, 0 // ends: closed, admitting all
	}
	if b.state == core.HalfOpen && n.MaxWaitInHalfOpen != old.MaxWaitInHalfOpen {
		b.expiry = 0 // WaitForever: none
		b.maxWaitFrom(now)
	}
	if b.onChange != nil {
		b.queue = append(b.queue, core.Transition{Name: b.cfg.Name, From: b.state, To: b.state, Reason: core.ReasonReconfigured,
			Generation: b.gen, At: now, Time: wall(b.clock, now), Changed: changed})
	}
	var pv any
	if b.state == core.HalfOpen {
		pv = b.verdict(nil, now, false) // at the reconfiguration's reading: one step
	}
	b.reconfig.Unlock() // the rules are written: the next Reconfigure may read them
	b.unlockAndNotify()
	repanic(pv)
	return nil
}

// rewindow gives a reconfigured breaker (rules already set) its window:
// with the same kind (and, for a time window, the same bucket width) as
// the old rules' (old, whose window was oldKind, holding count or time),
// the newest outcomes the new size holds, in order; otherwise an empty
// one. The window is not judged here: the next outcome judges it. The
// caller holds the mutex.
func (b *Breaker) rewindow(old *core.Settings, oldKind windowKind, count *countWindow, tw *timeWindow, now time.Duration) {
	b.count, b.time = countWindow{}, timeWindow{}
	switch {
	case b.window == countBased && oldKind == countBased:
		b.count = count.resized(b.cfg.WindowSize)
	case b.window == countBased:
		b.count = newCountWindow(b.cfg.WindowSize)
	case b.window == timeBased && oldKind == timeBased && b.cfg.BucketWidth == old.BucketWidth:
		b.time = tw.resized(b.cfg.WindowSize, now)
	case b.window == timeBased:
		// Empty, its head at the reconfiguration's second, as the
		// lock-free successor's (buckets' Seed): a reading the clock
		// then takes back records into that second, not an earlier one.
		b.time = newTimeWindow(b.cfg.WindowSize, b.cfg.BucketWidth)
		b.time.move(now)
	}
}

// resized is a count window of size holding w's newest outcomes (as many
// as it holds), in order.
func (w *countWindow) resized(size int) countWindow {
	n := newCountWindow(size)
	calls := w.outcomes()
	for _, o := range calls[max(0, len(calls)-size):] {
		n.add(o)
	}
	return n
}

// outcomes is the window's outcomes, oldest first.
func (w *countWindow) outcomes() []outcome {
	if !w.full {
		return append([]outcome(nil), w.ring[:w.next]...)
	}
	return append(append([]outcome(nil), w.ring[w.next:]...), w.ring[:w.next]...)
}

// resized is a time window of seconds whole seconds, in w's bucket width,
// holding the buckets of the seconds inside its span at the reading now:
// w's head moves to now's second first (as a read at now would move it),
// and the newest buckets, as many as the new window has, are kept with
// their head.
func (w *timeWindow) resized(seconds int, now time.Duration) timeWindow {
	w.move(now)
	n := newTimeWindow(seconds, w.width)
	n.head, n.headEnd = w.head, w.headEnd
	n.at = len(n.buckets) - 1
	for k := range min(len(n.buckets), len(w.buckets)) {
		c := w.buckets[(w.at-k+len(w.buckets))%len(w.buckets)]
		n.buckets[n.at-k] = c
		n.total.addSum(c)
	}
	return n
}

// addSum adds the sum c to w.
func (w *windowCounts) addSum(c windowCounts) {
	w.n, w.f, w.s, w.sf = w.n+c.n, w.f+c.f, w.s+c.s, w.sf+c.sf
}

// verdict commits the verdict that a half-open breaker's counted probe
// outcomes reach, if they reach one (R7): the FailuresToReopen-th failure
// re-opens at the next backoff step, else the SuccessesToClose-th success
// closes. err is the error of the outcome that decided it (nil when a
// reconfiguration's new rules did), committed at the clock reading now,
// or at one of its own when read is set. It returns a panic of the
// open-duration function, as trip. The caller holds the mutex.
func (b *Breaker) verdict(err error, now time.Duration, read bool) (pv any) {
	switch {
	case b.failure >= b.cfg.FailuresToReopen:
		return b.openAt(backoff(&b.cfg, b.openFor), 0, b.reopened(), err, core.ReasonProbeFailed, now, read)
	case b.success >= b.cfg.SuccessesToClose:
		if read && (b.onChange != nil || b.cfg.RampUpDuration > 0) {
			now = b.cfg.Clock.Now()
		}
		b.transition(core.Closed, now, core.ReasonProbesPassed)
		if b.cfg.RampUpDuration > 0 {
			b.ramping, b.rampEnd = true, b.ramp.deadline(now)
		}
	}
	return nil
}

// readClockReleasing reads the clock, and unlocks held if the clock
// panics (the panic goes on).
func (b *Breaker) readClockReleasing(held ...*sync.Mutex) time.Duration {
	read := false
	defer func() {
		if !read {
			for _, l := range held {
				l.Unlock()
			}
		}
	}()
	now := b.clock.Now()
	read = true
	return now
}
