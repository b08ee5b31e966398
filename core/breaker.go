package core

import (
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/cacheline"
	"github.com/casbreaker/casbreaker/window"
	"github.com/casbreaker/casbreaker/window/atomicring"
	"github.com/casbreaker/casbreaker/window/buckets"
)

// Breaker is the lock-free circuit breaker. Its state, open deadline,
// backoff step, half-open probe counts and the low 20 bits of its 64-bit
// generation live in one uint64 that only compare-and-swap changes; a
// second word on the same cache line names the generation's other bits
// (docs/design.md has the layout and the proof). Its window is a
// lock-free atomic ring (count-based) or per-second buckets (time-based).
//
// All methods are safe for concurrent use and none blocks: no lock, no
// goroutine, no timer. Transitions happen lazily inside Allow, Done, Record
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
	//	HalfOpen:    bits 8..15 probes in flight, bits 16..23 probe successes,
	//	             bits 24..43 max-wait deadline in coarse units mod 2^20
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
	_    [cacheline.Size - 16]byte

	cfg  Settings
	slow bool // slow calls are measured: permits carry Start
	// sysOrigin is the runtime-clock reading at the base of cfg.Clock when
	// that is a SystemClock (the default), which is then read by a direct,
	// inlined call rather than through the interface (readSystem); sysClock
	// says which (see now).
	sysOrigin int64
	sysClock  bool
	ring      *atomicring.Ring
	buckets   *buckets.Window
	dispatch  *dispatcher
	metrics   *counters // nil unless Config.CollectMetrics
	// plainAllow: no slow calls and no metrics, so a closed-state Allow
	// has nothing to do but read the word (Allow's fast path).
	plainAllow bool
	// success is how Done takes a closed-state success (its fast paths),
	// chosen in New.
	success successPath
	// plainErrors: the default classifier, no retry-after hints, and a
	// window all there is to record in (successInRing or successInBuckets),
	// so Done takes a plain error's failure straight to the window.
	plainErrors bool
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
// Config.ConsecutiveFailures is set; ProbesInFlight and
// ProbeSuccesses are half-open's. State is time-aware like State() and, like
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
}

// New returns a closed breaker at generation 0. It returns the errors of
// Config.Validate (each matching ErrInvalidConfig) and never panics.
func New(c Config) (*Breaker, error) {
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	b := &Breaker{cfg: s, slow: s.slowEnabled()}
	if c, ok := s.Clock.(SystemClock); ok {
		b.sysOrigin, b.sysClock = c.origin(), true
	}
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
		b.dispatch = newDispatcher(s.Name, s.Clock, s.OnStateChange)
	}
	if s.CollectMetrics {
		b.metrics = new(counters)
	}
	b.choosePaths(c.Classifier == nil)
	return b, nil
}

// choosePaths decides, once, which fast paths New's breaker takes: Allow's
// (plainAllow), a success's (success) and a plain error's (plainErrors,
// which needs the default classifier: defaultClassifier).
func (b *Breaker) choosePaths(defaultClassifier bool) {
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
	b.plainErrors = defaultClassifier && b.cfg.MaxRetryAfter == 0 && (b.success == successInRing || b.success == successInBuckets)
}

// now reads the breaker's clock. The default SystemClock is read by a
// direct call, inlined here: through the interface, the reading that a
// time-window outcome needs cost about 2 ns more (docs/benchmarks.md).
func (b *Breaker) now() time.Duration {
	if b.sysClock {
		return readSystem(b.sysOrigin)
	}
	return b.cfg.Clock.Now()
}

// Settings returns the validated settings the breaker runs with.
func (b *Breaker) Settings() Settings {
	b.mustBeNew()
	return b.cfg
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

// Allow asks to make one call. It returns a Permit, or a rejection that
// matches ErrRejected and one reason with errors.Is: ErrOpen,
// ErrHalfOpenFull, ErrForcedOpen or ErrRampingUp; the rejection's
// Permit.Wait and its RetryAfter (RetryAfterOf) say when to try again. In
// open state, the first call at or after
// the deadline moves the breaker to half-open and is one of its probes.
// Disabled and MetricsOnly admit every call.
func (b *Breaker) Allow() (Permit, error) {
	// Closed, not ramping up, nothing to time or count: the hot path, kept
	// apart from the rest of Allow's frame: base and the word (one cache
	// line), the plainAllow flag, no write. base is loaded first: a permit
	// granted on a word is then named by a base no newer than the word
	// (docs/design.md). Naming it costs the load of base and three ALU
	// operations (fullGen): 4 of about 24 instructions.
	base := b.base.Load()
	if w := b.peek(); w.plainClosed() && b.plainAllow {
		return Permit{Generation: fullGen(base, w)}, nil
	}
	return b.allow()
}

// allow is Allow past its fast path. A closed admission and an open
// rejection stay inline here, a call cheaper than in functions of their
// own (an open rejection measured 3% slower in one); half-open, and
// metrics-only and disabled admissions, have their own.
func (b *Breaker) allow() (Permit, error) {
	for {
		// base before the word, as in Allow: the paths that admit without
		// a swap name the permit from them.
		base := b.base.Load()
		w := b.peek()
		gen := fullGen(base, w)
		switch w.state() {
		case Closed:
			if w.ramping() {
				return b.allowRamping(w, gen)
			}
			// A zero Breaker, never built by New, fails the fast path's
			// plainAllow test and always arrives here.
			b.mustBeNew()
			// The hot path: no write, no clock unless slow calls are measured.
			p := Permit{Generation: gen}
			if b.slow {
				if p.Start = b.now(); !b.unmoved(w) {
					continue
				}
			}
			b.countAdmitted()
			return p, nil
		case Open:
			now := max(b.now(), 0)
			if wait := untilDeadline(w.deadline(), now); wait > 0 {
				if b.peek() != w {
					// A transition (a manual control) came between the
					// load and the reading: the rejection and its wait
					// must come from one word at one reading.
					continue
				}
				return b.reject(Permit{Wait: wait}, rejectOpen)
			}
			// open -> half-open: a successful swap hands this caller the
			// first probe slot of the new generation; losers reload and
			// compete for the remaining slots.
			if p, ok := b.startProbing(w, w.fields(), gen, now); ok {
				return p, nil
			}
		case HalfOpen:
			if p, decided, err := b.allowHalfOpen(w, gen); decided {
				return p, err
			}
		case ForcedOpen:
			return b.reject(Permit{}, rejectForcedOpen)
		case claimOpen, claimOther:
			b.help(w)
		default: // Disabled, MetricsOnly
			if p, ok := b.admitUnchanged(w, gen); ok {
				return p, nil
			}
		}
	}
}

// admitUnchanged admits a call on the metrics-only or disabled word w of
// generation gen, with no write to the word. Where slow calls are measured
// (metrics-only, with a slow-call threshold) it reads the clock for
// Permit.Start and reports false, admitting nothing, if the word moved
// before the reading.
func (b *Breaker) admitUnchanged(w stateWord, gen uint64) (Permit, bool) {
	p := Permit{Generation: gen}
	if b.slow && w.state() == MetricsOnly {
		if p.Start = b.now(); !b.unmoved(w) {
			return Permit{}, false
		}
	}
	b.countAdmitted()
	return p, true
}

// allowHalfOpen is Allow on the half-open word w of generation gen: a
// probe slot while one is free, else a rejection until the max wait has
// passed, then the first probe of a new half-open generation. decided is
// false when the word moved and the caller reloads.
func (b *Breaker) allowHalfOpen(w stateWord, gen uint64) (p Permit, decided bool, err error) {
	u := w.fields()
	if int(u.inFlight) < b.cfg.PermittedCallsInHalfOpen &&
		int(u.inFlight)+int(u.success) < b.cfg.SuccessesToClose {
		u.inFlight++
		// half-open -> half-open with one more probe in flight: a
		// successful swap is the caller's probe slot (R6). A probe carries
		// no Start: nothing measures its duration.
		if !b.cas(w, u.packed()) {
			return Permit{}, false, nil
		}
		b.countAdmitted()
		return Permit{Generation: gen, Probe: true}, true, nil
	}
	if b.cfg.MaxWaitInHalfOpen == WaitForever {
		p, err = b.reject(Permit{Wait: b.cfg.HalfOpenFullWait}, rejectHalfOpenFull)
		return p, true, err
	}
	now := max(b.now(), 0)
	if wait, expired := b.halfOpenFullWait(u, now); !expired {
		if b.peek() != w {
			// A probe's outcome (or any transition) came between the load
			// and the clock reading: the rejection and its wait must come
			// from one word at one reading, so decide again.
			return Permit{}, false, nil
		}
		p, err = b.reject(Permit{Wait: wait}, rejectHalfOpenFull)
		return p, true, err
	}
	// half-open -> half-open: the max wait passed without a verdict. A
	// successful swap starts a new generation, whose first probe this
	// caller holds; the lost probes' permits are stale from here on (R8).
	p, decided = b.startProbing(w, u, gen, now)
	return p, decided, nil
}

// startProbing commits the word w (unpacked u, open or half-open, of
// generation gen), which the caller found ready to probe at reading now, to
// a new half-open generation whose first probe the caller holds, and admits
// that probe. It reports false when the swap lost, and the caller reloads.
// With a max wait the new word's deadline comes from the clock, so the
// transition is claimed first and the deadline read after the claim
// (commit); without one nothing in the new word depends on the reading and
// one swap does.
func (b *Breaker) startProbing(w stateWord, u word, gen uint64, now time.Duration) (Permit, bool) {
	g := gen + 1
	if b.cfg.halfOpenWait.unit == 0 {
		if !b.cas(w, word{state: HalfOpen, step: u.step, gen: lowGen(g), inFlight: 1}.packed()) {
			return Permit{}, false
		}
	} else {
		var ok bool
		if now, ok = b.commit(w, claimHalfOpen(u.step, lowGen(g))); !ok {
			return Permit{}, false
		}
		now = max(now, 0) // as the caller's reading: a negative one counts as zero
	}
	return b.admitProbe(u.state, Permit{Generation: g, Probe: true}, now), true
}

// unmoved reports whether the state word still has the state, generation
// and ramp-up flag of w: a closed or metrics-only Allow that read the clock
// after loading w then decided on w at that reading.
func (b *Breaker) unmoved(w stateWord) bool {
	return b.peek().sameIn(w, stateRampAndGen)
}

// allowRamping is Allow in closed state during the ramp-up after closing,
// on word w of generation gen.
func (b *Breaker) allowRamping(w stateWord, gen uint64) (Permit, error) {
	now := b.now()
	u := w.fields()
	if left := signedDiff(uint64(u.rampEnd), b.cfg.rampUnits(now), rampBits); !b.cfg.rampOver(left) {
		if !b.unmoved(w) {
			// A transition came between the load and the reading: decide
			// again, so the decision is one word's at one reading.
			return b.Allow()
		}
		if !b.cfg.rampAdmits(uint64(left), now) {
			return b.reject(Permit{}, rejectRampingUp)
		}
	} else {
		// The ramp is over. Clearing its flag (closed -> closed, same
		// generation) lets later calls skip the clock; a lost swap means the
		// word moved, and the call decides again from the new one.
		u.ramping, u.rampEnd = false, 0
		if !b.cas(w, u.packed()) {
			return b.Allow()
		}
	}
	b.countAdmitted()
	return Permit{Generation: gen, Start: b.startIf(now)}, nil
}

// countAdmitted counts an admitted call in Metrics.
func (b *Breaker) countAdmitted() {
	if b.metrics != nil {
		b.metrics.admitted.Inc()
	}
}

// reject counts a rejection for reason (rejectOpen and the rest) and
// returns it.
func (b *Breaker) reject(p Permit, reason int) (Permit, error) {
	if b.metrics != nil {
		b.metrics.rejected(reason)
	}
	var err error
	switch reason {
	case rejectOpen:
		err = boundRejection[openReason]{b}
	case rejectHalfOpenFull:
		err = boundRejection[halfOpenFullReason]{b}
	case rejectForcedOpen:
		err = boundRejection[forcedOpenReason]{b}
	default:
		err = boundRejection[rampingUpReason]{b}
	}
	return p, err
}

// halfOpenFullWait is the wait of an ErrHalfOpenFull rejection on the full
// half-open word u at reading now (not negative), with a max wait on:
// HalfOpenFullWait, or the time left of the max wait if that is shorter;
// expired reports that the max wait has passed instead (the caller may
// start a new probe generation).
func (b *Breaker) halfOpenFullWait(u word, now time.Duration) (wait time.Duration, expired bool) {
	left := signedDiff(uint64(u.expiry), b.cfg.halfOpenUnits(now), expiryBits)
	if b.cfg.halfOpenExpired(left) {
		return 0, true
	}
	// left is 1 .. span+1 units: the wait is positive.
	unit := b.cfg.halfOpenWait.unit
	return min(time.Duration(left)*unit-now%unit, b.cfg.HalfOpenFullWait), false
}

// retryAfter is what a rejection's RetryAfter reports: how long from now
// until the breaker may admit a call, from one word at one reading.
func (b *Breaker) retryAfter() time.Duration {
	for {
		w := b.load()
		var wait time.Duration
		switch w.state() {
		case Open:
			wait = untilDeadline(w.deadline(), b.now())
		case HalfOpen:
			u := w.fields()
			if int(u.inFlight) < b.cfg.PermittedCallsInHalfOpen && int(u.inFlight)+int(u.success) < b.cfg.SuccessesToClose {
				return 0 // a probe slot is free
			}
			if b.cfg.MaxWaitInHalfOpen == WaitForever {
				return b.cfg.HalfOpenFullWait
			}
			wait, _ = b.halfOpenFullWait(u, max(b.now(), 0))
		default:
			return 0
		}
		if b.peek() == w {
			return wait
		}
	}
}

// expiry is the half-open max-wait deadline of a generation starting at now
// (zero when the max wait is off: WaitForever).
func (b *Breaker) expiry(now time.Duration) uint32 {
	return uint32(b.cfg.halfOpenDeadline(now) & expiryMask)
}

func (b *Breaker) startIf(now time.Duration) time.Duration {
	if b.slow {
		return now
	}
	return 0
}

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
	// less measured 1 to 2 ns of a count- or time-window success
	// (docs/benchmarks.md). Record(p, Success) comes here too.
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
				b.countDropped()
			case trips:
				b.finishTrip(p.Generation) // as record does on a time window
			}
			return
		}
	}
	b.mustBeNew() // a zero Breaker takes successRecorded
	b.record(p, Success)
}

// doneError is Done for an error. The default classification of a plain
// error, with no Is and no Unwrap method, runs no code of the caller's: on
// a breaker whose window is all it records, its failure goes to the
// window's path at once, without recordError's deferred release, its
// indirect call and Record.
func (b *Breaker) doneError(p Permit, err error) {
	if b.plainErrors && !p.Probe && plainFailure(err) {
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

// counting reports whether s counts outcomes in a window.
func counting(s State) bool { return s == Closed || s == MetricsOnly }

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
	b.record(p, o)
}

// ofWord reports whether breaker generation gen is the generation of word
// w, which the caller loaded before this call: the word's field holds gen's
// low 20 bits and gen is in [base, base+2^20) for base as it is now. If the
// word's generation is still current, base (loaded after it) trails it by
// the lag, so a current gen passes; a gen k*2^20 older (k >= 1) is below
// base, and one k*2^20 newer is 2^20 or more above it, so neither does
// (docs/design.md). A caller that acts on the answer does so with a swap on
// w, which fails if the word moved.
func (b *Breaker) ofWord(w stateWord, gen uint64) bool {
	return w.genField() == gen&genMask && gen-b.base.Load() < genSpan
}

// closedOf reports whether word w, which the caller loaded, is closed with
// no run of failures (closedNoRun) and of breaker generation gen (ofWord):
// the fast paths' one test. closedNoRun's comparison of the low 20 bits
// is ofWord's first, so only ofWord's bound on base is added.
func (b *Breaker) closedOf(w stateWord, gen uint64) bool {
	// Both tests are zero when they pass, so one test of their OR decides:
	// with && the result was a materialized bool, five instructions more.
	return uint64((w^stateWord(gen<<genShift))&noRunMask)|(gen-b.base.Load())>>genBits == 0
}

// genOf is the breaker generation of word w, which the caller loaded before
// this call and will swap: exact whenever that swap succeeds, because the
// word, and so base's bound on it, did not move in between.
func (b *Breaker) genOf(w stateWord) uint64 { return fullGen(b.base.Load(), w) }

// recordRingOutcome records a success or a failure o on a breaker whose
// only state to keep is its count window (successInRing): one claim on the
// ring. What it cannot take (a run of failures to end, a stale or a very
// old generation) it leaves to record, with nothing recorded.
//
// It and the time window's paths (Done's, recordBucketsFailure) repeat
// recordInRing's and recordInBuckets' window writes on purpose: one shared
// function for both, called from here, measured 7% slower on a count
// window and 5.5% on a time window (pinned A/B runs, 10 each, p=0.000),
// the cost of the extra call these paths exist to avoid.
func (b *Breaker) recordRingOutcome(p Permit, o Outcome) {
	if !b.closedOf(b.peek(), p.Generation) {
		b.mustBeNew()
		b.record(p, o)
		return
	}
	switch b.ring.Claim(uint32(p.Generation), o == Failure, false, &b.cfg.rule) {
	case atomicring.Recorded:
	case atomicring.Tripped, atomicring.AfterTrip:
		// This outcome's trip, or another's that came first (then this
		// one is stale): commit it, as record does.
		b.finishTrip(p.Generation)
	default:
		b.record(p, o) // Stale: nothing was recorded; record decides
	}
}

// recordBucketsFailure is Done's success path on a time window, for a
// failure: where a time
// window is all there is to record in (successInBuckets), a failure has
// nothing to keep but its window write and the trip that may follow.
func (b *Breaker) recordBucketsFailure(p Permit) {
	if !b.closedOf(b.peek(), p.Generation) {
		b.mustBeNew()
		b.record(p, Failure)
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
		b.countDropped()
		return
	}
	if trips {
		b.finishTrip(p.Generation)
	}
}

// record is Record past its fast paths. A success or failure outside
// half-open is recorded in the sliding window, if there is one, then in the
// run of consecutive failures, and trips the breaker when the window rule
// fired or the run reached Config.ConsecutiveFailures. Why it is long: the
// run's loop stays in this frame because in a function of its own it made a
// failure-heavy consecutive-failures breaker 10 to 18% slower (ClosedMixed,
// 80 A/B rounds, p < 0.03).
//
// With a count window, the ring closed this generation's window in the
// swap that added the outcome, so the record and the trip are one step to
// every observer (Counts, other recorders help commit it). With a time
// window, the rule was judged on the window as this outcome's own write
// left it: the outcome that made the rule hold trips the breaker (R1), even
// if records that landed since would not (docs/design.md, Known limits).
func (b *Breaker) record(p Permit, o Outcome) {
	if o > Ignored {
		o = Failure // an Outcome no classifier should return: the safe side
	}
	if p.Probe {
		b.recordProbe(p, o)
		return
	}
	if o == Ignored {
		b.recordIgnored(p.Generation)
		return
	}
	w := b.load()
	if !w.counting() || !b.ofWord(w, p.Generation) {
		b.countDropped()
		return
	}
	trips, more := false, true
	var c deferredCount // counted by the window write, if there is one
	switch {
	case b.ring != nil:
		trips, more = b.recordInRing(p, o)
	case b.buckets != nil:
		trips, more = b.recordInBuckets(p, o)
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
			if b.trip(w, p.Generation, 0, c) {
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
		w = b.load()
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
func (b *Breaker) recordInRing(p Permit, o Outcome) (trips, more bool) {
	gen, fail := uint32(p.Generation), o == Failure
	slow := b.slow && b.cfg.isSlow(b.now()-p.Start)
	v := b.ring.RecordOutcome(gen, fail, slow, &b.cfg.rule)
	for ; v == atomicring.Stale; v = b.ring.RecordOutcome(gen, fail, slow, &b.cfg.rule) {
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
		b.finishTrip(p.Generation)
		return false, false
	}
	b.countOutcome(o, slow)
	trips = v == atomicring.Tripped
	return trips, trips || b.cfg.ConsecutiveFailures != 0
}

// recordInBuckets is recordInRing for the time window, with one clock
// reading for the outcome's second and its duration. The judgement is O(1)
// but for about one outcome a second (buckets.Window.RecordTrip).
func (b *Breaker) recordInBuckets(p Permit, o Outcome) (trips, more bool) {
	now := b.now()
	slow := b.slow && b.cfg.isSlow(now-p.Start)
	// A drop is final: the outcome's generation is stale, or its second
	// left the window while it was recorded. (Taking the bucket over for
	// a generation that was current a moment before would wipe a
	// successor's second; Advance's sweeps keep any current bucket from
	// reading as newer, so no takeover is needed.)
	recorded, trips := b.buckets.RecordTrip(uint32(p.Generation), now, o == Failure, slow, &b.cfg.rule)
	if !recorded {
		b.countDropped()
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
	b.finishTrip(gen)
	return true
}

// finishTrip commits the trip of counting generation gen whose window has
// decided it (a count window a RecordTrip has closed, or a time window whose
// Snapshot trips the rule), unless the state word has moved on already.
func (b *Breaker) finishTrip(gen uint64) {
	for {
		w := b.load()
		if !w.counting() || !b.ofWord(w, gen) || b.trip(w, gen, 0, deferredCount{}) {
			return
		}
	}
}

// trip commits the trip of the counting generation gen whose word was w
// (the caller checked it with ofWord):
// closed -> open for an open duration of at least hint, or, in
// MetricsOnly, MetricsOnly -> MetricsOnly ("would have opened": a fresh
// generation and window, and nothing rejected). It reports whether the swap
// won; a lost swap means the caller reloads.
//
// c is the outcome to count once the swap wins, before the notification
// goes out, so a listener never sees a transition without the outcome that
// caused it.
func (b *Breaker) trip(w stateWord, gen uint64, hint time.Duration, c deferredCount) bool {
	g := gen + 1
	if w.state() == MetricsOnly {
		if !b.cas(w, word{state: MetricsOnly, gen: lowGen(g)}.packed()) {
			return false
		}
		b.countDeferred(c)
		b.notify(MetricsOnly, MetricsOnly, g, b.clockIfListening(), b.tripReasonIfListening(gen, hint))
		return true
	}
	// closed -> open: a successful claim is the one trip of this
	// generation; every other recorder of the old generation becomes
	// stale and the window is abandoned with it (R8, R11).
	now, ok := b.commit(w, b.claimOpen(0, lowGen(g), hint))
	if !ok {
		return false
	}
	b.countDeferred(c)
	b.notifyOpen(Closed, g, now, b.tripReasonIfListening(gen, hint), b.cfg.openDurationHinted(0, hint))
	return true
}

// peek returns the state word as it is, claimed or not; load is for a
// caller that decides on it.
func (b *Breaker) peek() stateWord { return stateWord(b.state.Load()) }

// cas swaps the state word from old to n, and reports whether it did.
func (b *Breaker) cas(old, n stateWord) bool {
	return b.state.CompareAndSwap(uint64(old), uint64(n))
}

// load returns the state word, first completing any transition that
// another call has claimed (help): no decision is made on a claimed word.
func (b *Breaker) load() stateWord {
	for {
		w := b.peek()
		if !w.claimed() {
			return w
		}
		b.help(w)
	}
}

// commit makes the transition from w whose claim is c: it swaps w for c,
// reads the clock, and swaps c for the word c settles to at that reading. It
// reports the reading and true once the claim won, whether its own commit
// or another call's help completed it; false when the claim lost (the word
// moved), and the caller reloads.
func (b *Breaker) commit(w, c stateWord) (time.Duration, bool) {
	if !b.cas(w, c) {
		return 0, false
	}
	now := b.now()
	b.cas(c, b.settle(c, now))
	return now, true
}

// help completes the transition claimed in c with a reading of the clock
// taken now, after the claim, unless another call completed it first.
func (b *Breaker) help(c stateWord) {
	b.cas(c, b.settle(c, b.now()))
}

// settle is the word that the claim c commits at clock reading now.
func (b *Breaker) settle(c stateWord, now time.Duration) stateWord {
	step, gen := c.step(), uint32(c.genField())
	ms, explicit := c.explicitMillis()
	if c.state() == claimOpen {
		d := b.cfg.openDuration(step)
		if explicit {
			d = time.Duration(ms) * time.Millisecond
		}
		return word{state: Open, step: step, gen: gen, deadline: deadline(now, d)}.packed()
	}
	if explicit {
		return word{state: Closed, gen: gen, ramping: true, rampEnd: uint32(b.cfg.rampDeadline(now) & rampMask)}.packed()
	}
	return word{state: HalfOpen, step: step, gen: gen, inFlight: 1, expiry: b.expiry(now)}.packed()
}

// claimOpen is the claim of a trip or re-open to generation gen at backoff
// step with the bounded hint h: for the step's open duration, or for the
// hint, rounded up to whole milliseconds, if that is longer
// (openDurationHinted).
func (b *Breaker) claimOpen(step uint8, gen uint32, h time.Duration) stateWord {
	if h = wholeMillis(h); h > b.cfg.openDuration(step) {
		return b.claimOpenFor(step, gen, h)
	}
	return claimOpenStep(step, gen)
}

// claimOpenFor is the claim of a transition to Open at step and generation
// gen for d (at most MaxOpenDurationLimit), rounded up to whole
// milliseconds.
func (b *Breaker) claimOpenFor(step uint8, gen uint32, d time.Duration) stateWord {
	ms := uint64(wholeMillis(d) / time.Millisecond)
	return claimOpenMillis(step, gen, ms)
}

// RecordHint records a failure for p that carries the dependency's
// retry-after hint: bounded by Config.MaxRetryAfter, it trips a closed
// breaker at once (MetricsOnly: "would have opened") or re-opens a
// half-open one, for the longer of the configured open duration and the
// hint, which is kept in whole milliseconds, rounded up (as ForceOpen's
// duration). With hints off or a hint of zero or less it is
// Record(p, Failure). A stale permit changes nothing.
func (b *Breaker) RecordHint(p Permit, retryAfter time.Duration) {
	h := b.cfg.hint(retryAfter)
	if h == 0 {
		b.Record(p, Failure)
		return
	}
	for {
		w := b.load()
		u := w.fields()
		switch {
		case !b.ofWord(w, p.Generation):
		case !p.Probe && counting(u.state):
			if b.tripPending(u, p.Generation) {
				continue // this hint comes after that trip: stale
			}
			if b.trip(w, p.Generation, h, deferredCount{o: Failure, due: true}) {
				return
			}
			continue
		case p.Probe && u.state == HalfOpen && u.inFlight > 0:
			if b.reopen(w, u, p.Generation, h) {
				return
			}
			continue
		}
		b.countDropped()
		return
	}
}

// reopen commits half-open -> open for the half-open word w (unpacked u,
// of generation gen, checked by the caller with ofWord):
// the first failure of the generation re-opens with the next backoff step,
// for at least hint; later failures of the same generation are stale (R7,
// B12, B29). It reports whether the swap won, and counts the failure before
// notifying.
func (b *Breaker) reopen(w stateWord, u word, gen uint64, hint time.Duration) bool {
	g := gen + 1
	step := b.cfg.nextStep(u.step)
	t, ok := b.commit(w, b.claimOpen(step, lowGen(g), hint))
	if !ok {
		return false
	}
	b.countOutcome(Failure, false)
	why := ReasonProbeFailed
	if hint > 0 {
		why = ReasonRetryAfter // the dependency's own word is the more telling reason
	}
	b.notifyOpen(HalfOpen, g, t, why, b.cfg.openDurationHinted(step, hint))
	return true
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

// current reports whether gen is the generation of a counting breaker
// (closed or metrics-only) now. The windows compare only the low bits of
// generations and ask this when their own arithmetic says an outcome is
// stale.
func (b *Breaker) current(gen uint64) bool {
	w := b.load()
	return w.counting() && b.ofWord(w, gen)
}

func (b *Breaker) recordProbe(p Permit, o Outcome) {
	for {
		w := b.load()
		u := w.fields()
		if u.state != HalfOpen || !b.ofWord(w, p.Generation) || u.inFlight == 0 {
			b.countDropped()
			return
		}
		u.inFlight--
		switch o {
		case Ignored:
			// half-open -> half-open with the slot returned (R9, B05).
			if b.cas(w, u.packed()) {
				b.countOutcome(Ignored, false)
				return
			}
		case Success:
			if int(u.success)+1 < b.cfg.SuccessesToClose {
				u.success++
				if b.cas(w, u.packed()) {
					b.countOutcome(Success, false)
					return
				}
				continue
			}
			g := p.Generation + 1
			// half-open -> closed: the swap that counts the last needed
			// success; every probe still in flight becomes stale (R7, R8).
			// A ramp-up's deadline comes from the clock: claimed first,
			// read after the claim.
			if b.cfg.RampUpDuration > 0 {
				if t, ok := b.commit(w, claimRampUp(lowGen(g))); ok {
					b.countOutcome(Success, false)
					b.notify(HalfOpen, Closed, g, t, ReasonProbesPassed)
					return
				}
				continue
			}
			t := b.clockIfListening()
			if b.cas(w, word{state: Closed, gen: lowGen(g)}.packed()) {
				b.countOutcome(Success, false)
				b.notify(HalfOpen, Closed, g, t, ReasonProbesPassed)
				return
			}
		default:
			if b.reopen(w, u, p.Generation, 0) {
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
	return b.now()
}

// admitProbe counts and announces from -> half-open, whose caller holds
// probe p, and returns p. The listener runs before Allow can return p: if it
// panics, p is released as Ignored so the slot does not leak (R10), and the
// panic goes on.
func (b *Breaker) admitProbe(from State, p Permit, at time.Duration) Permit {
	b.committed(from, HalfOpen, p.Generation)
	b.countAdmitted()
	if b.dispatch == nil {
		return p
	}
	delivered := false
	defer func() {
		if !delivered {
			b.Record(p, Ignored)
		}
	}()
	why := ReasonOpenDurationElapsed
	if from == HalfOpen {
		why = ReasonMaxWaitInHalfOpen
	}
	b.dispatch.publish(from, HalfOpen, p.Generation, at, why, 0)
	delivered = true
	return p
}

func (b *Breaker) notify(from, to State, gen uint64, at time.Duration, why Reason) {
	b.committed(from, to, gen)
	if b.dispatch != nil {
		b.dispatch.publish(from, to, gen, at, why, 0)
	}
}

// notifyOpen is notify for a transition into Open committed at reading at
// for the open duration d: the notification's OpenUntil is the deadline
// the commit set, computed the same way (deadlineMillis).
func (b *Breaker) notifyOpen(from State, gen uint64, at time.Duration, why Reason, d time.Duration) {
	b.committed(from, Open, gen)
	if b.dispatch != nil {
		until := time.Duration(deadlineMillis(at, d)) * time.Millisecond
		b.dispatch.publish(from, Open, gen, at, why, until)
	}
}

// tripReasonIfListening is tripReason when someone will see it, and 0
// otherwise, so that a breaker without a listener pays nothing for it.
func (b *Breaker) tripReasonIfListening(gen uint64, h time.Duration) Reason {
	if b.dispatch == nil {
		return 0
	}
	return b.tripReason(gen, h)
}

// committed does what follows every committed transition to generation gen
// before it is announced, and before any user code (listener, clock) can
// run on the committing goroutine: raise base once it trails gen by 2^16
// (so that it trails the current generation by less than 2^20: state.go),
// count the transition, and advance the count ring to gen, so that the
// ring's 16-bit generation never falls 2^16 behind the word's and a window
// from 65,536 transitions ago cannot pass for the new closed period's, or
// report gen to the time buckets, whose sweep (every 2^22 generations)
// keeps a bucket from 2^24 transitions ago from passing for one of gen's.
func (b *Breaker) committed(from, to State, gen uint64) {
	if d := gen - b.base.Load(); d >= baseStep && d < 1<<63 {
		b.raiseBase(gen)
	}
	if b.metrics != nil {
		b.metrics.transitions[from][to].Inc()
	}
	switch {
	case b.ring != nil:
		b.ring.Advance(uint32(gen))
	case b.buckets != nil:
		b.buckets.Advance(uint32(gen))
	}
}

// raiseBase moves base forward to gen, a generation this goroutine
// committed, unless another committer moved it there or further already.
// base only ever moves forward ("further" is serial arithmetic on 64 bits,
// exact because every value it compares is within 2^20 of the current
// generation).
func (b *Breaker) raiseBase(gen uint64) {
	for {
		old := b.base.Load()
		if d := gen - old; d == 0 || d >= 1<<63 || b.base.CompareAndSwap(old, gen) {
			return
		}
	}
}

// ForceOpen moves the breaker, from any state, to ForcedOpen when d is 0
// (every call rejected with ErrForcedOpen until another manual control), or
// to Open for d when d > 0 (then half-open and probes as after a trip, with
// the backoff step reset; d is kept in whole milliseconds, rounded up, like
// every open duration). It commits one transition and emits one
// notification, even when the breaker was already there. It returns an
// error matching ErrInvalidArgument, and changes nothing, when d is
// negative or above MaxOpenDurationLimit.
func (b *Breaker) ForceOpen(d time.Duration) error {
	b.mustBeNew()
	if err := checkForceOpen(d); err != nil {
		return err
	}
	if d == 0 {
		b.command(word{state: ForcedOpen}, b.clockIfListening())
		return nil
	}
	// Open for d from a reading taken after the claim (commit).
	b.control(Open, wholeMillis(d), func(w stateWord, g uint32) (time.Duration, bool) {
		return b.commit(w, b.claimOpenFor(0, g, d))
	})
	return nil
}

// Disable moves the breaker, from any state, to Disabled: every call is
// admitted and no outcome recorded, until another manual control. One
// transition, one notification.
func (b *Breaker) Disable() { b.command(word{state: Disabled}, b.clockIfListening()) }

// MetricsOnly moves the breaker, from any state, to MetricsOnly with a fresh
// window: every call is admitted, outcomes are counted, and where the trip
// rule holds the breaker notifies MetricsOnly -> MetricsOnly instead of
// opening. One transition, one notification.
func (b *Breaker) MetricsOnly() { b.command(word{state: MetricsOnly}, b.clockIfListening()) }

// Reset moves the breaker, from any state, to Closed with a fresh window,
// no backoff and no ramp-up. One transition, one notification.
func (b *Breaker) Reset() { b.command(word{state: Closed}, b.clockIfListening()) }

// command commits a manual control: whatever the breaker was doing, the
// next generation is n, notified as at.
func (b *Breaker) command(n word, at time.Duration) {
	b.control(n.state, 0, func(w stateWord, g uint32) (time.Duration, bool) {
		n.gen = g
		return at, b.cas(w, n.packed())
	})
}

// control commits a manual control to state to: move swaps the word w for
// the next generation's (g, its low bits) and reports the transition's time
// and whether the swap won; a lost one is tried again from a new load. Every
// permit of the old generation becomes stale (R8).
func (b *Breaker) control(to State, openFor time.Duration, move func(w stateWord, g uint32) (time.Duration, bool)) {
	b.mustBeNew()
	for {
		w := b.load()
		u := w.fields()
		gen := b.genOf(w)
		if b.tripPending(u, gen) {
			continue // the control comes after that trip
		}
		g := gen + 1
		if t, ok := move(w, lowGen(g)); ok {
			if to == Open {
				b.notifyOpen(u.state, g, t, ReasonManual, openFor)
			} else {
				b.notify(u.state, to, g, t, ReasonManual)
			}
			return
		}
	}
}

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
					b.finishTrip(c.Generation)
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
				b.finishTrip(c.Generation)
				continue
			}
			c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = wc.Calls, wc.Failures, wc.Slow, wc.SlowFailures
		case Open:
			if untilDeadline(u.deadline, b.now()) == 0 {
				c.State = HalfOpen
			}
			if b.peek() != w {
				continue // a transition came between the load and the reading
			}
		case HalfOpen:
			c.ProbesInFlight, c.ProbeSuccesses = int(u.inFlight), int(u.success)
		}
		return c
	}
}

// deadline is the open-state payload: the first whole millisecond at or
// after now+d, mod 2^36. Rounding up keeps the open duration from being
// shortened by the coarser unit.
func deadline(now, d time.Duration) uint64 {
	return deadlineMillis(now, d) % deadlineMod
}

// deadlineMillis is the open deadline rule: the first whole millisecond of
// the clock at or after now+d, with a negative reading counted as zero. It
// works in milliseconds so that no clock reading (up to 2^63-1 ns) and
// duration (up to a year) can overflow.
func deadlineMillis(now, d time.Duration) uint64 { return ceilUnits(now, d, time.Millisecond) }

// untilDeadline is how long before a call at now may probe, or 0 if it may.
// The difference is taken mod 2^36 and read as signed, so it is exact for
// clock readings within 2^35 ms of the deadline; a reading that went
// backwards only makes the wait longer (R14).
func untilDeadline(dl uint64, now time.Duration) time.Duration {
	if now < 0 {
		now = 0
	}
	nowMs := uint64(now / time.Millisecond)
	diff := signedDiff(dl, nowMs, payBits)
	if diff <= 0 {
		return 0
	}
	return time.Duration(diff)*time.Millisecond - now%time.Millisecond
}
