// Package baseline is the mutex circuit breaker: the same public behaviour as
// core.Breaker, written the plain way around one sync.Mutex. It is the
// executable reference model of the rules written out in
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md that
// the differential tests, race tests and fuzz targets compare the lock-free
// core against, and the mutex breaker its benchmarks are measured against.
//
// It shares nothing with the lock-free core but the types and the validated
// configuration (core.Settings' fields): it decides every rule itself (the
// trip rule, classification, retry-after hints, the backoff, deadline
// rounding, the coarse max-wait and ramp-up units, the ramp-up hash), and
// its windows are its own sequential arrays, never
// window/atomicring or window/buckets, so a bug in a rule or a window cannot
// hide on both sides of a differential test.
//
// Plain is not wasteful: it is the mutex breaker one would ship. Both
// windows keep running sums, so an outcome costs O(1) whatever the window's
// size: the count window a ring of one byte per call, the time window the
// total of its buckets, from which each second is subtracted once as it
// leaves. The clock readings that only time a call or place an outcome in a
// time window are taken before the mutex; those that decide or commit a
// transition under it. A closed breaker's Allow and Record hold the mutex
// for a few loads and stores, defer nothing and allocate nothing. The price
// is a reading wasted now and then: a timed Allow that finds the breaker
// anything but closed, a Record whose permit turns out stale.
package baseline

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Breaker is the mutex-based breaker. Make one with New: a zero Breaker has
// no configuration, and every method panics with "baseline: Breaker used
// without New". All methods are safe for concurrent use; each holds the
// mutex for a few field updates, and a closed breaker's Allow and Record
// hold it for a handful of loads and stores: a recorded outcome costs O(1)
// in either window, whatever its size. The clock reading that stamps a
// timed call, and the one that places an outcome in a time window, are
// taken before the mutex; the readings that decide or commit a transition
// (an open deadline, the max wait, a ramp-up's share) are taken under it,
// so Config.Clock must not panic or call into the breaker. It never calls
// the classifier or a listener while holding the mutex; it calls
// Config.OpenDurationFunc under it, at the transition it decides, so that
// function must not call into the breaker either. Allow, Done and
// Record allocate nothing in steady state. Reconfigure rewrites the rules
// under the mutex; what the paths before it need of them they read from
// an atomic copy and check again under the mutex, so a reconfiguration
// that falls in between costs that call a clock reading under the mutex,
// never a decision by rules that no longer hold.
type Breaker struct {
	// The state, under mu; a closed breaker's Allow and Record touch the
	// fields up to the windows'.
	mu       sync.Mutex
	state    core.State
	ramping  bool   // closed: ramping up after half-open -> closed
	gen      uint64 // transitions committed since New; compared whole (R8, R15)
	consec   uint64
	count    countWindow
	time     timeWindow
	metrics  core.Metrics
	deadline uint64        // open: first whole millisecond of the clock at which a call may probe
	openFor  time.Duration // open, half-open: the open duration of this period, before any hint (R4's backoff)
	reopens  int           // open, half-open: consecutive re-opens from half-open, up to core.MaxBackoffSteps
	inFlight int           // half-open probes in flight
	success  int           // half-open probe successes
	failure  int           // half-open probe failures, below FailuresToReopen
	expiry   uint64        // half-open: max-wait deadline, in maxWait's units
	rampEnd  uint64        // closed: ramp-up deadline, in ramp's units

	// The rules: decided in New from the configuration and rewritten only
	// by Reconfigure, with the mutex held, so read under it (Reconfigure,
	// which alone writes them, also reads them under reconfig alone).
	window   windowKind
	timed    bool // slow calls are configured: a closed-state permit carries its Start
	stamped  bool // a counted outcome needs a clock reading: timed, or a time window
	consecOn bool // the run of consecutive failures is tracked
	cfg      core.Settings
	jitter   uint64 // core.Config.OpenDurationJitter in units of 2^-32
	maxWait  span   // the half-open max wait; zero: off
	ramp     span   // the ramp-up after closing; zero: off
	// early is what the error paths before the mutex need of the rules
	// (the classifier, whether hints are on), swapped whole by
	// Reconfigure: a hint that the path checks again under the mutex,
	// where a reconfiguration that came in between shows.
	early atomic.Pointer[earlyRules]
	// reconfig makes Reconfigure calls run one at a time.
	reconfig sync.Mutex

	// The wiring, which a reconfiguration keeps (core.Settings.Reconfigured):
	// set in New and never written again, so read without the mutex.
	collect bool // CollectMetrics
	// timedAtNew and stampedAtNew are timed and stamped as New decided
	// them: whether the paths before the mutex read the clock. Slow calls
	// are never turned on later (core.Settings.Reconfigured refuses it),
	// so a call not timed by them is timed by no later rules; a time
	// window a Reconfigure brings to a breaker New gave a count window or
	// none is read for under the mutex instead. Plain fields on the hot paths, where an
	// atomic copy of the rules cost the contender 20 instructions a call.
	timedAtNew, stampedAtNew bool
	clock                    core.Clock
	onChange                 func(core.Transition)
	probes                   core.ProbeGate
	// system is the clock when that is a SystemClock, the default, which
	// sysClock says: read by a direct call, as the lock-free breaker reads
	// it, so that neither pays an indirect call the other does not.
	system   core.SystemClock
	sysClock bool

	// Notifications wait here, in commit order, until the one goroutine that
	// is delivering hands them to the listener with the mutex released.
	queue      []core.Transition
	delivering bool
}

// windowKind is the window a breaker counts outcomes in; zero: none.
type windowKind uint8

const (
	countBased windowKind = iota + 1
	timeBased
)

// New returns a breaker at generation 0, closed unless
// core.Config.InitialState says otherwise, or the errors of
// core.Config.Validate. It never panics.
func New(c core.Config) (*Breaker, error) {
	b, err := build(c)
	if err != nil {
		return nil, err
	}
	b.start(b.cfg.InitialState)
	return b, nil
}

// build is New's breaker before it is put in its initial state: what New
// and Restore share.
func build(c core.Config) (*Breaker, error) {
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	b := &Breaker{collect: s.CollectMetrics, clock: s.Clock, onChange: s.OnStateChange, probes: s.ProbeGate}
	b.setRules(s)
	b.timedAtNew, b.stampedAtNew = b.timed, b.stamped
	switch b.window {
	case timeBased:
		b.time = newTimeWindow(s.WindowSize, s.BucketWidth)
	case countBased:
		b.count = newCountWindow(s.WindowSize)
	}
	b.system, b.sysClock = s.Clock.(core.SystemClock)
	if s.OnStateChange != nil {
		b.queue = make([]core.Transition, 0, 8)
	}
	return b, nil
}

// start puts New's breaker in its initial state at generation 0, with no
// transition; see core.Config.InitialState.
func (b *Breaker) start(st core.State) {
	if b.cfg.OpenGate != nil && ejected(st) {
		b.cfg.OpenGate.Acquire() // an operator's decision: counted, never refused
	}
	b.state = st
	switch st {
	case core.Open:
		now := b.cfg.Clock.Now()
		b.openFor = b.cfg.OpenDuration
		b.deadline = openDeadline(now, b.jittered(b.cfg.OpenDuration, now))
	case core.HalfOpen:
		b.openFor = b.cfg.OpenDuration
		if b.maxWait.unit > 0 { // the clock only for a max wait, as core's New
			b.maxWaitFrom(b.cfg.Clock.Now())
		}
	}
}

// maxWaitFrom starts the half-open max wait of a half-open generation
// entered at now, if a max wait is set. The caller holds the mutex, or has
// the breaker to itself (New).
func (b *Breaker) maxWaitFrom(now time.Duration) {
	if b.maxWait.unit > 0 {
		b.expiry = b.maxWait.deadline(now)
	}
}

// noNew is what every method of a zero Breaker panics with.
const noNew = "baseline: Breaker used without New: a zero Breaker has no configuration; make one with baseline.New"

// read is the clock's reading for the hot paths (system).
func (b *Breaker) read() time.Duration {
	if b.sysClock {
		return b.system.Now()
	}
	return b.clock.Now()
}

// mustBeNew panics with noNew when b is a zero Breaker: every Breaker that
// New returns has the clock of its validated Settings.
func (b *Breaker) mustBeNew() {
	if b.clock == nil {
		panic(noNew)
	}
}

// Allow asks to make one call; see core.Breaker.Allow.
func (b *Breaker) Allow() (core.Permit, error) {
	b.mustBeNew()
	if b.timedAtNew {
		return b.allowTimed()
	}
	b.mu.Lock()
	if b.state == core.Closed && !b.ramping {
		b.admit()
		gen := b.gen
		b.mu.Unlock()
		return core.Permit{Generation: gen}, nil
	}
	return b.allowLocked(0)
}

// allowTimed is Allow where New turned slow calls on. The call's Start:
// any reading within Allow stamps it, so it is taken before the mutex.
// Only the mutex tells whether the breaker is closed, and whether a
// Reconfigure has turned slow calls off, so a call that is not admitted
// closed and timed (a rejection, a probe, a ramping or disabled call, or
// one after slow calls were turned off) wastes it. Apart from Allow, so that a breaker New did not
// time tests neither (2 instructions a call).
func (b *Breaker) allowTimed() (core.Permit, error) {
	start := b.read()
	b.mu.Lock()
	if !b.timed {
		start = 0 // a Reconfigure turned slow calls off
	}
	// Allow's closed path again: a helper that unlocks does not inline.
	if b.state == core.Closed && !b.ramping {
		b.admit()
		gen := b.gen
		b.mu.Unlock()
		return core.Permit{Generation: gen, Start: start}, nil
	}
	return b.allowLocked(start)
}

// allowLocked is Allow on a breaker that is not closed or is ramping up,
// with the mutex held and start the reading taken before it (zero unless
// calls are timed); it unlocks.
func (b *Breaker) allowLocked(start time.Duration) (core.Permit, error) {
	switch b.state {
	case core.Closed, core.Disabled, core.MetricsOnly:
		p := core.Permit{Generation: b.gen}
		if b.ramping {
			// The share admitted, and the end of the ramp, are decided on
			// a reading taken with the ramp's flag, under the mutex: each
			// ramping Allow is decided exactly by its own reading.
			now := b.cfg.Clock.Now()
			if left := b.ramp.left(b.rampEnd, now); b.ramp.over(left) {
				b.ramping = false
			} else if !b.ramp.admits(b.cfg.RampUpStartPercent, uint64(left), now) {
				return b.reject(core.Permit{}, rampingUp)
			}
			if b.timed {
				p.Start = now
			}
		} else if b.state != core.Disabled {
			p.Start = start
		}
		b.admit()
		b.mu.Unlock()
		return p, nil
	case core.Open:
		// Under the mutex: the reading decides, and may commit, the flip to
		// half-open, whose max wait starts from it.
		now := b.now()
		if wait := b.wait(now); wait > 0 {
			return b.reject(core.Permit{RetryAfter: wait}, open)
		}
		return b.probe(now)
	case core.ForcedOpen:
		return b.reject(core.Permit{}, forcedOpen)
	default:
		if b.full() {
			var now time.Duration
			if b.maxWait.unit > 0 { // WaitForever reads no clock here
				now = b.now()
			}
			if wait, expired := b.halfOpenFullWait(now); !expired {
				return b.reject(core.Permit{RetryAfter: wait}, halfOpenFull)
			}
			// The max wait passed without a verdict: a new half-open
			// generation, whose first probe this caller holds.
			return b.probe(now)
		}
		b.inFlight++
		p := core.Permit{Generation: b.gen, Probe: true} // a probe carries no Start
		b.admitProbe()
		b.mu.Unlock()
		return b.gateProbe(p)
	}
}

// probe starts a new half-open generation at now whose first probe the
// caller holds, and unlocks.
func (b *Breaker) probe(now time.Duration) (core.Permit, error) {
	why := core.ReasonOpenDurationElapsed
	if b.state == core.HalfOpen {
		why = core.ReasonMaxWaitInHalfOpen
	}
	b.transition(core.HalfOpen, now, why)
	b.inFlight = 1
	b.maxWaitFrom(now)
	p := core.Permit{Generation: b.gen, Probe: true} // no Start: nothing measures a probe's duration
	b.admitProbe()
	// A panicking listener must not strand the probe the caller never got;
	// the probe gate, not asked yet, hears nothing of it.
	delivered := false
	defer func() {
		if !delivered {
			b.releaseProbe(p, true)
		}
	}()
	b.unlockAndNotify()
	delivered = true
	return b.gateProbe(p)
}

func (b *Breaker) admit() {
	if b.collect {
		b.metrics.Admitted++
	}
}

// admitProbe counts an admitted probe, unless the probe gate is yet to
// decide whether it goes out (gateProbe counts it then).
func (b *Breaker) admitProbe() {
	if b.cfg.ProbeGate == nil {
		b.admit()
	}
}

// gateProbe asks core.Config.ProbeGate, if there is one, with the mutex
// released, whether the probe p that Allow admitted goes out; see
// core.ProbeGate.
func (b *Breaker) gateProbe(p core.Permit) (core.Permit, error) {
	if b.probes == nil {
		return p, nil
	}
	letGo := false
	defer func() {
		if !letGo {
			b.releaseProbe(p, false) // refused, or the gate panicked: give the slot back
		}
	}()
	wait, refusal := b.probes.AdmitProbe(p)
	if refusal != nil {
		if b.collect {
			b.mu.Lock()
			b.metrics.RejectedHalfOpenFull++
			b.mu.Unlock()
		}
		return core.Permit{RetryAfter: max(wait, 0)}, refusal
	}
	letGo = true
	if b.collect {
		b.mu.Lock()
		b.admit()
		b.mu.Unlock()
	}
	return p, nil
}

// releaseProbe gives back the slot of the probe p, if its half-open
// generation is still current, telling no gate: a probe whose caller never
// got it (a listener's panic, counted as admitted and ignored, as
// Record(p, Ignored) would be) or that the gate refused or panicked on
// (counted: false, nothing in the metrics).
func (b *Breaker) releaseProbe(p core.Permit, counted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.current(p)
	if counted {
		if b.cfg.ProbeGate != nil {
			b.admit() // as without a gate: admitted, then ignored
		}
		b.tally(cur, core.Ignored, false)
	}
	if cur {
		b.inFlight--
	}
}

// reject counts a rejection for reason, unlocks and returns it.
func (b *Breaker) reject(p core.Permit, reason int) (core.Permit, error) {
	if b.collect {
		switch reason {
		case open:
			b.metrics.RejectedOpen++
		case halfOpenFull:
			b.metrics.RejectedHalfOpenFull++
		case forcedOpen:
			b.metrics.RejectedForcedOpen++
		default:
			b.metrics.RejectedRampUp++
		}
	}
	b.mu.Unlock()
	return p, b.rejectionFor(reason)
}

// halfOpenFullWait is the wait of an ErrHalfOpenFull rejection now, on a
// half-open breaker whose probe slots are all taken: HalfOpenFullWait, or
// the time left of the max wait at reading now (not negative) if that is
// shorter; expired reports that the max wait has passed instead. The caller
// holds the mutex.
func (b *Breaker) halfOpenFullWait(now time.Duration) (wait time.Duration, expired bool) {
	if b.maxWait.unit == 0 { // WaitForever
		return b.cfg.HalfOpenFullWait, false
	}
	if b.maxWait.over(b.maxWait.left(b.expiry, now)) {
		return 0, true
	}
	return min(b.maxWait.until(b.expiry, now), b.cfg.HalfOpenFullWait), false
}

// full reports whether half-open has no probe slot to give (R6). The
// caller holds the mutex.
func (b *Breaker) full() bool {
	return b.inFlight >= b.cfg.PermittedCallsInHalfOpen ||
		b.inFlight+b.success+b.failure >= b.cfg.SuccessesToClose+b.cfg.FailuresToReopen-1
}

// retryAfter is what a rejection's RetryAfter reports, with forced for
// ForcedOpen; see core's rejections.
func (b *Breaker) retryAfter(forced time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.state == core.ForcedOpen:
		return forced
	case b.state == core.Open:
		return b.wait(b.now())
	case b.state == core.HalfOpen && b.full():
		if wait, expired := b.halfOpenFullWait(b.now()); !expired {
			return wait
		}
	}
	return 0
}

// RetryAfter returns how long from now until the breaker may admit a
// call, without side effects; see core.Breaker.RetryAfter.
func (b *Breaker) RetryAfter() time.Duration {
	b.mustBeNew()
	return b.retryAfter(core.WaitForever)
}

// Done records the call's error; see core.Breaker.Done. The classifier
// decides the outcome; a Failure whose error carries a positive
// retry-after hint goes to RecordHint when hints are on. If the classifier,
// or the error's RetryAfter or Unwrap method, panics, the permit is
// released as Ignored and the panic goes on.
func (b *Breaker) Done(p core.Permit, err error) {
	if err == nil {
		b.record(p, core.Success, nil)
		return
	}
	b.doneWithError(p, err)
}

// doneWithError is Done of a call that returned err (not nil): kept apart
// so that a success neither sets up nor pays for the deferred release.
func (b *Breaker) doneWithError(p core.Permit, err error) {
	b.mustBeNew()
	decided := false
	defer func() {
		if !decided {
			b.Record(p, core.Ignored)
		}
	}()
	// The classifier and whether hints are on, as of before the mutex
	// (user code never runs under it): recordHint bounds the hint again
	// under the mutex, by the rules then.
	r := b.early.Load()
	o, h := r.classify(err), time.Duration(0)
	if o == core.Failure && r.hints {
		h = retryAfter(err)
	}
	decided = true
	if h > 0 {
		b.recordHint(p, h, err)
	} else {
		b.record(p, o, &err)
	}
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
func (b *Breaker) Record(p core.Permit, o core.Outcome) { b.record(p, o, nil) }

// record is Record of an outcome that Done classified from the error
// failure points to (nil from Record), which goes to
// core.Config.OpenDurationFunc if it trips the breaker; a panic of that function goes on once the trip is committed
// and notified.
//
// Why a pointer: the error is wanted only by a trip's open-duration
// function, and an interface parameter, live across the lock, cost every
// success of the contender eight instructions (two words spilled and
// reloaded, bench/instructions.sh); a nil pointer is one word.
func (b *Breaker) record(p core.Permit, o core.Outcome, failure *error) {
	b.mustBeNew()
	if o > core.Ignored {
		o = core.Failure
	}
	now := notRead
	stamped := b.stampedAtNew && !p.Probe && o != core.Ignored
	if stamped {
		// The reading that times the call and places the outcome in a
		// time window: any reading within Record will do (one older than
		// the window's newest second counts in the newest), so it is
		// taken before the mutex. A permit that turns out stale wastes it.
		// b.read, spelled out: too big to inline, and every outcome of a
		// time window reads the clock here.
		if b.sysClock {
			now = b.system.Now()
		} else {
			now = b.clock.Now()
		}
	}
	fail := o == core.Failure
	b.mu.Lock()
	if o == core.Ignored || p.Probe || !b.current(p) {
		b.recordUncounted(p, o, errOf(failure))
		return
	}
	// Judged by the rules under the mutex (R18): a reconfiguration may
	// have changed the threshold since the permit's Start (never turned
	// slow calls on: Settings.Reconfigured refuses that).
	slow := b.timed && isSlow(&b.cfg, now-p.Start) // timed: skip the arithmetic without slow calls
	b.tally(true, o, slow)
	var c windowCounts
	switch b.window {
	case countBased:
		b.count.add(outcomeOf(fail, slow))
		c = b.count.sum
	case timeBased:
		if now >= b.time.headEnd {
			// notRead, the largest reading, arrives here too: a
			// Reconfigure gave a time window to a breaker New gave a count
			// window or none, and the reading is taken now, under the
			// mutex. Tested here, once a bucket, and not on every outcome
			// (2 instructions); a flag live across the lock cost every
			// outcome 7.
			if now == notRead {
				now = b.read()
			}
			b.time.move(now)
		}
		c = b.time.addHead(outcomeOf(fail, slow))
	}
	if b.consecOn { // not tracked otherwise, as in the lock-free word
		if !fail {
			b.consec = 0
		} else if b.consec < core.MaxConsecutiveFailures {
			b.consec++
		}
	}
	if !trips(&b.cfg, c, b.consec) {
		// No transition, so nothing to deliver: notifications are only
		// ever queued by a critical section that delivers them, or while
		// another goroutine is delivering.
		b.mu.Unlock()
		return
	}
	pv := b.trip(0, tripReason(&b.cfg, c), errOf(failure))
	b.unlockAndNotify()
	repanic(pv)
}

// notRead is record's reading when it took none before the mutex: the
// largest reading, which a clock reaches only after some 292 years of its
// count; one that did read it would only be read once more.
const notRead = time.Duration(math.MaxInt64)

// recordUncounted is Record of an outcome that no window counts: a stale
// permit's, a probe's, or an Ignored one (err: as record's). The caller
// holds the mutex; recordUncounted unlocks.
func (b *Breaker) recordUncounted(p core.Permit, o core.Outcome, err error) {
	if g := b.probes; g != nil && p.Probe {
		// After the breaker has taken it and unlocked, a listener's panic
		// included (core.ProbeGate).
		defer g.ProbeDone(p, o)
	}
	switch {
	case !b.current(p):
		b.tally(false, o, false)
		b.mu.Unlock()
	case p.Probe:
		b.tally(true, o, false)
		pv := b.recordProbe(o, err)
		b.unlockAndNotify()
		repanic(pv)
	default:
		b.tally(true, o, false)
		b.mu.Unlock()
	}
}

// tally counts one outcome in the metrics: acted on, or dropped.
func (b *Breaker) tally(acted bool, o core.Outcome, slow bool) {
	switch {
	case !b.collect:
	case !acted:
		b.metrics.Dropped++
	case o == core.Success:
		b.metrics.Successes++
	case o == core.Failure:
		b.metrics.Failures++
	default:
		b.metrics.Ignored++
	}
	if acted && slow && b.collect {
		b.metrics.SlowCalls++
	}
}

// trip commits the trip of a counting breaker for reason why, decided by
// an outcome classified from err: closed -> open for at least the bounded
// hint h, or metrics-only's "would have opened", or, when the open gate
// has no slot for it, closed -> closed (capped). It returns a panic of the
// open-duration function, for the caller to raise once it has unlocked.
func (b *Breaker) trip(h time.Duration, why core.Reason, err error) (pv any) {
	if b.state == core.MetricsOnly {
		var now time.Duration
		if b.cfg.OnStateChange != nil {
			now = b.cfg.Clock.Now()
		}
		b.transition(core.MetricsOnly, now, why)
		return nil
	}
	// The open-duration function runs before the gate is asked, as in the
	// lock-free breaker, so a trip the gate caps has run it too.
	until, pv := b.openDuration(b.cfg.OpenDuration, h, 0, err)
	if b.cfg.OpenGate != nil && !b.cfg.OpenGate.TryAcquire() {
		var now time.Duration
		if b.cfg.OnStateChange != nil {
			now = b.cfg.Clock.Now()
		}
		b.transition(core.Closed, now, core.ReasonCapped)
		if b.collect {
			b.metrics.Capped++
		}
		return pv
	}
	b.openUntil(b.cfg.OpenDuration, until, 0, why, 0, true)
	return pv
}

// RecordHint records a failure carrying a retry-after hint; see
// core.Breaker.RecordHint.
func (b *Breaker) RecordHint(p core.Permit, retryAfter time.Duration) {
	b.recordHint(p, retryAfter, nil)
}

// recordHint is RecordHint of a failure classified from err (nil from
// RecordHint), as record.
func (b *Breaker) recordHint(p core.Permit, retryAfter time.Duration, err error) {
	b.mustBeNew()
	if !b.early.Load().hints || retryAfter <= 0 {
		b.record(p, core.Failure, &err)
		return
	}
	b.mu.Lock()
	h := bound(&b.cfg, retryAfter)
	if h == 0 { // a reconfiguration turned hints off before the mutex
		b.mu.Unlock()
		b.record(p, core.Failure, &err)
		return
	}
	if g := b.probes; g != nil && p.Probe {
		defer g.ProbeDone(p, core.Failure)
	}
	if !b.current(p) {
		b.tally(false, core.Failure, false)
		b.mu.Unlock()
		return
	}
	b.tally(true, core.Failure, false)
	var pv any
	if p.Probe {
		pv = b.open(backoff(&b.cfg, b.openFor), h, b.reopened(), err, core.ReasonRetryAfter)
	} else {
		pv = b.trip(h, core.ReasonRetryAfter, err)
	}
	b.unlockAndNotify()
	repanic(pv)
}

// recordProbe takes a probe's outcome o, classified from err; it returns
// a panic of the open-duration function, as trip.
func (b *Breaker) recordProbe(o core.Outcome, err error) (pv any) {
	b.inFlight--
	switch o {
	case core.Success:
		b.success++
	case core.Failure:
		b.failure++
	default:
		return nil
	}
	return b.verdict(err, 0, true)
}

// reopened is the count of consecutive re-opens after a re-open from the
// half-open breaker: one more, up to core.MaxBackoffSteps.
func (b *Breaker) reopened() int { return min(b.reopens+1, core.MaxBackoffSteps) }

// errOf is the error failure points to, or nil.
func errOf(failure *error) error {
	if failure == nil {
		return nil
	}
	return *failure
}

// open commits a transition to Open, the reopens-th consecutive re-open
// from half-open (0: a trip from closed), decided by an outcome classified
// from err: for the open duration d of this period (R4's backoff), or
// core.Config.OpenDurationFunc's duration where one is set; for the bounded
// hint h, rounded up to whole milliseconds, if that is longer (a hint never
// shortens the open duration); then lengthened by the jitter. The clock is
// read after the function has run, as the lock-free breaker reads it after
// its claim. It returns the function's panic, if it panicked.
func (b *Breaker) open(d, h time.Duration, reopens int, err error, why core.Reason) (pv any) {
	return b.openAt(d, h, reopens, err, why, 0, true)
}

// openAt is open at the clock reading now, or at one of its own taken
// after the open-duration function when read is set.
func (b *Breaker) openAt(d, h time.Duration, reopens int, err error, why core.Reason, now time.Duration, read bool) (pv any) {
	until, pv := b.openDuration(d, h, reopens, err)
	b.openUntil(d, until, reopens, why, now, read)
	return pv
}

// openDuration is how long open sees, before the jitter, and the
// function's panic, if it panicked: open's rule, without the transition.
func (b *Breaker) openDuration(d, h time.Duration, reopens int, err error) (until time.Duration, pv any) {
	until = hinted(d, h)
	if b.cfg.OpenDurationFunc != nil {
		var fd time.Duration
		fd, pv = openDurationOf(&b.cfg, reopens, err)
		until = max(fd, wholeMillis(h))
	}
	return until, pv
}

// openUntil commits the transition to Open of openAt for the duration
// until (before the jitter) that openDuration decided, d being the
// period's open duration without the function.
func (b *Breaker) openUntil(d, until time.Duration, reopens int, why core.Reason, now time.Duration, read bool) {
	if read {
		now = b.cfg.Clock.Now()
	}
	b.transition(core.Open, now, why)
	b.openFor, b.reopens = d, reopens
	b.deadline = openDeadline(now, b.jittered(until, now))
	b.announceDeadline()
}

// jittered is d lengthened by the jitter of the transition just committed
// at now (its generation is b.gen); see jitter.
func (b *Breaker) jittered(d, now time.Duration) time.Duration {
	return jitter(b.jitter, d, now, b.gen)
}

// repanic raises pv, a panic of the open-duration function recovered while
// the transition it was deciding committed, if there was one.
func repanic(pv any) {
	if pv != nil {
		panic(pv)
	}
}

// announceDeadline puts the open deadline just set into the queued
// notification of the transition into Open (Transition.OpenUntil).
func (b *Breaker) announceDeadline() {
	if b.cfg.OnStateChange != nil {
		b.queue[len(b.queue)-1].OpenUntil = time.Duration(b.deadline) * time.Millisecond
	}
}

// wait is how long before a call at now may probe (0: it may).
func (b *Breaker) wait(now time.Duration) time.Duration {
	return untilOpenDeadline(b.deadline, now)
}

// transition commits a state change: new generation, fresh state (R11), and
// a queued notification. The caller holds the mutex. It keeps the open
// gate's count: a transition that ends an ejection gives the slot back,
// and a manual one that starts one takes a slot unasked (a trip has
// reserved its own: trip).
func (b *Breaker) transition(to core.State, now time.Duration, why core.Reason) {
	from := b.state
	if g := b.cfg.OpenGate; g != nil {
		switch {
		case ejected(from) && !ejected(to):
			g.Release()
		case !ejected(from) && ejected(to) && why == core.ReasonManual:
			g.Acquire()
		}
	}
	b.state = to
	b.gen++ // 64 bits: a permit is stale across any number of transitions below 2^64
	b.inFlight, b.success, b.failure, b.consec = 0, 0, 0, 0
	b.ramping, b.expiry = false, 0
	if b.collect {
		b.metrics.Transitions[from][to]++
	}
	b.count.reset()
	b.time.reset()
	if b.cfg.OnStateChange != nil {
		b.queue = append(b.queue, core.Transition{Name: b.cfg.Name, From: from, To: to, Reason: why, Generation: b.gen, At: now, Time: wall(b.cfg.Clock, now)})
	}
}

// unlockAndNotify releases the mutex and, unless another goroutine is
// already delivering, delivers queued notifications in order with the mutex
// released (R12: a listener may call back into the breaker).
func (b *Breaker) unlockAndNotify() { b.unlockAndDeliver(false) }

// unlockAndDeliver is unlockAndNotify; quiet is for a goroutine already
// unwinding from a listener's panic. As in the lock-free dispatcher, a
// panicking listener must not strand the notifications queued behind its
// own: the clean-up delivers them before the panic goes on, quietly (a
// listener that panics again is recovered and its panic dropped, so the
// rest still go out and the panics do not nest).
func (b *Breaker) unlockAndDeliver(quiet bool) {
	if len(b.queue) == 0 || b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	returned, i := false, 0
	defer func() {
		if !returned {
			b.mu.Lock()
			b.queue = append(b.queue[:0], b.queue[i+1:]...)
			b.delivering = false
			b.unlockAndDeliver(true)
		}
	}()
	for ; i < len(b.queue); i++ {
		t := b.queue[i]
		b.mu.Unlock()
		if quiet {
			callRecovered(b.onChange, t)
		} else {
			b.onChange(t)
		}
		b.mu.Lock()
	}
	b.queue = b.queue[:0]
	b.delivering = false
	returned = true
	b.mu.Unlock()
}

// callRecovered calls fn(t) and drops any panic it raises.
func callRecovered(fn func(core.Transition), t core.Transition) {
	defer func() { _ = recover() }()
	fn(t)
}

// ejected reports whether a breaker in state s holds an open slot of its
// gate (core.OpenGate).
func ejected(s core.State) bool {
	return s == core.Open || s == core.HalfOpen || s == core.ForcedOpen
}

// now reads the clock for deadline checks, where a reading below zero counts
// as zero, as in the lock-free word's unsigned milliseconds.
func (b *Breaker) now() time.Duration { return max(b.cfg.Clock.Now(), 0) }

// State returns the current state, time-aware: an open breaker whose open
// duration has elapsed reports half-open before any call commits the
// transition.
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
		switch b.window {
		case timeBased:
			// Under the mutex: only the state, read under it, says
			// whether a reading is needed.
			w = b.time.sum(b.cfg.Clock.Now())
		case countBased:
			w = b.count.sum
		}
		c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = w.n, w.f, w.s, w.sf
		c.ConsecutiveFailures = b.consec
	case core.Open:
		if b.wait(b.now()) == 0 {
			c.State = core.HalfOpen
		}
	case core.HalfOpen:
		c.ProbesInFlight, c.ProbeSuccesses, c.ProbeFailures = b.inFlight, b.success, b.failure
	}
	return c
}

// Metrics returns the cumulative counters; see core.Metrics. The snapshot is
// one instant.
func (b *Breaker) Metrics() core.Metrics {
	b.mustBeNew()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.metrics
}

// ForceOpen forces the breaker open; see core.Breaker.ForceOpen.
func (b *Breaker) ForceOpen(d time.Duration) error {
	b.mustBeNew()
	if d < 0 || d > core.MaxOpenDurationLimit {
		return fmt.Errorf("%w: ForceOpen duration %v is outside 0..%v (0: until another manual control)", core.ErrInvalidArgument, d, core.MaxOpenDurationLimit)
	}
	b.mu.Lock()
	if d == 0 {
		b.command(core.ForcedOpen)
		return nil
	}
	now := b.cfg.Clock.Now()
	b.transition(core.Open, now, core.ReasonManual)
	b.openFor = b.cfg.OpenDuration // a re-open after it backs off from the open duration
	b.reopens = 0
	b.deadline = openDeadline(now, b.jittered(wholeMillis(d), now))
	b.announceDeadline()
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

// HalfOpen moves the breaker to half-open with no probe in flight; see
// core.Breaker.HalfOpen.
func (b *Breaker) HalfOpen() {
	b.mustBeNew()
	b.mu.Lock()
	var now time.Duration
	if b.maxWait.unit > 0 || b.cfg.OnStateChange != nil {
		now = b.cfg.Clock.Now()
	}
	b.transition(core.HalfOpen, now, core.ReasonManual)
	b.openFor = b.cfg.OpenDuration // a re-open backs off from the open duration
	b.reopens = 0
	b.maxWaitFrom(now)
	b.unlockAndNotify()
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
	if b.cfg.OnStateChange != nil {
		now = b.cfg.Clock.Now()
	}
	b.transition(to, now, core.ReasonManual)
	b.unlockAndNotify()
}
