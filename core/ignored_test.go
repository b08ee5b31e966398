package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// localLimit is an error of a local limit (a full bulkhead, say): it opts
// into ErrIgnored with its Is method.
type localLimit struct{}

func (localLimit) Error() string        { return "local limit reached" }
func (localLimit) Is(target error) bool { return target == core.ErrIgnored }

func TestDefaultClassifierIgnored(t *testing.T) {
	require.Equal(t, core.Ignored, core.DefaultClassifier(core.ErrIgnored))
	require.Equal(t, core.Ignored, core.DefaultClassifier(localLimit{}))
	require.Equal(t, core.Ignored, core.DefaultClassifier(fmt.Errorf("wrapped: %w", localLimit{})))
	require.Equal(t, core.Failure, core.DefaultClassifier(errFail))
}

// isOnly is an error whose Is method matches one target, and unwraps to
// next.
type isOnly struct {
	target, next error
}

func (e isOnly) Error() string         { return "is " + fmt.Sprint(e.target) }
func (e isOnly) Is(target error) bool  { return target == e.target }
func (e isOnly) Unwrap() error         { return e.next }
func (e multi) Unwrap() []error        { return e }
func (e multi) Error() string          { return "multi" }
func (e uncomparable) Error() string   { return "uncomparable" }
func (e uncomparable) Unwrap() []error { return e.errs }

type (
	multi        []error
	uncomparable struct{ errs []error }
	// plainPtr and plainSlice have neither Is nor Unwrap, so the
	// lock-free breaker classifies them without calling the classifier
	// (a typed nil one, and one whose type is not comparable, too).
	plainPtr   struct{ msg string }
	plainSlice []string
)

func (e *plainPtr) Error() string {
	if e == nil {
		return "nil plainPtr"
	}
	return e.msg
}

func (e plainSlice) Error() string { return "plain slice" }

// DefaultClassifier, and each implementation's own default (Classifier
// unset), walks an error's tree once for both of its ignored targets; each
// must say exactly what errors.Is says of each, over wrapping, joins, Is
// methods, nil branches and errors whose type is not comparable.
func TestDefaultClassifierIsErrorsIs(t *testing.T) {
	canceled := fmt.Errorf("op: %w", context.Canceled)
	cases := []error{
		errFail, context.Canceled, context.DeadlineExceeded, core.ErrIgnored, canceled, localLimit{},
		fmt.Errorf("a: %w", fmt.Errorf("b: %w", errFail)),
		errors.Join(errFail, nil, canceled), errors.Join(errFail, errors.New("other")),
		isOnly{target: core.ErrIgnored}, isOnly{target: context.Canceled}, isOnly{target: errFail, next: canceled},
		isOnly{target: errFail}, multi{nil, errFail, multi{isOnly{target: core.ErrIgnored}}}, multi{},
		uncomparable{errs: []error{errFail}}, uncomparable{errs: []error{nil, uncomparable{errs: []error{core.ErrIgnored}}}},
		fmt.Errorf("%w and %w", errFail, uncomparable{errs: []error{context.Canceled}}),
		(*plainPtr)(nil), &plainPtr{msg: "context canceled"}, plainSlice{"x"}, errors.New(context.Canceled.Error()),
	}
	for _, err := range cases {
		want := core.Failure
		if errors.Is(err, context.Canceled) || errors.Is(err, core.ErrIgnored) {
			want = core.Ignored
		}
		require.Equal(t, want, core.DefaultClassifier(err), "%#v", err)
		forEachImpl(t, func(t *testing.T, mk maker) {
			// Both windows: the lock-free breaker takes a plain error's
			// failure straight to either window's own path.
			for _, wt := range []core.WindowType{core.CountBased, core.TimeBased} {
				r := mk.build(t, core.Config{WindowType: wt, WindowSize: 10, FailureCountThreshold: 2})
				r.B.Done(r.A(), err)
				if want == core.Ignored {
					r.Cnt(0, 0, 0, 0)
					continue
				}
				r.Cnt(1, 1, 0, 0)
				r.B.Done(r.A(), err) // the second failure trips
				require.Equal(t, core.Open, r.B.State(), "%v window, %#v", wt, err)
			}
		})
	}
}

// TestIgnoredErrorNotCounted: with the default classifier an error matching
// ErrIgnored is not counted in closed state, and a half-open probe that ends
// with one returns its slot, in both implementations, with Classifier unset
// (each implementation's own default) and set to DefaultClassifier.
func TestIgnoredErrorNotCounted(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, classifier := range []func(error) core.Outcome{nil, core.DefaultClassifier} {
			ignoredRun(t, mk.build(t, core.Config{
				WindowSize: 2, FailureRateThreshold: 50, OpenDuration: time.Second,
				Classifier: classifier,
			}))
		}
	})
}

func ignoredRun(t *testing.T, r *rig) {
	for range 10 {
		p := r.A()
		r.B.Done(p, localLimit{})
	}
	r.Is(core.Closed)
	r.Cnt(0, 0, 0, 0)

	r.B.Done(r.A(), errFail)
	r.B.Done(r.A(), errFail)
	r.Is(core.Open)
	r.Clock.Advance(time.Second)
	probe := r.A()
	require.True(t, probe.Probe)
	r.Reject(core.ErrHalfOpenFull)
	r.B.Done(probe, fmt.Errorf("bulkhead: %w", localLimit{}))
	r.Is(core.HalfOpen)
	again := r.A()
	require.True(t, again.Probe, "the ignored probe's slot was not returned")
	r.B.Done(again, nil)
	r.Is(core.Closed)
}

// A breaker's rejection, seen by a breaker around it (one per target
// around one per method), is ignored: the refused call never left the
// process, and counting it would open the outer breaker on the inner one's
// refusals.
func TestInnerRejectionIsIgnored(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		inner := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute})
		inner.B.Done(inner.A(), errFail)
		inner.Is(core.Open)
		_, rejected := inner.B.Allow()
		require.ErrorIs(t, rejected, core.ErrIgnored)
		require.ErrorIs(t, rejected, core.ErrOpen)
		require.Equal(t, core.Ignored, core.DefaultClassifier(rejected))
		outer := mk.build(t, core.Config{ConsecutiveFailures: 1})
		outer.B.Done(outer.A(), rejected)
		outer.Is(core.Closed)
		outer.Cnt(0, 0, 0, 0)
	})
}
