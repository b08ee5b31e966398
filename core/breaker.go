package core

import (
	"sync"
	"time"
	"unsafe"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/cacheline"
	"github.com/casbreaker/casbreaker/internal/window/atomicring"
	"github.com/casbreaker/casbreaker/internal/window/buckets"
)

// Breaker is the lock-free circuit breaker. Its state, open deadline,
// backoff step, half-open probe counts and the low 20 bits of its 64-bit
// generation live in one uint64 that only compare-and-swap changes; a
// second word on the same cache line names the generation's other bits
// (docs/design.md has the layout and the proof). Its window is a
// lock-free atomic ring (count-based) or buckets of Config.BucketWidth, 1 s
// by default (time-based).
//
// All methods are safe for concurrent use and none blocks: no lock, no
// goroutine, no timer. One bounded wait is the exception: behind a
// Config.OpenGate, a call committing a trip that the gate refuses while
// another call of the breaker is asking for or holding a slot yields for
// up to 10 ms for it to finish (OpenGate). Transitions happen lazily inside Allow, Done, Record
// and Counts (which may commit a trip an outcome has already decided);
// State commits nothing of its own (it reports an elapsed open duration as
// half-open; the transition comes with the next Allow). A transition whose new word
// depends on the clock claims the word, reads the clock and commits; any
// method that finds a claimed word completes that transition first, with a
// reading of its own (docs/design.md, Transitions). Allow, Done and Record
// allocate nothing in any state.
//
// Make one with New. A zero Breaker has no configuration: every method
// panics with "core: Breaker used without New".
//
// Where the clock is read: Allow reads it in open state (to check the
// deadline, and once more after claiming open -> half-open when a max wait
// is set), while ramping up, when half-open is full (unless
// MaxWaitInHalfOpen is WaitForever), and, only with slow calls configured,
// to stamp a closed-state Permit.Start; Done/Record read it with slow calls
// configured, with a time-based window, and when committing a transition
// into open or into a ramp-up. With a count-based window and no slow
// threshold, the closed-state Allow/Done path reads no clock. Off that
// path, State and Counts read it in open state, and Counts in closed and
// metrics-only state with a time-based window.
type Breaker struct {
	// state is the state word: the whole state machine in one uint64 that
	// only compare-and-swap changes (state.go says why). stateWord's
	// accessors read its fields, word.packed writes them:
	//
	//	bits    width  field       meaning
	//	 0..2     3    state       Closed .. MetricsOnly; 6, 7: a claimed transition (state.go)
	//	 3..7     5    step        open-duration backoff step, 0..31; reset on close
	//	 8..43   36    payload     depends on state, see below
	//	44..63   20    generation  the breaker generation mod 2^20 (base
	//	                            holds what names the rest: state.go)
	//
	//	Closed:      bits 8..23 consecutive failures (saturating at 2^16-1);
	//	             bit 24 ramping up; bits 25..43 ramp-up deadline in coarse
	//	             units mod 2^19 (zero unless ramping)
	//	MetricsOnly: bits 8..23 consecutive failures; bits 24..43 zero
	//	Open:        deadline: the first millisecond of the breaker clock at
	//	             which a call may probe, mod 2^36
	//	HalfOpen:    bits 8..14 probes in flight, bits 15..21 probe successes,
	//	             bits 22..28 probe failures that did not re-open,
	//	             bits 29..43 max-wait deadline in coarse units mod 2^15
	//	             (zero when MaxWaitInHalfOpen is WaitForever)
	//	ForcedOpen, Disabled: zero
	//
	// First field, padded to its own cache line (8 + 8 bytes + the rest of
	// cacheline.Size), so it is 64-bit aligned for go.uber.org/atomic on
	// 32-bit platforms and shares its line only with base, which a reader
	// of the word loads beside it and which is written once per 2^16
	// transitions.
	state atomic.Uint64
	// base names the generation's bits above the word's 20 (state.go): a
	// generation that was current at some time, at most the current one and
	// less than 2^20 behind it. Only committed raises it, and only forward.
	base atomic.Uint64
	// What Reconfigure and the OpenGate's trips need, in the padding of
	// the state word's line, so that a breaker is no larger for them
	// (relay and slotAsks say what each is).
	relay
	slotAsks
	_ [cacheline.Size - 16 - unsafe.Sizeof(relay{}) - unsafe.Sizeof(slotAsks{})]byte

	cfg Settings
	// sysOrigin is the runtime-clock reading at the base of cfg.Clock when
	// that is a SystemClock (the default), which is then read by a direct,
	// inlined call rather than through the interface (readSystem); sysClock
	// says which (see now).
	sysOrigin int64
	sysClock  bool
	// slow: slow calls are measured, so permits carry Start. Beside
	// sysClock, so that the two bools share one word of padding: the
	// breaker is then 704 bytes on 64-bit platforms, one of the
	// allocator's size classes, and one word more would take it to the
	// next (768).
	slow     bool
	ring     *atomicring.Ring
	buckets  *buckets.Window
	dispatch *dispatcher
	metrics  *counters // nil unless Config.CollectMetrics
	// plainAllow: no slow calls and no metrics, so a closed-state Allow
	// has nothing to do but read the word (Allow's fast path).
	plainAllow bool
	// success is how Done takes a closed-state success (its fast paths),
	// chosen in New.
	success successPath
	// plainErrors: the default classifier, no retry-after hints, no
	// open-duration function (which needs the error at the trip), and a
	// window all there is to record in (successInRing or successInBuckets),
	// so Done takes a plain error's failure straight to the window.
	plainErrors bool
}

// relay is what Reconfigure needs of a breaker (reconfigure.go): next is
// the breaker that took over this one's state under new rules, plan the
// reconfiguration in progress, both stored once and loaded only by calls
// that find the word moving; reconfigs (how many breakers came before
// this one) is fixed when it is built; mu orders Reconfigure calls on the
// breaker New returned. Its size depends on the platform's pointers, so
// the padding after it is computed.
type relay struct {
	next      atomic.Pointer[Breaker]
	plan      atomic.Pointer[reconfiguration]
	reconfigs uint64
	mu        sync.Mutex
}

// slotAsks counts the calls committing a trip of this breaker that are
// asking Config.OpenGate for the trip's slot, or hold one that no
// committed transition has taken or given back yet (trip.go, reserveSlot):
// a call the gate refuses while the count is not zero may have been
// refused the slot that one of them holds for this very trip. asks points
// at own of the breaker New returned, which every breaker that takes over
// its state (Reconfigure) shares, since their trips of one generation are
// one trip. Written only on a trip's slow path, and only with a gate.
type slotAsks struct {
	own  atomic.Int32
	asks *atomic.Int32
}

// successPath is the way Done takes a success outside half-open.
type successPath uint8

const (
	// successRecorded: record decides; the only path with slow calls,
	// metrics or a run of consecutive failures to keep, and a zero
	// Breaker's, which record's mustBeNew stops.
	successRecorded successPath = iota
	// successIgnored: no window and nothing to time or count, so a success
	// that ends no run of failures changes nothing.
	successIgnored
	// successInRing and successInBuckets: a count or a time window is all
	// there is to record a success in.
	successInRing
	successInBuckets
)

// Counts is a snapshot of a breaker. Calls, Failures, SlowCalls and
// SlowFailures are the current window's (zero when no window is configured,
// and zero in open and half-open, whose generations start with an empty
// window);
// ConsecutiveFailures is the closed-state run of failures, tracked only when
// Config.ConsecutiveFailures is set; ProbesInFlight, ProbeSuccesses and
// ProbeFailures (the failures the generation tolerated, below
// Config.FailuresToReopen) are half-open's. State is time-aware like State() and, like
// it, reports an elapsed open duration as HalfOpen without committing the
// transition: Generation is then still the open one, and no probe is
// counted.
//
// A snapshot read while other goroutines record may not include outcomes
// still in flight, but it is never torn: 0 <= Failures <= Calls,
// SlowFailures <= min(SlowCalls, Failures), and for a count window
// Calls <= WindowSize.
type Counts struct {
	State               State
	Generation          uint64 // the breaker generation: transitions since New, as in Permit
	Calls               uint64
	Failures            uint64
	SlowCalls           uint64
	SlowFailures        uint64
	ConsecutiveFailures uint64
	ProbesInFlight      int
	ProbeSuccesses      int
	ProbeFailures       int
}

// New returns a breaker at generation 0, closed unless
// Config.InitialState says otherwise. It returns the errors of
// Config.Validate (each matching ErrInvalidConfig) and never panics.
func New(c Config) (*Breaker, error) {
	b, err := build(c)
	if err != nil {
		return nil, err
	}
	b.start(b.cfg.InitialState)
	return b, nil
}

// build is New's breaker before it is put in its initial state: what New
// and Restore share.
func build(c Config) (*Breaker, error) {
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	b := &Breaker{cfg: s, slow: s.slowEnabled()}
	b.asks = &b.own
	if c, ok := s.Clock.(SystemClock); ok {
		b.sysOrigin, b.sysClock = c.origin(), true
	}
	if b.ring, b.buckets, err = newWindow(&s); err != nil {
		return nil, err
	}
	if s.OnStateChange != nil {
		b.dispatch = newDispatcher(s.Name, s.Clock, s.OnStateChange)
	}
	if s.CollectMetrics {
		b.metrics = new(counters)
	}
	b.choosePaths()
	return b, nil
}

// newWindow makes the empty window that settings s configure: a count
// window, a time window, or neither.
func newWindow(s *Settings) (r *atomicring.Ring, w *buckets.Window, err error) {
	switch {
	case s.WindowSize == 0:
	case s.WindowType == TimeBased && s.BucketWidth == time.Second:
		w, err = buckets.New(s.WindowSize)
	case s.WindowType == TimeBased:
		// Narrow buckets count 32 bits of widths from an origin near the
		// clock's reading now, not from its base: 2^32 tenths of a second
		// from a base at the Unix epoch have passed.
		w, err = buckets.NewFrom(s.WindowSize, s.BucketWidth, s.Clock.Now())
	default:
		r, err = atomicring.New(s.WindowSize)
	}
	return r, w, err
}

// start puts New's breaker in state st at generation 0, with no
// transition: open for the open duration from a reading taken now, or
// half-open with no probe in flight and its max wait from that reading.
// Nothing else has the breaker yet, so a plain store does.
func (b *Breaker) start(st State) {
	b.acquireIf(Closed, st)
	var u word
	switch st {
	case Closed:
		return
	case Open:
		now := b.now()
		u = word{state: Open, deadline: deadline(now, b.cfg.jittered(b.cfg.openDuration(0), now, 0))}
	case HalfOpen:
		u = word{state: HalfOpen}
		if b.cfg.MaxWaitInHalfOpen != WaitForever { // no clock read without a max wait
			u.expiry = b.expiry(b.now())
		}
	default:
		u = word{state: st}
	}
	b.state.Store(uint64(u.packed()))
}

// choosePaths decides, once, which fast paths a breaker takes (New's, or a
// Reconfigure's successor): Allow's (plainAllow), a success's (success)
// and a plain error's (plainErrors, which needs the default classifier,
// told by its code: validated Settings never hold a nil one).
func (b *Breaker) choosePaths() {
	b.plainAllow = !b.slow && b.metrics == nil
	windowed := b.ring != nil || b.buckets != nil
	switch {
	case !b.plainAllow, windowed && b.cfg.ConsecutiveFailures != 0:
		b.success = successRecorded
	case !windowed:
		b.success = successIgnored
	case b.ring != nil:
		b.success = successInRing
	default:
		b.success = successInBuckets
	}
	b.plainErrors = isDefaultClassifier(b.cfg.Classifier) && b.cfg.MaxRetryAfter == 0 && b.cfg.OpenDurationFunc == nil && (b.success == successInRing || b.success == successInBuckets)
}

// now reads the breaker's clock. The default SystemClock is read by a
// direct call, inlined here: through the interface, every time-window
// outcome would pay an indirect call for its reading.
func (b *Breaker) now() time.Duration {
	if b.sysClock {
		return readSystem(b.sysOrigin)
	}
	return b.cfg.Clock.Now()
}

// Settings returns the validated settings the breaker runs with.
func (b *Breaker) Settings() Settings {
	b.mustBeNew()
	return b.latest().cfg
}

// noNew is what every method of a zero Breaker panics with.
const noNew = "core: Breaker used without New: a zero Breaker has no configuration; make one with core.New"

// mustBeNew panics with noNew when b is a zero Breaker: every Breaker that
// New returns has the clock of its validated Settings. The hot paths do not
// call it: a zero Breaker has neither plainAllow nor a success path other
// than successRecorded, so it never takes them, and the paths it does take
// check.
func (b *Breaker) mustBeNew() {
	if b.cfg.Clock == nil {
		panic(noNew)
	}
}
