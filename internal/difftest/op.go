// Package difftest is the one operation interpreter every differential
// check of the tests runs on (the way Go's sync map tests share one mapOp
// and one apply): the random sequences of core's tests, the fuzz targets'
// decoded bytes, and the porcupine goroutines of race/ and their model
// build Op values and hand them to Apply, which runs one on a breaker and
// returns what a caller could observe as a comparable Obs. Differ runs
// each Op on every implementation of internal/breakers and checks, after
// every step, that they agree and that the observations keep the rules
// any breaker must (docs/semantics.md): notifications chained, Metrics
// counting what the calls saw, manual controls landing where they say.
//
// Only tests import it.
package difftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// Kind is what an Op calls.
type Kind uint8

// The operations. Record, RecordHint and Done use Op.Permit; the clock
// operations and Do use the side's manual clock.
const (
	Allow       Kind = iota // Allow()
	Record                  // Record(Permit, Outcome)
	RecordHint              // RecordHint(Permit, D)
	Done                    // Done(Permit, Err)
	Do                      // core.Do: see Op.D, Op.Err, Op.Panic, Op.Cancelled, Op.Value
	Advance                 // the clock moves by D (negative: backwards)
	SetClock                // the clock reads D from now on
	ForceOpen               // ForceOpen(D)
	Disable                 // Disable()
	MetricsOnly             // MetricsOnly()
	Reset                   // Reset()
	State                   // State()
	Counts                  // Counts()
	Metrics                 // Metrics()
	HalfOpen                // HalfOpen()
	Reconfigure             // Reconfigure(*Config)
	numKinds
)

var kindNames = [numKinds]string{"Allow", "Record", "RecordHint", "Done", "Do", "Advance", "SetClock",
	"ForceOpen", "Disable", "MetricsOnly", "Reset", "State", "Counts", "Metrics", "HalfOpen", "Reconfigure"}

// String names the operation ("Allow"), or gives the number of an
// unknown one.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one operation on a breaker. Its zero value is Allow. It is
// comparable when Err is (errors.New and fmt.Errorf values are), so a
// porcupine history can hold it as an input.
type Op struct {
	Kind    Kind
	Permit  core.Permit   // Record, RecordHint, Done: the permit, as Allow returned it
	Outcome core.Outcome  // Record
	Err     error         // Done: the call's error; Do: what the protected function returns
	D       time.Duration // RecordHint: the hint; Advance, SetClock: the clock; ForceOpen: the open duration; Do: how long the call takes on the clock
	Value   int           // Do: the protected function's result
	Panic   bool          // Do: the protected function panics with PanicValue instead of returning
	// Cancelled: Do runs with a context cancelled before the call, so
	// that it takes no permit.
	Cancelled bool
	// Config is Reconfigure's config (a pointer, so that Op stays
	// comparable; Alternatives makes a table of them). Every side is
	// handed the same one: a breaker keeps its own clock, listener and
	// gates, and reads none of the config's.
	Config *core.Config
}

// PanicValue is what a protected function panics with when Op.Panic is
// set.
const PanicValue = "the protected function panics"

// String writes op as a call with its arguments, for a failure's history.
func (op Op) String() string {
	switch op.Kind {
	case Record:
		return fmt.Sprintf("Record(%+v, %v)", op.Permit, op.Outcome)
	case RecordHint:
		return fmt.Sprintf("RecordHint(%+v, %v)", op.Permit, op.D)
	case Done:
		return fmt.Sprintf("Done(%+v, %v)", op.Permit, describeErr(op.Err))
	case Do:
		return fmt.Sprintf("Do(takes %v, returns %d, %v, panics %v, cancelled %v)", op.D, op.Value, describeErr(op.Err), op.Panic, op.Cancelled)
	case Advance, SetClock, ForceOpen:
		return fmt.Sprintf("%v(%v)", op.Kind, op.D)
	case Reconfigure:
		if op.Config == nil {
			return "Reconfigure(nil)"
		}
		return fmt.Sprintf("Reconfigure(%+v)", *op.Config)
	}
	return op.Kind.String() + "()"
}

func describeErr(err error) string {
	if h := core.RetryAfterOf(err); h > 0 {
		return fmt.Sprintf("%v (retry after %v)", err, h)
	}
	return fmt.Sprint(err)
}

// Obs is what a caller could observe of one Op: the returned permit,
// error, value and panic, or what a read returned. Two implementations
// agree on an Op exactly when their Obs are equal (==).
type Obs struct {
	Permit  core.Permit
	Err     Err
	Value   int
	Panic   string // fmt.Sprint of what the call panicked with; empty: no panic
	State   core.State
	Counts  core.Counts
	Metrics core.Metrics
}

// Apply runs op on b, whose clock is clk, and returns what it observed. A
// panic of the call is recovered into Obs.Panic. It is safe to call from
// many goroutines at once on one breaker, as the breaker's own methods
// are; clk is only read or moved by the clock operations and Do. It
// panics, naming the kind, when op.Kind is none of the operations.
func Apply(b breakers.Breaker, clk *core.ManualClock, op Op) Obs {
	if op.Kind >= numKinds {
		panic(fmt.Sprintf("difftest.Apply: unknown operation %v", op.Kind))
	}
	return apply(b, clk, op)
}

func apply(b breakers.Breaker, clk *core.ManualClock, op Op) (obs Obs) {
	defer func() {
		if v := recover(); v != nil {
			obs.Panic = fmt.Sprint(v)
		}
	}()
	switch op.Kind {
	case Allow:
		p, err := b.Allow()
		return Obs{Permit: p, Err: ErrOf(err)}
	case Record:
		b.Record(op.Permit, op.Outcome)
	case RecordHint:
		b.RecordHint(op.Permit, op.D)
	case Done:
		b.Done(op.Permit, op.Err)
	case Do:
		return do(b, clk, op)
	case Advance:
		clk.Advance(op.D)
	case SetClock:
		clk.Set(op.D)
	case ForceOpen:
		return Obs{Err: ErrOf(b.ForceOpen(op.D))}
	case Disable:
		b.Disable()
	case MetricsOnly:
		b.MetricsOnly()
	case Reset:
		b.Reset()
	case HalfOpen:
		b.HalfOpen()
	case Reconfigure:
		// A breaker that cannot be reconfigured, or a nil Config, panics,
		// into Obs.Panic.
		return Obs{Err: ErrOf(b.(breakers.Reconfigurable).Reconfigure(*op.Config))}
	default:
		return read(b, op.Kind)
	}
	return Obs{}
}

// read is Apply's State, Counts and Metrics.
func read(b breakers.Breaker, k Kind) Obs {
	switch k {
	case State:
		return Obs{State: b.State()}
	case Counts:
		return Obs{Counts: b.Counts()}
	}
	return Obs{Metrics: b.Metrics()}
}

// do is Apply's Do: the panic, if any, is recovered by Apply after Do has
// released the permit.
func do(b breakers.Breaker, clk *core.ManualClock, op Op) Obs {
	ctx := context.Background()
	if op.Cancelled {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ctx = cctx
	}
	v, err := core.Do(ctx, b, func(context.Context) (int, error) {
		clk.Advance(op.D)
		if op.Panic {
			panic(PanicValue)
		}
		return op.Value, op.Err
	})
	return Obs{Value: v, Err: ErrOf(err)}
}

// Err is what a caller can tell of a returned error: which of the
// sentinels it matches (errors.Is), the wait it asks for
// (core.RetryAfterOf), and, for an error that is no rejection, its text.
// Rejections are compared without their text: each implementation returns
// rejections of its own that only match the reasons. The zero value is a
// nil error.
type Err struct {
	Is   uint8 // a bit per sentinel, in the order of Sentinels; the top bit: not nil
	Wait time.Duration
	Text string
}

// Sentinels are the errors Err records a match of: the four rejection
// reasons, core.ErrRejected, core.ErrInvalidArgument and a ProbeGate's
// ErrProbeRefused.
var Sentinels = [...]error{core.ErrOpen, core.ErrHalfOpenFull, core.ErrForcedOpen, core.ErrRampingUp,
	core.ErrRejected, core.ErrInvalidArgument, ErrProbeRefused}

const notNil = 1 << 7

// ErrOf describes err.
func ErrOf(err error) Err {
	if err == nil {
		return Err{}
	}
	e := Err{Is: notNil, Wait: core.RetryAfterOf(err)}
	for i, s := range Sentinels {
		if errors.Is(err, s) {
			e.Is |= 1 << i
		}
	}
	if !e.Matches(core.ErrRejected) {
		e.Text = err.Error()
	}
	return e
}

// Nil reports whether the error was nil.
func (e Err) Nil() bool { return e.Is == 0 }

// Matches reports whether the error matched s, one of Sentinels (errors.Is
// when it was returned); it is false for any other s.
func (e Err) Matches(s error) bool {
	for i, x := range Sentinels {
		if x == s {
			return e.Is&(1<<i) != 0
		}
	}
	return false
}

// Reason is the rejection reason the error matched (core.ErrOpen,
// core.ErrHalfOpenFull, core.ErrForcedOpen or core.ErrRampingUp), or nil
// when it is no rejection.
func (e Err) Reason() error {
	for _, r := range Sentinels[:4] {
		if e.Matches(r) {
			return r
		}
	}
	return nil
}

// String is "<nil>", the text of an error that is no rejection, or the
// rejection's reason and wait.
func (e Err) String() string {
	switch {
	case e.Nil():
		return "<nil>"
	case e.Text != "":
		return e.Text
	}
	return fmt.Sprintf("rejected: %v, wait %v", e.Reason(), e.Wait)
}
