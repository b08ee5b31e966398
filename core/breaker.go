package core

import (
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/window"
	"github.com/casbreaker/casbreaker/window/atomicring"
	"github.com/casbreaker/casbreaker/window/buckets"
)

// Breaker is the lock-free circuit breaker. Its state, generation, open
// deadline, backoff step and half-open probe counts live in one uint64 that
// only compare-and-swap changes (state.go has the layout; docs/design.md the
// proof). Its window is a lock-free atomic ring (count-based) or per-second
// buckets (time-based).
//
// All methods are safe for concurrent use and none blocks: no lock, no
// goroutine, no timer. Transitions happen lazily inside Allow, Done, Record,
// State and Counts. Allow, Done and Record allocate nothing in any state.
//
// Where the clock is read: Allow reads it in open state (to check the
// deadline) and, only with slow calls configured, to stamp Permit.Start;
// Done/Record read it with slow calls configured, with a time-based window,
// and when committing a transition into open. With a count-based window and
// no slow threshold, the closed-state Allow/Done path reads no clock.
type Breaker struct {
	// state is the one word of the state machine. First field, padded to its
	// own 64-byte cache line (8 bytes + 56), so it is 64-bit aligned for
	// go.uber.org/atomic on 32-bit platforms and shares its line with no
	// field that is written.
	state atomic.Uint64
	_     [56]byte

	s        Settings
	slow     bool
	ring     *atomicring.Ring
	buckets  *buckets.Window
	dispatch *dispatcher
}

// Counts is a snapshot of a breaker. Calls, Failures, SlowCalls and
// SlowFailures are the current window's (zero when no window is configured,
// and zero in open and half-open, which start fresh per R11);
// ConsecutiveFailures is the closed-state run of failures, tracked only when
// Config.ConsecutiveFailures is set; ProbesInFlight and
// ProbeSuccesses are half-open's. State is time-aware like State().
//
// A snapshot read while other goroutines record may not include outcomes
// still in flight, but it is never torn: 0 <= Failures <= Calls,
// SlowFailures <= min(SlowCalls, Failures), and for a count window
// Calls <= WindowSize (R2, R13).
type Counts struct {
	State               State
	Generation          uint32
	Calls               uint64
	Failures            uint64
	SlowCalls           uint64
	SlowFailures        uint64
	ConsecutiveFailures uint64
	ProbesInFlight      int
	ProbeSuccesses      int
}

// New returns a closed breaker at generation 0. It returns the errors of
// Config.Validate (each matching ErrInvalidConfig) and never panics.
func New(c Config) (*Breaker, error) {
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	b := &Breaker{s: s, slow: s.SlowEnabled()}
	switch {
	case s.WindowSize == 0:
	case s.WindowType == TimeBased:
		b.buckets, err = buckets.New(s.WindowSize)
	default:
		b.ring, err = atomicring.New(s.WindowSize)
	}
	if err != nil {
		return nil, err
	}
	if s.OnStateChange != nil {
		b.dispatch = newDispatcher(s.Name, s.OnStateChange)
	}
	return b, nil
}

// Settings returns the validated settings the breaker runs with.
func (b *Breaker) Settings() Settings { return b.s }

// Allow asks to make one call. It returns a Permit, or ErrOpen (with
// Permit.Wait set) or ErrHalfOpenFull. In open state, the first call at or
// after the deadline moves the breaker to half-open and is one of its probes
// (R4, R6; regression B04).
func (b *Breaker) Allow() (Permit, error) {
	for {
		w := b.state.Load()
		switch State(w & stateMask) {
		case Closed:
			// The hot path: one load, no write, no clock unless slow calls are measured.
			p := Permit{Generation: uint32(w >> genShift)}
			if b.slow {
				p.Start = b.s.Clock.Now()
			}
			return p, nil
		case Open:
			now := max(b.s.Clock.Now(), 0)
			u := unpack(w)
			if wait := untilDeadline(u.payload, now); wait > 0 {
				return Permit{Wait: wait}, ErrOpen
			}
			g := nextGen(u.gen)
			// open -> half-open: a successful swap hands this caller the
			// first probe slot of the new generation; losers reload and
			// compete for the remaining slots.
			if !b.state.CompareAndSwap(w, pack(word{state: HalfOpen, step: u.step, gen: g, inFlight: 1})) {
				continue
			}
			p := Permit{Generation: g, Probe: true, Start: b.startIf(now)}
			b.notifyProbe(p, now)
			return p, nil
		default:
			u := unpack(w)
			if int(u.inFlight) >= b.s.PermittedCallsInHalfOpen ||
				int(u.inFlight)+int(u.success) >= b.s.SuccessesToClose {
				return Permit{}, ErrHalfOpenFull
			}
			u.inFlight++
			// half-open -> half-open with one more probe in flight: a
			// successful swap is the caller's probe slot (R6).
			if b.state.CompareAndSwap(w, pack(u)) {
				p := Permit{Generation: u.gen, Probe: true}
				if b.slow {
					p.Start = b.s.Clock.Now()
				}
				return p, nil
			}
		}
	}
}

func (b *Breaker) startIf(now time.Duration) time.Duration {
	if b.slow {
		return now
	}
	return 0
}

// Done records the outcome of the call made with p, classifying err with
// Config.Classifier (nil is always Success). A panicking classifier releases
// the permit as Ignored and the panic propagates (R10). Call Done or Record
// exactly once per permit: a second call for the same half-open probe may
// release another probe's slot.
func (b *Breaker) Done(p Permit, err error) {
	if err == nil {
		b.Record(p, Success)
		return
	}
	RecordError(b, b.s.Classifier, p, err)
}

// Record records outcome o for the call made with p. An outcome whose permit
// is of another generation is stale and changes nothing (R8). An Outcome
// value other than Success, Failure and Ignored counts as Failure.
func (b *Breaker) Record(p Permit, o Outcome) {
	if o > Ignored {
		o = Failure // an Outcome no classifier should return: the safe side
	}
	if p.Probe {
		b.recordProbe(p, o)
		return
	}
	if o == Ignored {
		return
	}
	w := b.state.Load()
	if State(w&stateMask) != Closed || uint32(w>>genShift) != p.Generation {
		return
	}
	fail := o == Failure
	var now time.Duration
	if b.slow || b.buckets != nil {
		now = b.s.Clock.Now()
	}
	slow := b.slow && b.s.IsSlow(now-p.Start)
	var c window.Counts
	switch {
	case b.ring != nil:
		var ok bool
		for c, ok = b.ring.Record(p.Generation, fail, slow); !ok; c, ok = b.ring.Record(p.Generation, fail, slow) {
			if !b.current(p.Generation) {
				return // stale (R8)
			}
			// Current, yet the ring judged it old: the ring saw no outcome
			// while 2^15 or more generations passed (a long outage).
			b.ring.Reset(p.Generation)
		}
	case b.buckets != nil:
		if !b.buckets.Record(p.Generation, now, fail, slow) &&
			(!b.current(p.Generation) || !b.buckets.RecordCurrent(p.Generation, now, fail, slow)) {
			return
		}
		c = b.buckets.Snapshot(p.Generation, now)
	}
	for {
		consec := w >> payShift & payMask
		switch {
		case b.s.ConsecutiveFailures == 0:
			// Not tracked: a success then costs no write to the state word.
		case !fail:
			consec = 0
		case consec < maxConsec:
			consec++
		}
		if b.s.ShouldTrip(c, consec) {
			// c is the window as this outcome's own CAS committed it: the
			// outcome that made the rule hold trips the breaker (R1), even if
			// records that landed since would not (docs/design.md, Known
			// limits: the record and its trip are two steps).
			t := b.s.Clock.Now()
			g := nextGen(p.Generation)
			// closed -> open: a successful swap is the one trip of this
			// generation; every other recorder of the old generation
			// becomes stale and the window is abandoned with it (R8, R11).
			if b.state.CompareAndSwap(w, pack(word{state: Open, gen: g, payload: deadline(t, b.s.OpenDuration(0))})) {
				b.notify(Closed, Open, g, t)
				return
			}
		} else {
			if consec == w>>payShift&payMask {
				return // a success after a success: nothing to write
			}
			// closed -> closed with the new run of failures.
			if b.state.CompareAndSwap(w, w&^(payMask<<payShift)|consec<<payShift) {
				return
			}
		}
		w = b.state.Load()
		if State(w&stateMask) != Closed || uint32(w>>genShift) != p.Generation {
			return
		}
	}
}

// windowCounts reads the window of generation gen at now (zero when no
// window is configured).
func (b *Breaker) windowCounts(gen uint32, now time.Duration) window.Counts {
	switch {
	case b.ring != nil:
		return b.ring.Snapshot(gen)
	case b.buckets != nil:
		return b.buckets.Snapshot(gen, now)
	}
	return window.Counts{}
}

// current reports whether gen is the generation of a closed breaker now.
// The windows compare only the low bits of generations and ask this when
// their own arithmetic says an outcome is stale.
func (b *Breaker) current(gen uint32) bool {
	w := b.state.Load()
	return State(w&stateMask) == Closed && uint32(w>>genShift) == gen
}

func (b *Breaker) recordProbe(p Permit, o Outcome) {
	for {
		w := b.state.Load()
		u := unpack(w)
		if u.state != HalfOpen || u.gen != p.Generation || u.inFlight == 0 {
			return
		}
		u.inFlight--
		switch o {
		case Ignored:
			// half-open -> half-open with the slot returned (R9, B05).
			if b.state.CompareAndSwap(w, pack(u)) {
				return
			}
		case Success:
			if int(u.success)+1 < b.s.SuccessesToClose {
				u.success++
				if b.state.CompareAndSwap(w, pack(u)) {
					return
				}
				continue
			}
			g := nextGen(u.gen)
			// half-open -> closed: the swap that counts the last needed
			// success; every probe still in flight becomes stale (R7, R8).
			if b.state.CompareAndSwap(w, pack(word{state: Closed, gen: g})) {
				b.notify(HalfOpen, Closed, g, b.clockIfListening())
				return
			}
		default:
			t := b.s.Clock.Now()
			g := nextGen(u.gen)
			step := b.s.NextStep(u.step)
			// half-open -> open: the first failure of the generation
			// re-opens with the next backoff step; later failures of the
			// same generation are stale (R7, B12, B29).
			if b.state.CompareAndSwap(w, pack(word{state: Open, step: step, gen: g, payload: deadline(t, b.s.OpenDuration(step))})) {
				b.notify(HalfOpen, Open, g, t)
				return
			}
		}
	}
}

// clockIfListening reads the clock only when someone will see the reading.
func (b *Breaker) clockIfListening() time.Duration {
	if b.dispatch == nil {
		return 0
	}
	return b.s.Clock.Now()
}

// notifyProbe announces open -> half-open, whose caller holds probe p. The
// listener runs before Allow can return p: if it panics, p is released as
// Ignored so the slot does not leak (R10), and the panic goes on.
func (b *Breaker) notifyProbe(p Permit, at time.Duration) {
	if b.dispatch == nil {
		return
	}
	delivered := false
	defer func() {
		if !delivered {
			b.Record(p, Ignored)
		}
	}()
	b.dispatch.publish(Open, HalfOpen, p.Generation, at)
	delivered = true
}

func (b *Breaker) notify(from, to State, gen uint32, at time.Duration) {
	if b.dispatch != nil {
		b.dispatch.publish(from, to, gen, at)
	}
}

// State returns the current state. It is time-aware (R5): an open breaker
// whose open duration has elapsed reports HalfOpen although no call has
// arrived yet. It reads the clock only in open state and changes nothing.
func (b *Breaker) State() State {
	w := b.state.Load()
	s := State(w & stateMask)
	if s == Open && untilDeadline(w>>payShift&payMask, b.s.Clock.Now()) == 0 {
		return HalfOpen
	}
	return s
}

// Counts returns a snapshot; see Counts. It allocates nothing.
func (b *Breaker) Counts() Counts {
	w := b.state.Load()
	u := unpack(w)
	c := Counts{State: u.state, Generation: u.gen}
	switch u.state {
	case Closed:
		c.ConsecutiveFailures = u.payload
		var now time.Duration
		if b.buckets != nil {
			now = b.s.Clock.Now()
		}
		wc := b.windowCounts(u.gen, now)
		c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = wc.Calls, wc.Failures, wc.Slow, wc.SlowFailures
	case Open:
		if untilDeadline(u.payload, b.s.Clock.Now()) == 0 {
			c.State = HalfOpen
		}
	case HalfOpen:
		c.ProbesInFlight, c.ProbeSuccesses = int(u.inFlight), int(u.success)
	}
	return c
}

// deadline is the open-state payload: the first whole millisecond at or
// after now+d, mod 2^36. Rounding up keeps the open duration from being
// shortened by the coarser unit.
func deadline(now, d time.Duration) uint64 {
	return DeadlineMillis(now, d) % deadlineMod
}

// DeadlineMillis is the open deadline rule both implementations share: the
// first whole millisecond of the clock at or after now+d, with a negative
// reading counted as zero. It works in milliseconds so that no clock reading
// (up to 2^63-1 ns) and duration (up to a year) can overflow.
func DeadlineMillis(now, d time.Duration) uint64 {
	now = max(now, 0)
	ms := time.Millisecond
	return uint64(now/ms) + uint64(d/ms) + uint64((now%ms+d%ms+ms-1)/ms)
}

// untilDeadline is how long before a call at now may probe, or 0 if it may.
// The difference is taken mod 2^36 and read as signed, so it is exact for
// clock readings within 2^35 ms of the deadline; a reading that went
// backwards only makes the wait longer (R14).
func untilDeadline(dl uint64, now time.Duration) time.Duration {
	if now < 0 {
		now = 0
	}
	nowMs := uint64(now / time.Millisecond)
	diff := int64((dl-nowMs)%deadlineMod<<(64-payBits)) >> (64 - payBits)
	if diff <= 0 {
		return 0
	}
	return time.Duration(diff)*time.Millisecond - now%time.Millisecond
}
