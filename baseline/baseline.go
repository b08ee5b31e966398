// Package baseline is the mutex circuit breaker: the same public behaviour as
// core.Breaker, written the plain way around one sync.Mutex. It is the
// executable reference model of the rules R1-R15 (docs/semantics.md) that
// the differential tests, race tests and fuzz targets compare the lock-free
// core against, and the baseline its benchmarks are measured against.
//
// It shares nothing with the lock-free core but the types and the validated
// Settings: its windows are its own sequential arrays, never
// window/atomicring or window/buckets, so a window bug cannot hide on both
// sides of a differential test. It is not a strawman either: no allocation
// and no clock read that the rules do not need.
package baseline

import (
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Breaker is the mutex-based breaker. Make one with New: a zero Breaker has
// no configuration, and every method panics with "baseline: Breaker used
// without New". All methods are safe for concurrent
// use; each holds the mutex for a few field updates. It reads the Clock
// under the mutex (Config.Clock must not panic or call into the breaker) but
// never calls the classifier or a listener while holding it. Allow, Done and
// Record allocate nothing in steady state.
type Breaker struct {
	mu       sync.Mutex
	s        core.Settings
	state    core.State
	gen      uint32
	consec   uint64
	deadline uint64 // open: first whole millisecond of the clock at which a call may probe
	step     uint8  // backoff step of the current open/half-open period
	inFlight int    // half-open probes in flight
	success  int    // half-open probe successes
	expiry   uint64 // half-open: max-wait deadline, in Settings.HalfOpenUnits
	ramping  bool   // closed: ramping up after half-open -> closed
	rampEnd  uint64 // closed: ramp-up deadline, in Settings.RampUnits
	m        core.Metrics
	count    countWindow
	time     timeWindow

	// Notifications wait here, in commit order, until the one goroutine that
	// is delivering hands them to the listener with the mutex released.
	queue      []core.Transition
	delivering bool
}

var _ core.CircuitBreaker = (*Breaker)(nil)

// New returns a closed breaker at generation 0, or the errors of
// core.Config.Validate. It never panics.
func New(c core.Config) (*Breaker, error) {
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	b := &Breaker{s: s}
	switch {
	case s.WindowSize == 0:
	case s.WindowType == core.TimeBased:
		b.time = newTimeWindow(s.WindowSize)
	default:
		b.count = newCountWindow(s.WindowSize)
	}
	if s.OnStateChange != nil {
		b.queue = make([]core.Transition, 0, 8)
	}
	return b, nil
}

// noNew is what every method of a zero Breaker panics with.
const noNew = "baseline: Breaker used without New: a zero Breaker has no configuration; make one with baseline.New"

// mustBeNew panics with noNew when b is a zero Breaker: every Breaker that
// New returns has the clock of its validated Settings.
func (b *Breaker) mustBeNew() {
	if b.s.Clock == nil {
		panic(noNew)
	}
}

// Allow asks to make one call; see core.Breaker.Allow.
func (b *Breaker) Allow() (core.Permit, error) {
	b.mustBeNew()
	b.mu.Lock()
	switch b.state {
	case core.Closed, core.Disabled, core.MetricsOnly:
		p := core.Permit{Generation: b.gen}
		if b.ramping {
			now := b.s.Clock.Now()
			if left := int64(b.rampEnd) - int64(b.s.RampUnits(now)); b.s.RampOver(left) {
				b.ramping = false
			} else if !b.s.RampAdmits(uint64(left), now) {
				return b.reject(core.Permit{}, core.ErrRampingUp)
			}
			if b.s.SlowEnabled() {
				p.Start = now
			}
		} else if b.s.SlowEnabled() && b.state != core.Disabled {
			p.Start = b.s.Clock.Now()
		}
		b.admit()
		b.mu.Unlock()
		return p, nil
	case core.Open:
		now := b.now()
		if wait := b.wait(now); wait > 0 {
			return b.reject(core.Permit{Wait: wait}, core.ErrOpen)
		}
		return b.probe(now)
	case core.ForcedOpen:
		return b.reject(core.Permit{}, core.ErrForcedOpen)
	default:
		if b.inFlight >= b.s.PermittedCallsInHalfOpen || b.inFlight+b.success >= b.s.SuccessesToClose {
			if b.s.MaxWaitInHalfOpen == core.WaitForever {
				return b.reject(core.Permit{}, core.ErrHalfOpenFull)
			}
			now := b.now()
			if !b.s.HalfOpenExpired(int64(b.expiry) - int64(b.s.HalfOpenUnits(now))) {
				return b.reject(core.Permit{Wait: b.halfOpenWait(now)}, core.ErrHalfOpenFull)
			}
			// The max wait passed without a verdict: a new half-open
			// generation, whose first probe this caller holds.
			return b.probe(now)
		}
		b.inFlight++
		p := core.Permit{Generation: b.gen, Probe: true}
		if b.s.SlowEnabled() {
			p.Start = b.s.Clock.Now()
		}
		b.admit()
		b.mu.Unlock()
		return p, nil
	}
}

// probe starts a new half-open generation at now whose first probe the
// caller holds, and unlocks.
func (b *Breaker) probe(now time.Duration) (core.Permit, error) {
	b.transition(core.HalfOpen, now)
	b.inFlight = 1
	b.expiry = b.s.HalfOpenDeadline(now)
	p := core.Permit{Generation: b.gen, Probe: true}
	if b.s.SlowEnabled() {
		p.Start = now
	}
	b.admit()
	// A panicking listener must not strand the probe the caller never got.
	delivered := false
	defer func() {
		if !delivered {
			b.Record(p, core.Ignored)
		}
	}()
	b.unlockAndNotify()
	delivered = true
	return p, nil
}

func (b *Breaker) admit() {
	if b.s.CollectMetrics {
		b.m.Admitted++
	}
}

// reject counts a rejection, unlocks and returns it.
func (b *Breaker) reject(p core.Permit, err error) (core.Permit, error) {
	if b.s.CollectMetrics {
		switch err {
		case core.ErrOpen:
			b.m.RejectedOpen++
		case core.ErrHalfOpenFull:
			b.m.RejectedHalfOpenFull++
		case core.ErrForcedOpen:
			b.m.RejectedForcedOpen++
		default:
			b.m.RejectedRampUp++
		}
	}
	b.mu.Unlock()
	return p, err
}

// Done records the call's error; see core.Breaker.Done.
func (b *Breaker) Done(p core.Permit, err error) {
	b.mustBeNew()
	if err == nil {
		b.Record(p, core.Success)
		return
	}
	core.RecordError(b, &b.s, p, err)
}

// counting reports whether the breaker counts outcomes in a window.
func (b *Breaker) counting() bool {
	return b.state == core.Closed || b.state == core.MetricsOnly
}

// current reports whether an outcome for p would be acted on.
func (b *Breaker) current(p core.Permit) bool {
	if p.Generation != b.gen {
		return false
	}
	if p.Probe {
		return b.state == core.HalfOpen && b.inFlight > 0
	}
	return b.counting()
}

// Record records outcome o for p; see core.Breaker.Record.
func (b *Breaker) Record(p core.Permit, o core.Outcome) {
	b.mustBeNew()
	if o > core.Ignored {
		o = core.Failure
	}
	b.mu.Lock()
	if !b.current(p) {
		b.tally(false, o, false)
		b.mu.Unlock()
		return
	}
	if p.Probe {
		b.tally(true, o, false)
		b.recordProbe(o)
		b.unlockAndNotify()
		return
	}
	if o == core.Ignored {
		b.tally(true, o, false)
		b.mu.Unlock()
		return
	}
	fail := o == core.Failure
	var now time.Duration
	if b.s.SlowEnabled() || b.s.WindowType == core.TimeBased && b.s.WindowSize > 0 {
		now = b.s.Clock.Now()
	}
	slow := b.s.IsSlow(now - p.Start)
	b.tally(true, o, slow)
	var c windowCounts
	switch {
	case b.s.WindowSize == 0:
	case b.s.WindowType == core.TimeBased:
		b.time.add(now, fail, slow)
		c = b.time.sum(now)
	default:
		b.count.add(fail, slow)
		c = b.count.sum
	}
	switch {
	case b.s.ConsecutiveFailures == 0: // not tracked, as in the lock-free word
	case !fail:
		b.consec = 0
	case b.consec < core.MaxConsecutiveFailures:
		b.consec++
	}
	if b.s.ShouldTrip(c.counts(), b.consec) {
		b.trip(0)
	}
	b.unlockAndNotify()
}

// tally counts one outcome in the metrics: acted on, or dropped.
func (b *Breaker) tally(acted bool, o core.Outcome, slow bool) {
	switch {
	case !b.s.CollectMetrics:
	case !acted:
		b.m.Dropped++
	case o == core.Success:
		b.m.Successes++
	case o == core.Failure:
		b.m.Failures++
	default:
		b.m.Ignored++
	}
	if acted && slow && b.s.CollectMetrics {
		b.m.SlowCalls++
	}
}

// trip commits the trip of a counting breaker: closed -> open for at least
// the bounded hint h, or metrics-only's "would have opened".
func (b *Breaker) trip(h time.Duration) {
	if b.state == core.MetricsOnly {
		var now time.Duration
		if b.s.OnStateChange != nil {
			now = b.s.Clock.Now()
		}
		b.transition(core.MetricsOnly, now)
		return
	}
	b.open(0, h, b.s.Clock.Now())
}

// RecordHint records a failure carrying a retry-after hint; see
// core.Breaker.RecordHint.
func (b *Breaker) RecordHint(p core.Permit, retryAfter time.Duration) {
	b.mustBeNew()
	h := b.s.Hint(retryAfter)
	if h == 0 {
		b.Record(p, core.Failure)
		return
	}
	b.mu.Lock()
	if !b.current(p) {
		b.tally(false, core.Failure, false)
		b.mu.Unlock()
		return
	}
	b.tally(true, core.Failure, false)
	if p.Probe {
		b.open(b.s.NextStep(b.step), h, b.s.Clock.Now())
	} else {
		b.trip(h)
	}
	b.unlockAndNotify()
}

func (b *Breaker) recordProbe(o core.Outcome) {
	b.inFlight--
	switch o {
	case core.Success:
		b.success++
		if b.success >= b.s.SuccessesToClose {
			var now time.Duration
			if b.s.OnStateChange != nil || b.s.RampUpDuration > 0 {
				now = b.s.Clock.Now()
			}
			b.transition(core.Closed, now)
			if b.s.RampUpDuration > 0 {
				b.ramping, b.rampEnd = true, b.s.RampDeadline(now)
			}
		}
	case core.Failure:
		b.open(b.s.NextStep(b.step), 0, b.s.Clock.Now())
	}
}

// open commits a transition to Open at backoff step for at least the
// bounded hint h.
func (b *Breaker) open(step uint8, h time.Duration, now time.Duration) {
	b.transition(core.Open, now)
	b.step = step
	// Millisecond resolution, rounded up: the same rule as the lock-free word.
	b.deadline = core.DeadlineMillis(now, b.s.OpenDurationHinted(step, h))
}

// halfOpenWait is how long before a call at now, refused because half-open
// is full, would start a new half-open generation: the time to the expiry
// boundary, in the max wait's coarse units of max(1 ms, ceil(d/1024))
// rounded up to whole milliseconds (docs/design.md), worked out here from
// the configured duration rather than taken from core.
func (b *Breaker) halfOpenWait(now time.Duration) time.Duration {
	ms := (b.s.MaxWaitInHalfOpen + time.Millisecond - 1) / time.Millisecond
	unit := max(1, (ms+1023)/1024) * time.Millisecond
	// In whole units first, so that no reading near 2^63 ns overflows.
	return time.Duration(b.expiry-uint64(now/unit))*unit - now%unit
}

// wait is how long before a call at now may probe (0: it may).
func (b *Breaker) wait(now time.Duration) time.Duration {
	nowMs := uint64(now / time.Millisecond)
	if nowMs >= b.deadline {
		return 0
	}
	return time.Duration(b.deadline-nowMs)*time.Millisecond - now%time.Millisecond
}

// transition commits a state change: new generation, fresh state (R11), and
// a queued notification. The caller holds the mutex.
func (b *Breaker) transition(to core.State, now time.Duration) {
	from := b.state
	b.state = to
	b.gen = (b.gen + 1) % core.GenerationModulus
	b.inFlight, b.success, b.consec = 0, 0, 0
	b.ramping, b.expiry = false, 0
	if to != core.Open && to != core.HalfOpen {
		b.step = 0
	}
	if b.s.CollectMetrics {
		b.m.Transitions[from][to]++
	}
	b.count.reset()
	b.time.reset()
	if b.s.OnStateChange != nil {
		b.queue = append(b.queue, core.Transition{Name: b.s.Name, From: from, To: to, Generation: b.gen, At: now})
	}
}

// unlockAndNotify releases the mutex and, unless another goroutine is
// already delivering, delivers queued notifications in order with the mutex
// released (R12: a listener may call back into the breaker).
func (b *Breaker) unlockAndNotify() {
	if len(b.queue) == 0 || b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	returned, i := false, 0
	defer func() {
		// A panicking listener must not stop later deliveries: the events
		// queued behind its event go out with the next transition, as in the
		// lock-free dispatcher.
		if !returned {
			b.mu.Lock()
			b.queue = append(b.queue[:0], b.queue[i+1:]...)
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for ; i < len(b.queue); i++ {
		t := b.queue[i]
		b.mu.Unlock()
		b.s.OnStateChange(t)
		b.mu.Lock()
	}
	b.queue = b.queue[:0]
	b.delivering = false
	returned = true
	b.mu.Unlock()
}

// now reads the clock for deadline checks, where a reading below zero counts
// as zero, as in the lock-free word's unsigned milliseconds.
func (b *Breaker) now() time.Duration { return max(b.s.Clock.Now(), 0) }

// State returns the current state, time-aware (R5).
func (b *Breaker) State() core.State {
	b.mustBeNew()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == core.Open && b.wait(b.now()) == 0 {
		return core.HalfOpen
	}
	return b.state
}

// Counts returns a snapshot; see core.Counts.
func (b *Breaker) Counts() core.Counts {
	b.mustBeNew()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := core.Counts{State: b.state, Generation: b.gen}
	switch b.state {
	case core.Closed, core.MetricsOnly:
		var w windowCounts
		switch {
		case b.s.WindowSize == 0:
		case b.s.WindowType == core.TimeBased:
			w = b.time.sum(b.s.Clock.Now())
		default:
			w = b.count.sum
		}
		c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = w.n, w.f, w.s, w.sf
		c.ConsecutiveFailures = b.consec
	case core.Open:
		if b.wait(b.now()) == 0 {
			c.State = core.HalfOpen
		}
	case core.HalfOpen:
		c.ProbesInFlight, c.ProbeSuccesses = b.inFlight, b.success
	}
	return c
}

// Metrics returns the cumulative counters; see core.Metrics. The snapshot is
// one instant.
func (b *Breaker) Metrics() core.Metrics {
	b.mustBeNew()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m
}

// ForceOpen forces the breaker open; see core.Breaker.ForceOpen.
func (b *Breaker) ForceOpen(d time.Duration) error {
	b.mustBeNew()
	if err := core.CheckForceOpen(d); err != nil {
		return err
	}
	b.mu.Lock()
	if d == 0 {
		b.command(core.ForcedOpen)
		return nil
	}
	now := b.s.Clock.Now()
	b.transition(core.Open, now)
	b.step = 0
	b.deadline = core.DeadlineMillis(now, d)
	b.unlockAndNotify()
	return nil
}

// Disable disables the breaker; see core.Breaker.Disable.
func (b *Breaker) Disable() {
	b.mustBeNew()
	b.mu.Lock()
	b.command(core.Disabled)
}

// MetricsOnly moves the breaker to metrics-only; see core.Breaker.MetricsOnly.
func (b *Breaker) MetricsOnly() {
	b.mustBeNew()
	b.mu.Lock()
	b.command(core.MetricsOnly)
}

// Reset closes the breaker; see core.Breaker.Reset.
func (b *Breaker) Reset() {
	b.mustBeNew()
	b.mu.Lock()
	b.command(core.Closed)
}

// command commits a manual control to state to, and unlocks.
func (b *Breaker) command(to core.State) {
	var now time.Duration
	if b.s.OnStateChange != nil {
		now = b.s.Clock.Now()
	}
	b.transition(to, now)
	b.unlockAndNotify()
}
