package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

var (
	errFail    = errors.New("dependency failed")
	errIgnored = errors.New("ignored by the classifier")
	errGood    = errors.New("not found: a success for the classifier")
	errPanic   = errors.New("the classifier panics on this one")
)

// doneErrs are the errors a Done or Do may report.
var doneErrs = []error{nil, errFail, context.Canceled, context.DeadlineExceeded, errIgnored, errGood, errPanic,
	fmt.Errorf("wrapped: %w", context.Canceled)}

// customClassify maps errGood to Success and errIgnored to Ignored, and
// panics on errPanic (R10: the permit is then released as Ignored).
func customClassify(err error) core.Outcome {
	switch {
	case errors.Is(err, errPanic):
		panic(errPanic)
	case errors.Is(err, errGood):
		return core.Success
	case errors.Is(err, errIgnored):
		return core.Ignored
	}
	return core.DefaultClassifier(err)
}

// decoded is a fuzz input's head: the config and how the input is read.
type decoded struct {
	cfg core.Config
	// listenerReads: the listener calls back into the breaker (State,
	// Counts and, in the extended layout, Metrics) and the answers are
	// compared too.
	listenerReads bool
	// extended: the layout of issue 5, chosen by the high bit of the first
	// byte. It adds a features byte to the config (half-open max wait,
	// ramp-up, retry-after hints, metrics) and eight operations (the
	// manual controls, hints), and more kinds of clock step. Without the
	// bit an input decodes exactly as before issue 5, so the committed
	// corpus keeps its meaning.
	extended bool
}

// decodeConfig turns the head of a fuzz input into a config with small
// ranges (windows of a few calls or seconds, open durations of milliseconds
// to seconds, max waits, ramp-ups and hint bounds of a millisecond to a few
// seconds), so that short inputs reach every state. ok is false when the
// decoded config is invalid: the target then has nothing to compare.
func decodeConfig(r *input) (d decoded, ok bool) {
	head := r.byte()
	d.extended = head&0x80 != 0
	c := &d.cfg
	switch int(head&0x7f) % 3 { // before issue 5: r.intn(3), the same for head < 0x80
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
		c.Classifier = customClassify
	}
	d.listenerReads = rules&128 != 0
	if d.extended {
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
	}
	if _, err := c.Validate(); err != nil {
		c.OpenDurationBackoff, c.MaxOpenDuration = 0, 0
		if _, err := c.Validate(); err != nil {
			return d, false
		}
	}
	return d, true
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

// seen is one notification and, when the listener reads back, what State,
// Counts and Metrics said inside it (R12: a listener may call back in).
type seen struct {
	core.Transition
	State   core.State
	Counts  core.Counts
	Metrics core.Metrics
}

// side is one implementation under test with what its listener saw.
type side struct {
	b    core.CircuitBreaker
	seen []seen
}

// catch runs f and returns what it panicked with, if anything.
func catch(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// The operations, by op byte mod 10 (the layout before issue 5) or mod 18
// (the extended layout, which keeps the first ten).
const (
	opAllow      = 0 // and 1, and 15 in the extended layout
	opRecord     = 2
	opDone       = 3
	opClock      = 4 // and 5, and 17 in the extended layout
	opDo         = 6
	opForged     = 7
	opState      = 8
	opCall       = 9
	opForceOpen  = 10
	opManual     = 11 // Disable, MetricsOnly or Reset
	opRecordHint = 12
	opDoneHint   = 13
	opCallHint   = 14 // Do, or Allow and Done, with a hinted error
	opForgedHint = 16
	numOps       = 18
	numOldOps    = 10
)

// The clock-step kinds: the twelve of clockStep, then those of the
// extended layout.
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

// FuzzDifferential: the lock-free core and the mutex baseline, built from
// the same decoded config and sharing one manual clock, run the same
// decoded sequence of operations, and must agree at every step (R1-R15 as
// the baseline implements them):
//
//   - Allow: the same permit (generation, probe flag, start) or the same
//     rejection (ErrOpen, ErrHalfOpenFull, ErrForcedOpen or ErrRampingUp,
//     by identity and errors.Is) with the same Permit.Wait;
//   - Done with every kind of error (nil, a failure, context.Canceled,
//     context.DeadlineExceeded, a wrapped cancellation, and with the custom
//     classifier an ignored error, a success-mapped error and a panicking
//     classifier): the same panic, if any;
//   - Record with each outcome, on held permits (in any order, any number of
//     generations late) and on hand-built non-probe permits of nearby
//     generations;
//   - Do with a result, an error, a panic or a cancelled context: the same
//     value, error and panic;
//   - clock steps forwards (including zero, one nanosecond, exactly to the
//     deadline a rejection announced, and idle gaps of many windows) and
//     backwards (R14), below zero included;
//   - in the extended layout (first byte >= 0x80) the config may also set
//     MaxWaitInHalfOpen, RampUpDuration and RampUpStartPercent,
//     MaxRetryAfter and CollectMetrics, and the operations add
//     ForceOpen(d) (0, small, the open duration, the limit, and invalid
//     negative and huge values, which must fail with ErrInvalidArgument on
//     both sides and change nothing), Disable, MetricsOnly, Reset,
//     RecordHint(p, d) on held and hand-built permits with hints zero,
//     negative, small, at and past MaxRetryAfter and huge, Done and Do with
//     errors that carry hints (core.WithRetryAfter, wrapped, joined,
//     nested), and clock steps of a ramp-up, a max wait, a hint bound,
//     through the ramp's shares, and exactly to (and a nanosecond short
//     of) the end of the current ramp-up and the current half-open max
//     wait;
//   - after every operation: State, Counts (state, generation, window
//     counts, consecutive failures, probes), Metrics field by field, and
//     the full list of notifications (from, to, generation, time; and what
//     State, Counts and Metrics said inside the listener) are identical.
//     The notifications chain (each one's From is the last one's To, the
//     generation advances by one), and Metrics agree with what the test
//     saw on its own: admissions and rejections by kind, one outcome
//     (acted on or dropped) per Record, Done, RecordHint and admitted Do,
//     and transitions by [from][to]. Inside a listener the lock-free
//     breaker may not yet count the failure that caused a re-open or a
//     hinted trip (sameSeen says exactly when), which core.Metrics allows.
//
// Not covered: hand-built probe permits (see TestForgedProbePermit); clock
// gaps past the documented exact range of the deadlines (2^35 ms of the
// open deadline, 2^18 units of a ramp-up, 2^19 of a max wait,
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
// reach: every new operation and each of its argument classes, every state,
// and the new transitions and rejections.
var reachKeys = []string{
	"op:ForceOpen(0)", "op:ForceOpen(d)", "op:ForceOpen(invalid)", "op:Disable", "op:MetricsOnly", "op:Reset",
	"op:RecordHint(zero)", "op:RecordHint(negative)", "op:RecordHint(small)", "op:RecordHint(huge)",
	"op:RecordHint(forged)", "op:DoneHint", "op:CallHint(Do)", "op:CallHint(Done)",
	"state:closed", "state:open", "state:half-open", "state:forced-open", "state:disabled", "state:metrics-only",
	"reject:open", "reject:half-open-full", "reject:forced-open", "reject:ramping-up",
	"ramp:shed", "ramp:admit", "ramp:end", "maxwait:refused", "tr:H>H", "tr:M>M", "tr:H>C+ramp",
	"hint:trip", "hint:reopen", "hint:metrics-only", "metrics:dropped", "metrics:slow", "step:ramp-end", "step:expiry",
}

// rejections are the four rejection errors, in Metrics field order.
var rejections = [4]error{core.ErrOpen, core.ErrHalfOpenFull, core.ErrForcedOpen, core.ErrRampingUp}

// differential is one run of FuzzDifferential.
type differential struct {
	t             testing.TB
	d             decoded
	s             core.Settings
	clock         *core.ManualClock
	sides         [2]*side
	lf, mu        core.CircuitBreaker
	held          []core.Permit
	lastWait      time.Duration
	log           []string
	reach         map[string]int
	admitted      uint64    // the test's own count of granted permits
	rejected      [4]uint64 // and of rejections, by error
	outcomes      uint64    // and of outcomes handed to the breakers
	ramping       bool      // the last half-open -> closed started a ramp that may still be on
	rampGen       uint64
	rampEnd       uint64 // in ramp's units
	expiryGen     uint64 // the last half-open generation, with a max wait
	expiry        uint64 // in maxWait's units
	ramp, maxWait coarse // the units of the ramp-up and the max wait
	hasExpiry     bool
	open          bool          // the last transition went to open
	openAt        time.Duration // and when
	notifications int           // how many of sides[0].seen the test has looked at
}

// runDifferential decodes data and runs it on both implementations; reach,
// if not nil, counts what the run reached.
func runDifferential(t testing.TB, data []byte, reach map[string]int) {
	r := &input{b: data}
	d, ok := decodeConfig(r)
	if !ok {
		return
	}
	x := &differential{t: t, d: d, reach: reach, clock: core.NewManualClock(0)}
	x.d.cfg.Clock = x.clock
	x.s, _ = x.d.cfg.Validate()
	x.ramp, x.maxWait = coarseOf(x.s.RampUpDuration), coarseOf(x.s.MaxWaitInHalfOpen)
	x.sides = [2]*side{{}, {}}
	for i, s := range x.sides {
		c := x.d.cfg
		c.OnStateChange = func(tr core.Transition) {
			v := seen{Transition: tr}
			if d.listenerReads {
				v.State, v.Counts = s.b.State(), s.b.Counts()
				if d.extended {
					v.Metrics = s.b.Metrics()
				}
			}
			s.seen = append(s.seen, v)
		}
		var err error
		if i == 0 {
			s.b, err = core.New(c)
		} else {
			s.b, err = baseline.New(c)
		}
		if err != nil {
			t.Fatalf("New(%+v): %v, though Validate accepted it", x.d.cfg, err)
		}
	}
	x.lf, x.mu = x.sides[0].b, x.sides[1].b
	ops := numOldOps
	if d.extended {
		ops = numOps
	}
	for step := 0; r.more() && step < 400; step++ {
		op := int(r.byte()) % ops
		x.op(r, op)
		x.check()
	}
}

func (x *differential) hit(key string) {
	if x.reach != nil {
		x.reach[key]++
	}
}

func (x *differential) fail(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("config %+v\nafter %v\n"+format, append([]any{x.d.cfg, x.log}, args...)...)
}

func (x *differential) logf(format string, args ...any) {
	x.log = append(x.log, fmt.Sprintf(format, args...))
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
	g := x.lf.Counts().Generation
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

func (x *differential) op(r *input, op int) {
	lf, mu := x.lf, x.mu
	switch op {
	case 0, 1, 15:
		if p, err := x.allow(true); err == nil {
			x.held = append(x.held, p)
		}
	case opRecord:
		p, ok := x.take(r)
		if !ok {
			return
		}
		o := core.Outcome(r.intn(3))
		x.logf("Record(%+v,%v)", p, o)
		x.outcomes++
		lf.Record(p, o)
		mu.Record(p, o)
	case opDone:
		p, ok := x.take(r)
		if !ok {
			return
		}
		x.done(p, doneErrs[r.intn(len(doneErrs))])
	case 4, 5, 17:
		var d time.Duration
		if x.d.extended {
			d = x.extClockStep(r)
		} else {
			d = clockStep(r, x.d.cfg, x.lastWait)
		}
		x.logf("Advance(%v)", d)
		x.clock.Advance(d)
	case opDo:
		ctx := context.Background()
		kind := r.intn(8)
		if kind == 7 {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			ctx = cctx
		}
		x.do(ctx, fmt.Sprint(kind), kind, func(context.Context) (int, error) {
			if kind == 6 {
				panic("protected function panics")
			}
			return kind, doneErrs[kind]
		})
	case opForged:
		p, o := x.forged(r), core.Outcome(r.intn(3))
		x.logf("Record(forged %+v,%v)", p, o)
		x.outcomes++
		lf.Record(p, o)
		mu.Record(p, o)
	case opState:
		if s1, s2 := lf.State(), mu.State(); s1 != s2 {
			x.fail("State: lock-free %v, baseline %v", s1, s2)
		}
	case opCall: // a whole call: Allow, then Record at once
		o := core.Outcome(r.intn(3))
		p, err := x.allow(false)
		if err == nil {
			x.logf("Record(%+v,%v)", p, o)
			x.outcomes++
			lf.Record(p, o)
			mu.Record(p, o)
		}
	case opForceOpen:
		x.forceOpen(forceOpenDuration(r, x.d.cfg))
	case opManual:
		x.manual(r.intn(3))
	case opRecordHint:
		p, ok := x.take(r)
		if !ok {
			return
		}
		x.recordHint(p, r)
	case opDoneHint:
		p, ok := x.take(r)
		if !ok {
			return
		}
		x.hit("op:DoneHint")
		x.hinted(func() { x.done(p, x.hintedErr(r)) })
	case opCallHint:
		if r.intn(2) == 0 {
			x.hit("op:CallHint(Do)")
			err := x.hintedErr(r)
			x.hinted(func() {
				x.do(context.Background(), fmt.Sprintf("hinted %v", err), 8, func(context.Context) (int, error) { return 8, err })
			})
			return
		}
		x.hit("op:CallHint(Done)")
		err := x.hintedErr(r)
		x.hinted(func() {
			if p, e := x.allow(false); e == nil {
				x.done(p, err)
			}
		})
	case opForgedHint:
		x.hit("op:RecordHint(forged)")
		x.recordHint(x.forged(r), r)
	}
}

// allow calls Allow on both and compares the answers. The Wait of a
// rejection (ErrOpen, and since issue 11 ErrHalfOpenFull with a max wait)
// is kept for the next clock step when wait is set (before issue 5 only a
// plain Allow kept it; the extended layout keeps every one).
func (x *differential) allow(wait bool) (core.Permit, error) {
	before := x.lf.Counts()
	now := x.clock.Now()
	p1, e1 := x.lf.Allow()
	p2, e2 := x.mu.Allow()
	x.logf("Allow=%+v,%v", p1, e1)
	if p1 != p2 || !breakers.SameError(e1, e2) || errors.Is(e1, core.ErrRejected) != errors.Is(e2, core.ErrRejected) {
		x.fail("Allow: lock-free %+v %v, baseline %+v %v", p1, e1, p2, e2)
	}
	if e1 != nil && core.RetryAfterOf(e1) != p1.Wait {
		x.fail("Allow: the rejection %v asks for %v, its Permit.Wait is %v", e1, core.RetryAfterOf(e1), p1.Wait)
	}
	for _, rej := range rejections {
		if errors.Is(e1, rej) != errors.Is(e2, rej) {
			x.fail("Allow: lock-free %v, baseline %v disagree on errors.Is(%v)", e1, e2, rej)
		}
	}
	if e1 == nil {
		x.admitted++
	} else {
		x.rejection(e1)
		if p1.Wait > 0 && (wait || x.d.extended) {
			x.lastWait = p1.Wait
		}
	}
	// The ramp: Allow at its generation decides by share until the end,
	// and the first call at or after the end clears it.
	if x.ramping && before.State == core.Closed && before.Generation == x.rampGen {
		switch {
		case x.ramp.units(now) >= x.rampEnd:
			x.ramping = false
			x.hit("ramp:end")
			if e1 != nil {
				x.fail("Allow after the ramp's end refused with %v", e1)
			}
		case e1 == nil:
			x.hit("ramp:admit")
		default:
			x.hit("ramp:shed")
		}
	}
	if before.State == core.HalfOpen && errors.Is(e1, core.ErrHalfOpenFull) && x.hasExpiry && before.Generation == x.expiryGen {
		x.hit("maxwait:refused")
	}
	return p1, e1
}

// rejection counts a rejection by its error, as Metrics must.
func (x *differential) rejection(err error) {
	for i, rej := range rejections {
		if breakers.Reason(err) == rej {
			x.rejected[i]++
			x.hit("reject:" + [4]string{"open", "half-open-full", "forced-open", "ramping-up"}[i])
			return
		}
	}
	x.fail("Allow refused with %v, which is none of the four rejections", err)
}

// done calls Done on both and compares the panics.
func (x *differential) done(p core.Permit, err error) {
	x.logf("Done(%+v,%v)", p, err)
	x.outcomes++
	x1 := catch(func() { x.lf.Done(p, err) })
	x2 := catch(func() { x.mu.Done(p, err) })
	if x1 != x2 {
		x.fail("Done(%+v, %v) panicked with %v (lock-free) and %v (baseline)", p, err, x1, x2)
	}
}

// do runs core.Do on both and compares value, error and panic.
func (x *differential) do(ctx context.Context, name string, kind int, fn func(context.Context) (int, error)) {
	x.logf("Do(%s)", name)
	var v1, v2 int
	var e1, e2 error
	x1 := catch(func() { v1, e1 = core.Do(ctx, x.lf, fn) })
	x2 := catch(func() { v2, e2 = core.Do(ctx, x.mu, fn) })
	if v1 != v2 || !breakers.SameError(e1, e2) || x1 != x2 {
		x.fail("Do(%d): lock-free %v %v %v, baseline %v %v %v", kind, v1, e1, x1, v2, e2, x2)
	}
	switch {
	case ctx.Err() != nil: // no permit taken
	case errors.Is(e1, core.ErrRejected):
		x.rejection(e1)
	default:
		x.admitted++
		x.outcomes++
	}
}

// hinted runs f, an operation that may record a hint, and notes whether
// it tripped, re-opened or "would have opened".
func (x *differential) hinted(f func()) {
	n := len(x.sides[0].seen)
	f()
	for _, tr := range x.sides[0].seen[n:] {
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

// recordHint calls RecordHint on both.
func (x *differential) recordHint(p core.Permit, r *input) {
	d := hintDuration(r, x.d.cfg)
	x.hit("op:RecordHint(" + hintClass(d) + ")")
	x.logf("RecordHint(%+v,%v)", p, d)
	x.outcomes++
	x.hinted(func() {
		x.lf.RecordHint(p, d)
		x.mu.RecordHint(p, d)
	})
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
		err = errors.Join(errFail, err)
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

// forceOpen calls ForceOpen(d) on both: the same error, which matches
// ErrInvalidArgument exactly when d is outside 0..MaxOpenDurationLimit
// and then changes nothing.
func (x *differential) forceOpen(d time.Duration) {
	x.logf("ForceOpen(%v)", d)
	c0, m0, n0 := x.lf.Counts(), x.lf.Metrics(), len(x.sides[0].seen)
	e1 := x.lf.ForceOpen(d)
	e2 := x.mu.ForceOpen(d)
	invalid := d < 0 || d > core.MaxOpenDurationLimit
	if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
		x.fail("ForceOpen(%v): lock-free %v, baseline %v", d, e1, e2)
	}
	if invalid != errors.Is(e1, core.ErrInvalidArgument) || invalid != errors.Is(e2, core.ErrInvalidArgument) || invalid != (e1 != nil) {
		x.fail("ForceOpen(%v): lock-free %v, baseline %v; want ErrInvalidArgument: %v", d, e1, e2, invalid)
	}
	switch {
	case invalid:
		x.hit("op:ForceOpen(invalid)")
		if c, m, n := x.lf.Counts(), x.lf.Metrics(), len(x.sides[0].seen); c != c0 || m != m0 || n != n0 {
			x.fail("ForceOpen(%v) failed but changed the breaker: %+v -> %+v, metrics %+v -> %+v, %d -> %d notifications", d, c0, c, m0, m, n0, n)
		}
		return
	case d == 0:
		x.hit("op:ForceOpen(0)")
		x.manualDone(core.ForcedOpen, c0)
	default:
		x.hit("op:ForceOpen(d)")
		x.manualDone(core.Open, c0)
	}
}

// manual calls Disable, MetricsOnly or Reset on both.
func (x *differential) manual(which int) {
	c0 := x.lf.Counts()
	switch which {
	case 0:
		x.logf("Disable")
		x.hit("op:Disable")
		x.lf.Disable()
		x.mu.Disable()
		x.manualDone(core.Disabled, c0)
	case 1:
		x.logf("MetricsOnly")
		x.hit("op:MetricsOnly")
		x.lf.MetricsOnly()
		x.mu.MetricsOnly()
		x.manualDone(core.MetricsOnly, c0)
	default:
		x.logf("Reset")
		x.hit("op:Reset")
		x.lf.Reset()
		x.mu.Reset()
		x.manualDone(core.Closed, c0)
	}
}

// manualDone checks a manual control on its own terms: one transition to
// want at the next generation, with a fresh state.
func (x *differential) manualDone(want core.State, before core.Counts) {
	c := x.lf.Counts()
	if c.Generation != before.Generation+1 || c.State != want ||
		c.Calls != 0 || c.ConsecutiveFailures != 0 || c.ProbesInFlight != 0 || c.ProbeSuccesses != 0 {
		x.fail("manual control to %v: counts %+v -> %+v", want, before, c)
	}
	if seen := x.sides[0].seen; len(seen) == 0 || seen[len(seen)-1].To != want || seen[len(seen)-1].Generation != c.Generation {
		x.fail("manual control to %v: notifications %+v", want, seen)
	}
}

// extClockStep is clockStep with the steps of the extended layout, kept in
// the exact range of the coarse deadlines.
func (x *differential) extClockStep(r *input) time.Duration {
	arg := time.Duration(r.byte())
	cfg := &x.d.cfg
	now := x.clock.Now()
	var d time.Duration
	switch k := r.intn(numSteps); k {
	case stepRamp:
		d = cfg.RampUpDuration
	case stepMaxWait:
		d = max(x.s.MaxWaitInHalfOpen, 0) // resolved: the default too; 0 for WaitForever
	case stepRampEnd, stepRampEndLess:
		if cfg.RampUpDuration == 0 {
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
	// generation within 2^19.
	next := now + d
	c := x.lf.Counts()
	if x.ramping && c.State == core.Closed && c.Generation == x.rampGen {
		if diff := int64(x.rampEnd) - int64(x.ramp.units(next)); diff < -(1<<18) || diff >= 1<<18 {
			x.hit("guard:ramp")
			return 0
		}
	}
	if x.hasExpiry && c.State == core.HalfOpen && c.Generation == x.expiryGen {
		if diff := int64(x.expiry) - int64(x.maxWait.units(next)); diff < -(1<<19) || diff >= 1<<19 {
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

// check compares the two breakers after an operation and follows the new
// notifications.
func (x *differential) check() {
	lf, mu := x.lf, x.mu
	c1, c2 := lf.Counts(), mu.Counts()
	if c1 != c2 {
		x.fail("Counts: lock-free %+v\nbaseline %+v", c1, c2)
	}
	x.hit("state:" + c1.State.String())
	if i := x.sameSeen(); i >= 0 {
		a, b := x.sides[0].seen, x.sides[1].seen
		x.fail("notification %d differs (%d and %d in all): lock-free %+v\nbaseline %+v%s", i, len(a), len(b),
			at(a, i), at(b, i), listenerMetricsDiff(a, b, i))
	}
	seen := x.sides[0].seen
	for i := x.notifications; i < len(seen); i++ {
		tr := seen[i].Transition
		from, gen := core.Closed, uint64(0)
		if i > 0 {
			from, gen = seen[i-1].To, seen[i-1].Generation
		}
		if tr.From != from || tr.Generation != gen+1 {
			x.fail("notification %d %+v does not follow %v at generation %d", i, tr, from, gen)
		}
		x.hit(fmt.Sprintf("tr:%s>%s", letter(tr.From), letter(tr.To)))
		x.open, x.openAt = tr.To == core.Open, tr.At
		switch {
		case tr.To == core.HalfOpen && x.s.MaxWaitInHalfOpen > 0:
			x.hasExpiry, x.expiryGen, x.expiry = true, tr.Generation, x.maxWait.deadline(tr.At)
		case tr.From == core.HalfOpen && tr.To == core.Closed && x.s.RampUpDuration > 0:
			x.hit("tr:H>C+ramp")
			x.ramping, x.rampGen, x.rampEnd = true, tr.Generation, x.ramp.deadline(tr.At)
		}
	}
	x.notifications = len(seen)
	m1, m2 := lf.Metrics(), mu.Metrics()
	if m1 != m2 {
		x.fail("Metrics differ: %s\nlock-free %+v\nbaseline %+v", metricsDiff(m1, m2), m1, m2)
	}
	if !x.d.cfg.CollectMetrics {
		if m1 != (core.Metrics{}) {
			x.fail("Metrics without CollectMetrics: %+v", m1)
		}
		return
	}
	var tr [core.NumStates][core.NumStates]uint64
	for _, s := range seen {
		tr[s.From][s.To]++
	}
	want := core.Metrics{Admitted: x.admitted, RejectedOpen: x.rejected[0], RejectedHalfOpenFull: x.rejected[1],
		RejectedForcedOpen: x.rejected[2], RejectedRampUp: x.rejected[3], Transitions: tr}
	got := m1
	got.Successes, got.Failures, got.Ignored, got.SlowCalls, got.Dropped = 0, 0, 0, 0, 0
	if got != want {
		x.fail("Metrics disagree with the test's own counts: %s\ngot %+v\nwant %+v", metricsDiff(got, want), m1, want)
	}
	if n := m1.Successes + m1.Failures + m1.Ignored + m1.Dropped; n != x.outcomes || m1.SlowCalls > m1.Successes+m1.Failures {
		x.fail("Metrics count %d outcomes (%+v), the test recorded %d", n, m1, x.outcomes)
	}
	if m1.Dropped > 0 {
		x.hit("metrics:dropped")
	}
	if m1.SlowCalls > 0 {
		x.hit("metrics:slow")
	}
}

// sameSeen returns the index of the first notification the two listeners
// saw differently, or -1. Metrics read inside a listener must agree too:
// both implementations count the outcome that causes a transition before
// they publish it.
func (x *differential) sameSeen() int {
	a, b := x.sides[0].seen, x.sides[1].seen
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// at is s[i], or a zero seen past its end.
func at(s []seen, i int) seen {
	if i < len(s) {
		return s[i]
	}
	return seen{}
}

// listenerMetricsDiff names the Metrics fields in which the listeners' i-th
// readings differ.
func listenerMetricsDiff(a, b []seen, i int) string {
	if i >= len(a) || i >= len(b) {
		return ""
	}
	return "\nmetrics inside the listener differ: " + metricsDiff(a[i].Metrics, b[i].Metrics)
}

// metricsDiff names the fields in which a and b differ.
func metricsDiff(a, b core.Metrics) string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		name := va.Type().Field(i).Name
		if name == "Transitions" {
			for f := range core.NumStates {
				for t := range core.NumStates {
					if a.Transitions[f][t] != b.Transitions[f][t] {
						out = append(out, fmt.Sprintf("Transitions[%v][%v] %d != %d", core.State(f), core.State(t), a.Transitions[f][t], b.Transitions[f][t]))
					}
				}
			}
			continue
		}
		if va.Field(i).Uint() != vb.Field(i).Uint() {
			out = append(out, fmt.Sprintf("%s %d != %d", name, va.Field(i).Uint(), vb.Field(i).Uint()))
		}
	}
	return strings.Join(out, ", ")
}

// letter abbreviates a state: C, O, H, F, D, M.
func letter(s core.State) string {
	if int(s) < len("COHFDM") {
		return "COHFDM"[s : s+1]
	}
	return s.String()
}

// clockStep decodes a clock step: the edges (zero, a nanosecond, the exact
// deadline of the last rejection and a nanosecond short of it, the open
// duration, whole and almost-whole seconds), ordinary steps, idle gaps of
// many windows, and steps backwards (R14).
func clockStep(r *input, cfg core.Config, lastWait time.Duration) time.Duration {
	arg := time.Duration(r.byte())
	return stepOf(arg, r.intn(12), cfg, lastWait)
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
// new operation and argument class, every state, and the transitions and
// rejections of issue 5, so that a fuzz run starts from inputs that
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
