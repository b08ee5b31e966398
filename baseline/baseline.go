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

// Breaker is the mutex-based breaker. All methods are safe for concurrent
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

// Allow asks to make one call; see core.Breaker.Allow.
func (b *Breaker) Allow() (core.Permit, error) {
	b.mu.Lock()
	switch b.state {
	case core.Closed:
		p := core.Permit{Generation: b.gen}
		if b.s.SlowEnabled() {
			p.Start = b.s.Clock.Now()
		}
		b.mu.Unlock()
		return p, nil
	case core.Open:
		now := b.now()
		if wait := b.wait(now); wait > 0 {
			b.mu.Unlock()
			return core.Permit{Wait: wait}, core.ErrOpen
		}
		b.transition(core.HalfOpen, now)
		b.inFlight = 1
		p := core.Permit{Generation: b.gen, Probe: true}
		if b.s.SlowEnabled() {
			p.Start = now
		}
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
	default:
		if b.inFlight >= b.s.PermittedCallsInHalfOpen || b.inFlight+b.success >= b.s.SuccessesToClose {
			b.mu.Unlock()
			return core.Permit{}, core.ErrHalfOpenFull
		}
		b.inFlight++
		p := core.Permit{Generation: b.gen, Probe: true}
		if b.s.SlowEnabled() {
			p.Start = b.s.Clock.Now()
		}
		b.mu.Unlock()
		return p, nil
	}
}

// Done records the call's error; see core.Breaker.Done.
func (b *Breaker) Done(p core.Permit, err error) {
	if err == nil {
		b.Record(p, core.Success)
		return
	}
	core.RecordError(b, b.s.Classifier, p, err)
}

// Record records outcome o for p; see core.Breaker.Record.
func (b *Breaker) Record(p core.Permit, o core.Outcome) {
	if o > core.Ignored {
		o = core.Failure
	}
	b.mu.Lock()
	if p.Generation != b.gen || p.Probe != (b.state == core.HalfOpen) || b.state == core.Open ||
		o == core.Ignored && !p.Probe || p.Probe && b.inFlight == 0 {
		b.mu.Unlock()
		return
	}
	if p.Probe {
		b.recordProbe(o)
		b.unlockAndNotify()
		return
	}
	fail := o == core.Failure
	var now time.Duration
	if b.s.SlowEnabled() || b.s.WindowType == core.TimeBased && b.s.WindowSize > 0 {
		now = b.s.Clock.Now()
	}
	slow := b.s.IsSlow(now - p.Start)
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
	case fail:
		b.consec++
	default:
		b.consec = 0
	}
	if b.s.ShouldTrip(c.counts(), b.consec) {
		b.open(0, b.s.Clock.Now())
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
			if b.s.OnStateChange != nil {
				now = b.s.Clock.Now()
			}
			b.transition(core.Closed, now)
		}
	case core.Failure:
		b.open(b.s.NextStep(b.step), b.s.Clock.Now())
	}
}

func (b *Breaker) open(step uint8, now time.Duration) {
	b.transition(core.Open, now)
	b.step = step
	// Millisecond resolution, rounded up: the same rule as the lock-free word.
	b.deadline = core.DeadlineMillis(now, b.s.OpenDuration(step))
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
	if to == core.Closed {
		b.step = 0
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
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == core.Open && b.wait(b.now()) == 0 {
		return core.HalfOpen
	}
	return b.state
}

// Counts returns a snapshot; see core.Counts.
func (b *Breaker) Counts() core.Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := core.Counts{State: b.state, Generation: b.gen}
	switch b.state {
	case core.Closed:
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
