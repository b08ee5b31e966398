package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Guard is the two-step API that Do and the packages built on it
// (httpbreaker, registry users) need: admit a call, then report it. Both
// implementations keep it, and so can a test double.
type Guard interface {
	// Allow asks to make one call: a Permit, or a rejection that matches
	// ErrRejected and carries a RetryAfterHint (see Breaker.Allow).
	Allow() (Permit, error)
	// Done reports the call made with p by its error, classified by the
	// breaker's classifier (see Breaker.Done).
	Done(p Permit, err error)
	// Record reports the call made with p by its outcome (see
	// Breaker.Record).
	Record(p Permit, o Outcome)
}

// recordError is Done for an error: it classifies err with the
// classifier and records the outcome for p; a Failure whose error carries a
// retry-after hint (RetryAfterOf) is recorded with RecordHint when
// Config.MaxRetryAfter enables hints. If the classifier, or the error's
// RetryAfter or Unwrap method, panics, p is recorded as Ignored, so no
// half-open slot leaks, and the panic propagates unchanged.
func (b *Breaker) recordError(p Permit, err error) {
	if b.peek() == moving {
		// A Reconfigure replaced the rules, the classifier's included:
		// classify on the successor, once.
		b.successor().Done(p, err)
		return
	}
	s := &b.cfg
	o, hint := Ignored, time.Duration(0)
	defer func() {
		if hint > 0 {
			b.recordHint(p, hint, err)
			return
		}
		b.recordOf(p, o, err)
	}()
	o = s.Classifier(err)
	if o == Failure && s.MaxRetryAfter > 0 {
		// The error's own RetryAfter and Unwrap methods run here; if one
		// panics, the permit is released as Ignored, like a panicking
		// classifier's, so that no half-open slot leaks.
		o = Ignored
		hint = RetryAfterOf(err)
		o = Failure
	}
}

// ErrInvalidArgument is what a manual control's error for a bad argument
// matches with errors.Is; the error names the argument and its value.
var ErrInvalidArgument = errors.New("core: invalid argument")

// checkForceOpen is ForceOpen's argument rule: d must be in
// 0..MaxOpenDurationLimit.
func checkForceOpen(d time.Duration) error {
	if d < 0 || d > MaxOpenDurationLimit {
		return fmt.Errorf("%w: ForceOpen duration %v is outside 0..%v (0: until another manual control)", ErrInvalidArgument, d, MaxOpenDurationLimit)
	}
	return nil
}

// Do runs fn under b, the common case of the two-step API. It returns
// ctx.Err() without calling fn (and without taking a permit) if ctx is
// already done, the rejection error if b refuses the call, and otherwise
// fn's result and error. A rejection matches ErrRejected and its reason
// (ErrOpen and the rest) with errors.Is, and says when to try again:
// RetryAfterOf(err) is the rejecting Allow's Permit.RetryAfter. fn's error is
// classified by the breaker's classifier: by default context.Canceled is
// ignored and every other error a failure. A panic in fn is recorded as a
// failure and re-panics with the same value. Do allocates nothing of its
// own. It panics, with a message that names the misuse, if ctx, b or fn
// is nil, b a nil *Breaker included (a core.New whose error went
// unchecked).
func Do[T any](ctx context.Context, b Guard, fn func(context.Context) (T, error)) (T, error) {
	if ctx == nil || b == nil || fn == nil {
		panic(doMisuse(ctx == nil, b == nil))
	}
	if cb, ok := b.(*Breaker); ok && cb == nil {
		panic("core: Do with a nil *Breaker: make one with core.New and check its error")
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	p, err := b.Allow()
	if err != nil {
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			b.Record(p, Failure)
		}
	}()
	v, err := fn(ctx)
	finished = true
	b.Done(p, err)
	return v, err
}

// doMisuse is Do's panic message for a nil argument: the context, the
// breaker, or else the function.
func doMisuse(nilCtx, nilGuard bool) string {
	switch {
	case nilCtx:
		return "core: Do with a nil context: pass context.Background() or the caller's context"
	case nilGuard:
		return "core: Do with a nil Guard: pass a breaker made with core.New"
	}
	return "core: Do with a nil function: pass the call to make"
}
