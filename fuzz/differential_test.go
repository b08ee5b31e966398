package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/difftest"
)

// doneErrs are the errors a Done or Do may report.
var doneErrs = []error{nil, difftest.ErrFail, context.Canceled, context.DeadlineExceeded, difftest.ErrIgnored,
	difftest.ErrSuccess, difftest.ErrClassifierPanics, fmt.Errorf("wrapped: %w", context.Canceled),
	difftest.ErrDurationPanics}

// decoded is a fuzz input's head: the config and how the input is read.
type decoded struct {
	cfg core.Config
	// listenerReads: the listener calls back into the breaker (State,
	// Counts and Metrics) and the answers are compared too.
	listenerReads bool
	// restarts: the manual-control operation may also restart the process
	// (a snapshot, then both implementations restored from it).
	restarts bool
	// reconfigures: the manual-control operation may also reconfigure the
	// breaker, to one of difftest.Alternatives of the config.
	reconfigures bool
}

// decodeConfig turns the head of a fuzz input into a config with small
// ranges (windows of a few calls or seconds, open durations of milliseconds
// to seconds, max waits, ramp-ups and hint bounds of a millisecond to a few
// seconds), so that short inputs reach every state. ok is false when the
// decoded config is invalid: the target then has nothing to compare.
func decodeConfig(r *input) (d decoded, ok bool) {
	c := &d.cfg
	switch r.intn(3) {
	case 0:
		c.WindowType, c.WindowSize = core.CountBased, 1+r.intn(8)
	case 1:
		c.WindowType, c.WindowSize = core.TimeBased, 1+r.intn(6)
	}
	rules := r.byte()
	if c.WindowSize > 0 {
		if rules&1 != 0 {
			c.FailureRateThreshold = 1 + r.intn(100)
		}
		if rules&2 != 0 {
			c.FailureCountThreshold = 1 + r.intn(6)
			if c.WindowType == core.CountBased {
				c.FailureCountThreshold = 1 + r.intn(c.WindowSize)
			}
		}
		if rules&4 != 0 {
			c.SlowCallRateThreshold = 1 + r.intn(100)
		}
		if rules&(4|8) != 0 {
			c.SlowCallDurationThreshold = time.Duration(1+r.intn(200)) * 7 * time.Millisecond
		}
		if c.FailureRateThreshold == 0 && c.FailureCountThreshold == 0 && c.SlowCallRateThreshold == 0 {
			c.FailureRateThreshold = 50
		}
		if c.WindowType == core.CountBased {
			c.MinimumNumberOfCalls = r.intn(c.WindowSize + 1)
		} else {
			c.MinimumNumberOfCalls = r.intn(6)
		}
	}
	if rules&16 != 0 || c.WindowSize == 0 {
		c.ConsecutiveFailures = 1 + r.intn(5)
	}
	c.OpenDuration = time.Duration(1+r.intn(250))*7*time.Millisecond + time.Duration(r.intn(4))*333*time.Microsecond
	if rules&32 != 0 {
		c.OpenDurationBackoff = 1 + float64(r.intn(40))/10
		c.MaxOpenDuration = c.OpenDuration * time.Duration(1+r.intn(8))
	}
	c.PermittedCallsInHalfOpen = r.intn(5)
	c.SuccessesToClose = r.intn(5)
	if rules&64 != 0 {
		c.Classifier = difftest.Classifier
	}
	d.listenerReads = rules&128 != 0
	features := r.byte()
	switch {
	case features&1 != 0:
		c.MaxWaitInHalfOpen = featureDuration(r)
	case features&16 != 0:
		c.MaxWaitInHalfOpen = core.WaitForever
	} // otherwise the default, max(OpenDuration, 1 min)
	if features&2 != 0 {
		c.RampUpDuration = featureDuration(r)
		if p := int(r.byte()); p < 202 {
			c.RampUpStartPercent = p % 101
		}
	}
	if features&4 != 0 {
		c.MaxRetryAfter = featureDuration(r)
	}
	c.CollectMetrics = features&8 == 0
	if features&32 != 0 {
		c.InitialState = core.State(r.intn(int(core.NumStates)))
	}
	if features&64 != 0 {
		// A cap on open breakers that refuses half the trips, the same
		// ones on each side (difftest.Gate), drawn from the rule bits so
		// that no byte more is read.
		c.OpenGate = &difftest.Gate{Seed: uint64(rules), RefusePercent: 50}
	}
	if features&128 != 0 {
		d.restarts, d.reconfigures = decodeMoreFeatures(r, c)
	}
	if _, err := c.Validate(); err != nil {
		c.OpenDurationBackoff, c.MaxOpenDuration, c.OpenDurationFunc = 0, 0, nil
		if _, err := c.Validate(); err != nil {
			return d, false
		}
	}
	return d, true
}

// decodeMoreFeatures decodes a second byte of feature flags: 1, an
// open-duration function in place of the backoff, seeded by the next byte
// (difftest.OpenDuration: zero, negative, tiny, in-bound and over-bound
// results, a panic on its error) and bounded by a multiple of the open
// duration; 2, a jitter fraction of the next byte over 255 (0..1, both
// ends included); 4, FailuresToReopen from the next byte (0..4, 0 the
// default of 1); bits 8 and 16, a time window's bucket width (1 s, 100 ms,
// 250 ms or 500 ms); 64, a probe gate that refuses half the probes
// (difftest.ProbeGate), seeded by the next byte. It returns bit 32:
// restarts among the operations, and bit 128: reconfigurations.
func decodeMoreFeatures(r *input, c *core.Config) (restarts, reconfigures bool) {
	flags := r.byte()
	if flags&1 != 0 {
		c.OpenDurationBackoff = 0
		c.MaxOpenDuration = c.OpenDuration * time.Duration(1+r.intn(8))
		c.OpenDurationFunc = difftest.OpenDuration(uint64(r.byte()), c.MaxOpenDuration)
	}
	if flags&2 != 0 {
		c.OpenDurationJitter = float64(r.byte()) / 255
	}
	if flags&4 != 0 {
		c.FailuresToReopen = r.intn(5)
	}
	if c.WindowType == core.TimeBased && c.WindowSize > 0 {
		c.BucketWidth = [4]time.Duration{0, core.MinBucketWidth, 250 * time.Millisecond, 500 * time.Millisecond}[flags>>3&3]
	}
	if flags&64 != 0 {
		c.ProbeGate = &difftest.ProbeGate{Seed: uint64(r.byte()), RefusePercent: 50}
	}
	return flags&32 != 0, flags&128 != 0
}

// featureDuration decodes a max wait, a ramp-up or a hint bound: whole
// milliseconds from 1 to 64 (a coarse unit of 1 ms), the same with a
// fraction (rounded up to the unit), multiples of 50 ms up to 3.2 s (units
// of 1 to 4 ms), and quarter seconds up to 16 s plus a nanosecond (units up
// to 16 ms, the configured duration never a whole number of them).
func featureDuration(r *input) time.Duration {
	b := r.byte()
	n := time.Duration(1 + b>>2)
	switch b & 3 {
	case 0:
		return n * time.Millisecond
	case 1:
		return n*7*time.Millisecond + 333*time.Microsecond
	case 2:
		return n * 50 * time.Millisecond
	}
	return n*time.Second/4 + 1
}

// The operations, by op byte mod numOps.
const (
	opAllow      = 0 // and 1, and 15
	opRecord     = 2
	opDone       = 3
	opClock      = 4 // and 5, and 17
	opDo         = 6
	opForged     = 7
	opState      = 8
	opCall       = 9
	opForceOpen  = 10
	opManual     = 11 // Disable, MetricsOnly, Reset or HalfOpen
	opRecordHint = 12
	opDoneHint   = 13
	opCallHint   = 14 // Do, or Allow and Done, with a hinted error
	opForgedHint = 16
	numOps       = 18
)

// The clock-step kinds (clockStep), by kind byte mod numSteps.
const (
	stepZero        = 0
	stepNano        = 1
	stepWait        = 2 // the Wait of the last ErrOpen
	stepWaitLess    = 3 // a nanosecond short of it
	stepOpen        = 4 // cfg.OpenDuration
	stepSecond      = 5
	stepSecondLess  = 6
	stepTens        = 7  // arg * 10 ms
	stepIdle        = 8  // arg seconds
	stepBackTens    = 9  // -arg * 10 ms
	stepBackIdle    = 10 // -arg seconds
	stepMillis      = 11 // arg ms + arg µs
	stepRamp        = 12 // cfg.RampUpDuration
	stepMaxWait     = 13 // the resolved MaxWaitInHalfOpen
	stepRampEnd     = 14 // to the first reading at which the tracked ramp is over
	stepRampEndLess = 15 // a nanosecond before it
	stepExpiry      = 16 // to the first reading at which the tracked max wait has passed
	stepExpiryLess  = 17 // a nanosecond before it
	stepRetry       = 18 // cfg.MaxRetryAfter
	stepInRamp      = 19 // an eighth of the ramp-up plus arg microseconds: through the shares
	numSteps        = 20
)

// FuzzDifferential: the bytes decode into a config (decodeConfig) and a
// sequence of operations (differential.decode), which difftest.Differ
// runs on the lock-free core and the mutex baseline, each on its own
// manual clock; they must agree at every step (R1-R15 as the baseline
// implements them). The operations:
//
//   - Allow: the same permit (generation, probe flag, start) or the same
//     rejection (ErrOpen, ErrHalfOpenFull, ErrForcedOpen or ErrRampingUp,
//     by errors.Is) with the same Permit.RetryAfter;
//   - Done with every kind of error (nil, a failure, context.Canceled,
//     context.DeadlineExceeded, a wrapped cancellation, and with the custom
//     classifier an ignored error, a success-mapped error and a panicking
//     classifier): the same panic, if any;
//   - Record with each outcome, on held permits (in any order, any number of
//     generations late) and on hand-built non-probe permits of nearby
//     generations;
//   - Do with a result, an error, a panic or a cancelled context: the same
//     value, error and panic;
//   - ForceOpen(d) (0, small, the open duration, the limit, and invalid
//     negative and huge values, which must fail with ErrInvalidArgument on
//     both sides and change nothing), Disable, MetricsOnly, Reset;
//   - RecordHint(p, d) on held and hand-built permits with hints zero,
//     negative, small, at and past MaxRetryAfter and huge, Done and Do with
//     errors that carry hints (core.WithRetryAfter, wrapped, joined,
//     nested);
//   - clock steps forwards (including zero, one nanosecond, exactly to the
//     deadline a rejection announced, and idle gaps of many windows),
//     backwards (R14), below zero included, of a ramp-up, a max wait, a
//     hint bound, through the ramp's shares, and exactly to (and a
//     nanosecond short of) the end of the current ramp-up and the current
//     half-open max wait.
//
// The config may set every rule, a time window's bucket width, backoff, the probe limits, the custom
// classifier, a listener that reads back, MaxWaitInHalfOpen,
// RampUpDuration and RampUpStartPercent, MaxRetryAfter, CollectMetrics,
// an OpenGate that refuses half the trips (difftest.Gate), an
// open-duration function (difftest.OpenDuration), a jitter fraction,
// FailuresToReopen and a ProbeGate that refuses half the probes
// (difftest.ProbeGate).
// After every operation the Differ compares State, Counts, Metrics and
// the notifications (with what State, Counts and Metrics said inside the
// listener), and holds them to the chain of notifications and to Metrics
// counting what the calls observed (difftest.Differ.Step lists every
// check).
//
// Not covered: hand-built probe permits (see TestForgedProbePermit); clock
// gaps past the documented exact range of the deadlines (2^35 ms of the
// open deadline, 2^18 units of a ramp-up, 2^14 of a max wait,
// docs/design.md, Widths): a step that would leave it is replaced by no
// step. (Reading State or Counts does not keep an open deadline exact, as
// only a call moves the word on: the corpus entry
// forceopen-year-then-years-idle reached the wrap with Counts read after
// every step. TestCoarseDeadlineWrap in core shows the coarse deadlines
// past their range.)
func FuzzDifferential(f *testing.F) {
	for _, seed := range differentialSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runDifferential(t, data, nil)
	})
}

// reachKeys are what TestDifferentialSeedsReach requires the seeds to
// reach: every operation and each of its argument classes, every state,
// and the new transitions and rejections.
var reachKeys = []string{
	"op:ForceOpen(0)", "op:ForceOpen(d)", "op:ForceOpen(invalid)", "op:Disable", "op:MetricsOnly", "op:Reset",
	"op:RecordHint(zero)", "op:RecordHint(negative)", "op:RecordHint(small)", "op:RecordHint(huge)",
	"op:RecordHint(forged)", "op:DoneHint", "op:CallHint(Do)", "op:CallHint(Done)",
	"state:closed", "state:open", "state:half-open", "state:forced-open", "state:disabled", "state:metrics-only",
	"reject:open", "reject:half-open-full", "reject:forced-open", "reject:ramping-up",
	"ramp:shed", "ramp:admit", "ramp:end", "maxwait:refused", "tr:H>H", "tr:M>M", "tr:H>C+ramp", "tr:C>O+narrow",
	"hint:trip", "hint:reopen", "hint:metrics-only", "metrics:dropped", "metrics:slow", "step:ramp-end", "step:expiry",
	"tr:capped", "opendur:func", "opendur:jitter", "opendur:panic", "op:Restart",
	"probegate:let-go", "probegate:refused",
	"op:Reconfigure", "reconfigured:closed", "reconfigured:open", "reconfigured:half-open", "reconfigure:verdict",
}

// differential is one run of FuzzDifferential: the decoder's state (the
// held permits, the last announced wait, and its own reading of the
// current ramp-up, max wait and open deadline, to steer the clock and keep
// it in range) around the shared Differ.
type differential struct {
	t             testing.TB
	d             decoded
	s             core.Settings
	x             *difftest.Differ
	held          []core.Permit
	lastWait      time.Duration
	reach         map[string]int
	ramping       bool // the last half-open -> closed started a ramp that may still be on
	rampGen       uint64
	rampEnd       uint64 // in ramp's units
	expiryGen     uint64 // the last half-open generation, with a max wait
	expiry        uint64 // in maxWait's units
	ramp, maxWait coarse // the units of the ramp-up and the max wait
	hasExpiry     bool
	open          bool          // the last transition went to open
	openAt        time.Duration // and when
	notifications int           // how many notifications the decoder has looked at
	alts          []core.Config // what Reconfigure draws from
}

// runDifferential decodes data into operations and runs each on every
// implementation (difftest.Differ); reach, if not nil, counts what the run
// reached.
func runDifferential(t testing.TB, data []byte, reach map[string]int) {
	r := &input{b: data}
	d, ok := decodeConfig(r)
	if !ok {
		return
	}
	x := &differential{t: t, d: d, reach: reach}
	x.s, _ = x.d.cfg.Validate()
	x.ramp, x.maxWait = coarseOf(x.s.RampUpDuration), coarseOf(x.s.MaxWaitInHalfOpen)
	var err error
	if x.x, err = difftest.New(x.d.cfg, 0, d.listenerReads); err != nil {
		t.Fatalf("%v, though Validate accepted it", err)
	}
	for step := 0; r.more() && step < 400; step++ {
		x.decode(r, int(r.byte())%numOps)
		x.follow()
	}
}

func (x *differential) hit(key string) {
	if x.reach != nil {
		x.reach[key]++
	}
}

// step runs op on every implementation, failing the run on any
// disagreement or broken rule, and returns what it observed.
func (x *differential) step(op difftest.Op) difftest.Obs {
	x.t.Helper()
	obs, err := x.x.Step(op)
	if err != nil {
		x.t.Fatal(err)
	}
	if obs.Panic == difftest.ErrDurationPanics.Error() {
		x.hit("opendur:panic")
	}
	return obs
}

// take removes and returns a held permit chosen by the input.
func (x *differential) take(r *input) (core.Permit, bool) {
	if len(x.held) == 0 {
		return core.Permit{}, false
	}
	i := r.intn(len(x.held))
	p := x.held[i]
	x.held = append(x.held[:i], x.held[i+1:]...)
	return p, true
}

// forged is a hand-built closed-state permit of a generation near the
// current one, or exactly 2^20 before or after it (the low bits of the
// lock-free state word's generation field: stale all the same).
func (x *differential) forged(r *input) core.Permit {
	g := x.x.Sides[0].B.Counts().Generation
	switch d := r.intn(7); d {
	case 5:
		g -= 1 << 20
	case 6:
		g += 1 << 20
	default:
		g += uint64(d) - 2
	}
	return core.Permit{Generation: g}
}

// decode reads operation op's arguments from r and runs it.
func (x *differential) decode(r *input, op int) {
	switch op {
	case 0, 1, 15:
		if p, ok := x.allow(); ok {
			x.held = append(x.held, p)
		}
	case opRecord, opDone, opRecordHint, opDoneHint:
		if p, ok := x.take(r); ok {
			x.finish(r, op, p)
		}
	case 4, 5, 17:
		x.step(difftest.Op{Kind: difftest.Advance, D: x.clockStep(r)})
	case opDo:
		kind := r.intn(8)
		x.step(difftest.Op{Kind: difftest.Do, Value: kind, Err: doneErrs[kind], Panic: kind == 6, Cancelled: kind == 7})
	case opForged:
		x.step(difftest.Op{Kind: difftest.Record, Permit: x.forged(r), Outcome: core.Outcome(r.intn(3))})
	case opState:
		x.step(difftest.Op{Kind: difftest.State})
	case opCall: // a whole call: Allow, then Record at once
		o := core.Outcome(r.intn(3))
		if p, ok := x.allow(); ok {
			x.step(difftest.Op{Kind: difftest.Record, Permit: p, Outcome: o})
		}
	case opForceOpen:
		x.forceOpen(forceOpenDuration(r, x.d.cfg))
	case opManual:
		n := 4
		if x.d.restarts {
			n++
		}
		if x.d.reconfigures {
			n++
		}
		switch which := r.intn(n); {
		case which == 4 && x.d.restarts:
			x.restart(r)
		case which >= 4:
			x.reconfigure(r)
		default:
			x.hit("op:" + [4]string{"Disable", "MetricsOnly", "Reset", "HalfOpen"}[which])
			x.step(difftest.Op{Kind: [4]difftest.Kind{difftest.Disable, difftest.MetricsOnly, difftest.Reset, difftest.HalfOpen}[which]})
		}
	case opCallHint:
		x.callHint(r)
	case opForgedHint:
		x.hit("op:RecordHint(forged)")
		x.recordHint(x.forged(r), r)
	}
}

// restartEpoch is the wall-clock time of FuzzDifferential's first
// restart; each next one is later by the clock's progress since.
var restartEpoch = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// restart decodes a restart of the process (difftest.Differ.Restart): a
// snapshot at the wall-clock time the breaker clock has reached, with or
// without the count window, restored by both implementations after a gap
// (none, a few milliseconds, seconds, or a wall clock that went back) on a
// new clock reading zero. The permits held die with the process, and the
// decoder's own reading of the deadlines starts over from the snapshot.
func (x *differential) restart(r *input) {
	flags, arg := r.byte(), time.Duration(r.byte())
	elapsed := [4]time.Duration{0, arg * time.Millisecond, arg * 100 * time.Millisecond, -arg * time.Millisecond}[flags&3]
	at := restartEpoch.Add(x.x.Now())
	if !x.restorable(flags&4 != 0) {
		// A reconfiguration that lowered a threshold left a run of
		// failures or a window its rule would trip on the next outcome
		// (R18: not judged until then), which Restore refuses to carry
		// over: no restart here.
		x.hit("restart:refused-after-reconfigure")
		return
	}
	snap, err := x.x.Restart(at, flags&4 != 0, elapsed, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	x.hit("op:Restart")
	x.held, x.notifications, x.lastWait = nil, 0, 0
	x.open, x.openAt = snap.State == core.Open, 0
	x.hasExpiry = snap.State == core.HalfOpen && x.s.MaxWaitInHalfOpen > 0
	x.expiryGen, x.expiry = 0, x.maxWait.deadline(0)
	// A ramp-up resumes for what was left of it, at most the whole ramp:
	// its end is taken as the latest it can be, which keeps the guard in
	// range and the check of the first call after the end sound.
	x.ramping = !snap.RampUntil.IsZero() && snap.State == core.Closed && x.s.RampUpDuration > 0
	x.rampGen, x.rampEnd = 0, x.ramp.deadline(0)
}

// restorable reports whether a snapshot of the first side, taken now,
// would restore a breaker with the Differ's config.
func (x *differential) restorable(withWindow bool) bool {
	snap, err := x.x.Sides[0].B.Snapshot(restartEpoch, withWindow)
	if err != nil {
		return false
	}
	set, err := x.x.Config().Validate()
	return err == nil && snap.CheckFor(set) == nil
}

// reconfigure decodes a Reconfigure to one of difftest.Alternatives of the
// config the breakers were built with (an invalid one included, which both
// must refuse alike); follow takes the new rules on.
func (x *differential) reconfigure(r *input) {
	if x.alts == nil {
		x.alts = difftest.Alternatives(x.d.cfg)
	}
	x.hit("op:Reconfigure")
	x.step(difftest.Op{Kind: difftest.Reconfigure, Config: &x.alts[r.intn(len(x.alts))]})
}

// finish decodes how a held permit p ends: Record, Done, RecordHint or
// Done with a hinted error.
func (x *differential) finish(r *input, op int, p core.Permit) {
	switch op {
	case opRecord:
		x.step(difftest.Op{Kind: difftest.Record, Permit: p, Outcome: core.Outcome(r.intn(3))})
	case opDone:
		x.step(difftest.Op{Kind: difftest.Done, Permit: p, Err: doneErrs[r.intn(len(doneErrs))]})
	case opRecordHint:
		x.recordHint(p, r)
	default:
		x.hit("op:DoneHint")
		x.hinted(difftest.Op{Kind: difftest.Done, Permit: p, Err: x.hintedErr(r)})
	}
}

// callHint decodes a whole call that fails with a hinted error: through
// Do, or Allow then Done.
func (x *differential) callHint(r *input) {
	if r.intn(2) == 0 {
		x.hit("op:CallHint(Do)")
		x.hinted(difftest.Op{Kind: difftest.Do, Value: 8, Err: x.hintedErr(r)})
		return
	}
	x.hit("op:CallHint(Done)")
	err := x.hintedErr(r)
	if p, ok := x.allow(); ok {
		x.hinted(difftest.Op{Kind: difftest.Done, Permit: p, Err: err})
	}
}

// allow runs Allow and reports whether it granted the permit. The Wait of
// a rejection (ErrOpen, and ErrHalfOpenFull with a max wait) is kept for
// the clock steps that go to the announced deadline.
func (x *differential) allow() (core.Permit, bool) {
	before := x.x.Sides[0].B.Counts()
	now := x.x.Now()
	o := x.step(difftest.Op{Kind: difftest.Allow})
	granted := o.Err.Nil()
	switch {
	case o.Err.Matches(difftest.ErrProbeRefused):
		x.hit("probegate:refused")
	case granted && o.Permit.Probe && x.x.Sides[0].Probes != nil:
		x.hit("probegate:let-go")
	}
	if !granted {
		x.hit("reject:" + map[error]string{core.ErrOpen: "open", core.ErrHalfOpenFull: "half-open-full",
			core.ErrForcedOpen: "forced-open", core.ErrRampingUp: "ramping-up"}[o.Err.Reason()])
		if o.Permit.RetryAfter > 0 {
			x.lastWait = o.Permit.RetryAfter
		}
	}
	// The ramp: Allow at its generation decides by share until the end,
	// and the first call at or after the end clears it.
	if x.ramping && before.State == core.Closed && before.Generation == x.rampGen {
		switch {
		case x.ramp.units(now) >= x.rampEnd:
			x.ramping = false
			x.hit("ramp:end")
			if !granted {
				x.t.Fatalf("Allow after the ramp's end refused with %v", o.Err)
			}
		case granted:
			x.hit("ramp:admit")
		default:
			x.hit("ramp:shed")
		}
	}
	if before.State == core.HalfOpen && o.Err.Matches(core.ErrHalfOpenFull) && x.hasExpiry && before.Generation == x.expiryGen {
		x.hit("maxwait:refused")
	}
	return o.Permit, granted
}

// hinted runs op, an operation that may record a hint, and notes whether
// it tripped, re-opened or "would have opened".
func (x *differential) hinted(op difftest.Op) {
	n := x.x.Sides[0].Count()
	x.step(op)
	for _, tr := range x.x.Sides[0].Since(n) {
		switch {
		case x.s.MaxRetryAfter == 0:
		case tr.From == core.Closed && tr.To == core.Open:
			x.hit("hint:trip")
		case tr.From == core.HalfOpen && tr.To == core.Open:
			x.hit("hint:reopen")
		case tr.From == core.MetricsOnly && tr.To == core.MetricsOnly:
			x.hit("hint:metrics-only")
		}
	}
}

// recordHint runs RecordHint of p with a hint decoded from r.
func (x *differential) recordHint(p core.Permit, r *input) {
	d := hintDuration(r, x.d.cfg)
	x.hit("op:RecordHint(" + hintClass(d) + ")")
	x.hinted(difftest.Op{Kind: difftest.RecordHint, Permit: p, D: d})
}

// forceOpen runs ForceOpen(d); the Differ holds it to
// core.ErrInvalidArgument exactly when d is outside
// 0..core.MaxOpenDurationLimit, and then to no change.
func (x *differential) forceOpen(d time.Duration) {
	switch {
	case d < 0 || d > core.MaxOpenDurationLimit:
		x.hit("op:ForceOpen(invalid)")
	case d == 0:
		x.hit("op:ForceOpen(0)")
	default:
		x.hit("op:ForceOpen(d)")
	}
	x.step(difftest.Op{Kind: difftest.ForceOpen, D: d})
}

// follow notes what the last operation reached and follows the new
// notifications: the open deadline, the max wait and the ramp-up they
// start, which the clock steps steer to and keep in range.
func (x *differential) follow() {
	s0 := x.x.Sides[0]
	x.hit("state:" + s0.B.Counts().State.String())
	seen := s0.Since(x.notifications)
	for i, s := range seen {
		tr := s.Transition
		if tr.Reason == core.ReasonReconfigured {
			x.reconfigured(tr)
			continue
		}
		if i > 0 && seen[i-1].Reason == core.ReasonReconfigured {
			x.hit("reconfigure:verdict")
		}
		x.hit(fmt.Sprintf("tr:%s>%s", letter(tr.From), letter(tr.To)))
		if tr.Reason == core.ReasonCapped {
			x.hit("tr:capped")
		}
		if tr.From == core.Closed && tr.To == core.Open && x.s.BucketWidth != 0 && x.s.BucketWidth < time.Second {
			x.hit("tr:C>O+narrow")
		}
		x.open, x.openAt = tr.To == core.Open, tr.At
		if x.open && x.s.OpenDurationFunc != nil {
			x.hit("opendur:func")
		}
		if x.open && x.s.OpenDurationJitter > 0 {
			x.hit("opendur:jitter")
		}
		switch {
		case tr.To == core.HalfOpen && x.s.MaxWaitInHalfOpen > 0:
			x.hasExpiry, x.expiryGen, x.expiry = true, tr.Generation, x.maxWait.deadline(tr.At)
		case tr.From == core.HalfOpen && tr.To == core.Closed && x.s.RampUpDuration > 0:
			x.hit("tr:H>C+ramp")
			x.ramping, x.rampGen, x.rampEnd = true, tr.Generation, x.ramp.deadline(tr.At)
		}
	}
	x.notifications += len(seen)
	if m := s0.B.Metrics(); m.Dropped > 0 {
		x.hit("metrics:dropped")
	}
	if m := s0.B.Metrics(); m.SlowCalls > 0 {
		x.hit("metrics:slow")
	}
}

// reconfigured follows a reconfiguration's notification tr: the new rules
// (the clock steps read their units) and, per R18, a ramp-up that ends
// when its duration changed and a half-open max wait that restarts at
// tr.At when it changed. The open deadline and the state are kept.
func (x *differential) reconfigured(tr core.Transition) {
	x.hit("reconfigured:" + tr.From.String())
	old := x.s
	x.s, _ = x.x.Config().Validate()
	x.ramp, x.maxWait = coarseOf(x.s.RampUpDuration), coarseOf(x.s.MaxWaitInHalfOpen)
	if x.s.RampUpDuration != old.RampUpDuration {
		x.ramping = false
	}
	if tr.From == core.HalfOpen && x.s.MaxWaitInHalfOpen != old.MaxWaitInHalfOpen {
		x.hasExpiry, x.expiryGen = x.s.MaxWaitInHalfOpen > 0, tr.Generation
		x.expiry = x.maxWait.deadline(tr.At)
	}
}

// hintDuration decodes a retry-after hint: zero, negative, a nanosecond,
// small, at and past the bound, huge, and around the open duration.
func hintDuration(r *input, cfg core.Config) time.Duration {
	k, arg := r.intn(10), time.Duration(r.byte())
	switch k {
	case 0:
		return 0
	case 1:
		return -time.Millisecond
	case 2:
		return -arg*time.Second - 1
	case 3:
		return 1
	case 4:
		return arg * time.Millisecond
	case 5:
		return cfg.MaxRetryAfter
	case 6:
		return cfg.MaxRetryAfter + 1
	case 7:
		if arg&1 == 0 {
			return math.MaxInt64
		}
		return 400 * 24 * time.Hour
	case 8:
		return cfg.OpenDuration + arg - 128
	}
	return arg*7*time.Millisecond + 333*time.Microsecond
}

// hintClass names a hint for the reach counts.
func hintClass(d time.Duration) string {
	switch {
	case d == 0:
		return "zero"
	case d < 0:
		return "negative"
	case d > core.MaxOpenDurationLimit:
		return "huge"
	}
	return "small"
}

// hintedErr decodes an error carrying a hint: core.WithRetryAfter of one of
// doneErrs, wrapped by fmt.Errorf, joined after a plain failure, or nested
// in another hint (the outer one counts when positive).
func (x *differential) hintedErr(r *input) error {
	form := r.intn(4)
	base := doneErrs[r.intn(len(doneErrs))]
	err := core.WithRetryAfter(base, hintDuration(r, x.d.cfg))
	switch form {
	case 1:
		if err != nil {
			err = fmt.Errorf("wrapped: %w", err)
		}
	case 2:
		err = errors.Join(difftest.ErrFail, err)
	case 3:
		err = core.WithRetryAfter(err, hintDuration(r, x.d.cfg))
	}
	return err
}

// forceOpenDuration decodes ForceOpen's argument: zero (forced open), a
// nanosecond, small, the open duration, the limit, and invalid ones:
// negative, a nanosecond past the limit, the extremes.
func forceOpenDuration(r *input, cfg core.Config) time.Duration {
	k, arg := r.intn(10), time.Duration(r.byte())
	switch k {
	case 0, 1:
		return 0
	case 2:
		return 1
	case 3:
		return arg*time.Millisecond + arg
	case 4:
		return cfg.OpenDuration
	case 5:
		return -1
	case 6:
		return -arg * time.Second
	case 7:
		return core.MaxOpenDurationLimit
	case 8:
		return core.MaxOpenDurationLimit + 1
	}
	if arg&1 == 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// clockStep decodes a clock step: the edges (zero, a nanosecond, the exact
// deadline of the last rejection and a nanosecond short of it, the open
// duration, whole and almost-whole seconds), ordinary steps, idle gaps of
// many windows, steps backwards (R14), a ramp-up, a max wait, a hint bound,
// through the ramp's shares, and exactly to (and a nanosecond short of) the
// end of the current ramp-up and the current half-open max wait; kept in
// the exact range of the coarse deadlines.
func (x *differential) clockStep(r *input) time.Duration {
	arg := time.Duration(r.byte())
	cfg := &x.d.cfg
	now := x.x.Now()
	var d time.Duration
	switch k := r.intn(numSteps); k {
	case stepRamp:
		d = cfg.RampUpDuration
	case stepMaxWait:
		d = max(x.s.MaxWaitInHalfOpen, 0) // resolved: the default too; 0 for WaitForever
	case stepRampEnd, stepRampEndLess:
		if x.s.RampUpDuration == 0 { // the rules now: a Reconfigure may change it
			break
		}
		x.hit("step:ramp-end")
		d = firstReading(x.ramp.units, x.rampEnd) - now
		if k == stepRampEndLess {
			d--
		}
	case stepExpiry, stepExpiryLess:
		if x.s.MaxWaitInHalfOpen == core.WaitForever {
			break
		}
		x.hit("step:expiry")
		d = firstReading(x.maxWait.units, x.expiry) - now
		if k == stepExpiryLess {
			d--
		}
	case stepRetry:
		d = cfg.MaxRetryAfter
	case stepInRamp:
		d = cfg.RampUpDuration/8 + arg*time.Microsecond
	default:
		d = stepOf(arg, k, *cfg, x.lastWait)
	}
	// Stay within the documented exact range of the coarse deadlines
	// (docs/design.md, Widths): a ramp whose end the breaker may not have
	// seen yet within 2^18 units, the max wait of the current half-open
	// generation within 2^14 (its 15 bits).
	next := now + d
	c := x.x.Sides[0].B.Counts()
	if x.ramping && c.State == core.Closed && c.Generation == x.rampGen {
		if diff := int64(x.rampEnd) - int64(x.ramp.units(next)); diff < -(1<<18) || diff >= 1<<18 {
			x.hit("guard:ramp")
			return 0
		}
	}
	if x.hasExpiry && c.State == core.HalfOpen && c.Generation == x.expiryGen {
		if diff := int64(x.expiry) - int64(x.maxWait.units(next)); diff < -(1<<14) || diff >= 1<<14 {
			x.hit("guard:maxwait")
			return 0
		}
	}
	// And the open deadline within 2^35 ms (about 397 days) of the clock
	// (docs/design.md, Widths): it lies between the time of the transition
	// to open and a year (the longest open duration, hint or ForceOpen)
	// after it. ForceOpen of a year and steps of the last Wait reach it.
	if x.open {
		const exact = 1<<35*time.Millisecond - 2*time.Millisecond
		if since := max(next, 0) - max(x.openAt, 0); since > exact || -since > exact-core.MaxOpenDurationLimit {
			x.hit("guard:open")
			return 0
		}
	}
	return d
}

// coarse is the target's own reading of the coarse units of a duration d
// (the ramp-up, the half-open max wait), from Config.MaxWaitInHalfOpen's
// text: units of d/1024 rounded up to whole milliseconds, and a deadline at
// the first unit boundary at or after the start plus d. The target uses it
// to steer the clock to a deadline, to keep it in the exact range, and to
// know when a ramp is over; the breakers decide with their own code.
type coarse struct{ d, unit uint64 }

func coarseOf(d time.Duration) coarse {
	if d <= 0 {
		return coarse{}
	}
	const perUnit = uint64(1024 * time.Millisecond)
	return coarse{d: uint64(d), unit: (uint64(d) + perUnit - 1) / perUnit * uint64(time.Millisecond)}
}

// units is the reading now in whole units (0 when the feature is off).
func (c coarse) units(now time.Duration) uint64 {
	if c.unit == 0 {
		return 0
	}
	return uint64(max(now, 0)) / c.unit
}

// deadline is the deadline of a period that starts at at, in units.
func (c coarse) deadline(at time.Duration) uint64 {
	if c.unit == 0 {
		return 0
	}
	return (uint64(max(at, 0)) + c.d + c.unit - 1) / c.unit
}

// firstReading is the first clock reading (from 0) whose units reach
// target: units is non-decreasing.
func firstReading(units func(time.Duration) uint64, target uint64) time.Duration {
	if units(0) >= target {
		return 0
	}
	hi := time.Millisecond
	for units(hi) < target {
		hi *= 2
	}
	lo := time.Duration(0)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if units(mid) >= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// letter abbreviates a state: C, O, H, F, D, M.
func letter(s core.State) string {
	if int(s) < len("COHFDM") {
		return "COHFDM"[s : s+1]
	}
	return s.String()
}

// stepOf is clock step kind k (0..11) with argument arg.
func stepOf(arg time.Duration, k int, cfg core.Config, lastWait time.Duration) time.Duration {
	switch k {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return lastWait
	case 3:
		return lastWait - 1
	case 4:
		return cfg.OpenDuration
	case 5:
		return time.Second
	case 6:
		return time.Second - 1
	case 7:
		return arg * 10 * time.Millisecond
	case 8:
		return arg * time.Second // idle gaps up to 255 s: many windows
	case 9:
		return -arg * 10 * time.Millisecond // backwards
	case 10:
		return -arg * time.Second // far backwards, below zero too
	}
	return arg*time.Millisecond + arg*time.Microsecond
}

// TestDifferentialSeedsReach: the seeds of FuzzDifferential reach every
// operation and argument class, every state, and the transitions and
// rejections of the manual controls, the ramp-up, the max wait and the
// hints, so that a fuzz run starts from inputs that
// exercise them (and the committed corpus replays them too).
func TestDifferentialSeedsReach(t *testing.T) {
	reach := map[string]int{}
	for _, seed := range differentialSeeds {
		runDifferential(t, seed, reach)
	}
	t.Logf("reached: %v", reach)
	for _, k := range reachKeys {
		if reach[k] == 0 {
			t.Errorf("no seed reaches %s", k)
		}
	}
}
