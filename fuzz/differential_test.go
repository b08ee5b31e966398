package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
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

// decodeConfig turns the head of a fuzz input into a config with small
// ranges (windows of a few calls or seconds, open durations of milliseconds
// to seconds), so that short inputs reach every state. ok is false when the
// decoded config is invalid: the target then has nothing to compare.
func decodeConfig(r *input) (c core.Config, listenerReads bool, ok bool) {
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
		c.Classifier = customClassify
	}
	listenerReads = rules&128 != 0
	if _, err := c.Validate(); err != nil {
		c.OpenDurationBackoff, c.MaxOpenDuration = 0, 0
		if _, err := c.Validate(); err != nil {
			return c, false, false
		}
	}
	return c, listenerReads, true
}

// seen is one notification and, when the listener reads back, what State
// and Counts said inside it (R12: a listener may call back in).
type seen struct {
	core.Transition
	State  core.State
	Counts core.Counts
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

// FuzzDifferential: the lock-free core and the mutex baseline, built from
// the same decoded config and sharing one manual clock, run the same
// decoded sequence of operations, and must agree at every step (R1-R15 as
// the baseline implements them):
//
//   - Allow: the same permit (generation, probe flag, start) or the same
//     rejection (ErrOpen or ErrHalfOpenFull, by errors.Is) with the same
//     Permit.Wait;
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
//   - after every operation: State, Counts (state, generation, window
//     counts, consecutive failures, probes) and the full list of
//     notifications (from, to, generation, time; and what State and Counts
//     said inside the listener) are identical.
//
// Not covered: the manual controls (forced open, disabled, metrics-only) do
// not exist yet; hand-built probe permits are not fuzzed (see
// TestForgedProbePermit).
func FuzzDifferential(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 1, 4, 0, 1, 10, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 5, 200, 0, 0, 1, 0},
		{0, 0x21, 3, 50, 2, 20, 2, 3, 2, 4, 0, 1, 1, 0, 1, 1, 0, 1, 1, 5, 40, 0, 0, 0, 3, 1, 0, 2, 1, 0},
		{1, 0x03, 5, 30, 2, 2, 12, 0, 3, 2, 0, 2, 1, 5, 100, 0, 2, 1, 0, 2, 1, 5, 255, 0, 4, 0, 0, 0},
		{2, 0x50, 2, 1, 3, 3, 0, 1, 0, 1, 1, 6, 0, 1, 5, 3, 0, 0, 0, 1, 9, 0, 0, 0, 10, 2},
		{0, 0x8d, 6, 60, 1, 90, 20, 3, 40, 2, 2, 2, 0, 0, 5, 2, 0, 1, 0, 1, 0, 11, 0, 0, 5, 7, 0, 0, 0, 1},
		{1, 0xff, 3, 40, 2, 50, 60, 4, 2, 100, 1, 30, 1, 4, 4, 0, 0, 0, 0, 1, 0, 5, 90, 0, 1, 0, 0, 3, 6, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &input{b: data}
		cfg, listenerReads, ok := decodeConfig(r)
		if !ok {
			return
		}
		clock := core.NewManualClock(0)
		cfg.Clock = clock
		sides := [2]*side{{}, {}}
		for i, s := range sides {
			c := cfg
			c.OnStateChange = func(tr core.Transition) {
				v := seen{Transition: tr}
				if listenerReads {
					v.State, v.Counts = s.b.State(), s.b.Counts()
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
				t.Fatalf("New(%+v): %v, though Validate accepted it", cfg, err)
			}
		}
		lf, mu := sides[0].b, sides[1].b
		var held []core.Permit
		var lastWait time.Duration
		var log []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("config %+v\nafter %v\n"+format, append([]any{cfg, log}, args...)...)
		}
		for step := 0; r.more() && step < 400; step++ {
			op := r.byte()
			switch op % 10 {
			case 0, 1: // Allow
				p1, e1 := lf.Allow()
				p2, e2 := mu.Allow()
				log = append(log, fmt.Sprintf("Allow=%+v,%v", p1, e1))
				if p1 != p2 || e1 != e2 || errors.Is(e1, core.ErrOpen) != errors.Is(e2, core.ErrOpen) ||
					errors.Is(e1, core.ErrHalfOpenFull) != errors.Is(e2, core.ErrHalfOpenFull) {
					fail("Allow: lock-free %+v %v, baseline %+v %v", p1, e1, p2, e2)
				}
				if e1 == nil {
					held = append(held, p1)
				} else if !errors.Is(e1, core.ErrRejected) {
					fail("Allow refused with %v, which is not ErrRejected", e1)
				} else if p1.Wait > 0 {
					lastWait = p1.Wait
				}
			case 2: // Record a held permit
				if len(held) == 0 {
					continue
				}
				i := r.intn(len(held))
				p, o := held[i], core.Outcome(r.intn(3))
				held = append(held[:i], held[i+1:]...)
				log = append(log, fmt.Sprintf("Record(%+v,%v)", p, o))
				lf.Record(p, o)
				mu.Record(p, o)
			case 3: // Done a held permit
				if len(held) == 0 {
					continue
				}
				i := r.intn(len(held))
				p, err := held[i], doneErrs[r.intn(len(doneErrs))]
				held = append(held[:i], held[i+1:]...)
				log = append(log, fmt.Sprintf("Done(%+v,%v)", p, err))
				x1 := catch(func() { lf.Done(p, err) })
				x2 := catch(func() { mu.Done(p, err) })
				if x1 != x2 {
					fail("Done(%+v, %v) panicked with %v (lock-free) and %v (baseline)", p, err, x1, x2)
				}
			case 4, 5: // move the clock
				d := clockStep(r, cfg, lastWait)
				log = append(log, fmt.Sprintf("Advance(%v)", d))
				clock.Advance(d)
			case 6: // Do
				ctx := context.Background()
				kind := r.intn(8)
				if kind == 7 {
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					ctx = cctx
				}
				fn := func(context.Context) (int, error) {
					if kind == 6 {
						panic("protected function panics")
					}
					return kind, doneErrs[kind]
				}
				log = append(log, fmt.Sprintf("Do(%d)", kind))
				var v1, v2 int
				var e1, e2 error
				x1 := catch(func() { v1, e1 = core.Do(ctx, lf, fn) })
				x2 := catch(func() { v2, e2 = core.Do(ctx, mu, fn) })
				if v1 != v2 || e1 != e2 || x1 != x2 {
					fail("Do(%d): lock-free %v %v %v, baseline %v %v %v", kind, v1, e1, x1, v2, e2, x2)
				}
			case 7: // Record a hand-built closed-state permit of a nearby generation
				gen := (lf.Counts().Generation + uint32(r.intn(5)) - 2) % core.GenerationModulus
				p, o := core.Permit{Generation: gen}, core.Outcome(r.intn(3))
				log = append(log, fmt.Sprintf("Record(forged %+v,%v)", p, o))
				lf.Record(p, o)
				mu.Record(p, o)
			case 8: // State
				s1, s2 := lf.State(), mu.State()
				if s1 != s2 {
					fail("State: lock-free %v, baseline %v", s1, s2)
				}
			default: // a whole call: Allow, then Record at once
				o := core.Outcome(r.intn(3))
				p1, e1 := lf.Allow()
				p2, e2 := mu.Allow()
				log = append(log, fmt.Sprintf("X(%v)=%+v,%v", o, p1, e1))
				if p1 != p2 || e1 != e2 {
					fail("Allow: lock-free %+v %v, baseline %+v %v", p1, e1, p2, e2)
				}
				if e1 == nil {
					lf.Record(p1, o)
					mu.Record(p2, o)
				}
			}
			c1, c2 := lf.Counts(), mu.Counts()
			if c1 != c2 {
				fail("Counts: lock-free %+v\nbaseline %+v", c1, c2)
			}
			if !reflect.DeepEqual(sides[0].seen, sides[1].seen) {
				fail("notifications: lock-free %+v\nbaseline %+v", sides[0].seen, sides[1].seen)
			}
		}
	})
}

// clockStep decodes a clock step: the edges (zero, a nanosecond, the exact
// deadline of the last rejection and a nanosecond short of it, the open
// duration, whole and almost-whole seconds), ordinary steps, idle gaps of
// many windows, and steps backwards (R14).
func clockStep(r *input, cfg core.Config, lastWait time.Duration) time.Duration {
	arg := time.Duration(r.byte())
	switch r.intn(12) {
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
