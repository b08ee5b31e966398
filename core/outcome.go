package core

import (
	"context"
	"errors"
	"time"
)

// Outcome is what a finished call means to the breaker.
type Outcome uint8

const (
	// Success is counted as a successful call. It is the zero value.
	Success Outcome = iota
	// Failure is counted as a failed call.
	Failure
	// Ignored is not counted at all: no call, no failure, no slow call, no
	// evaluation. In half-open it returns the probe's slot.
	Ignored
)

// String returns "success", "failure" or "ignored".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignored:
		return "ignored"
	}
	return "outcome(?)"
}

// ErrIgnored is what an error matches with errors.Is when it says nothing
// about the dependency's health: the call was refused by a local limit
// before it reached the dependency (a full bulkhead, for example), so
// counting it would trip the breaker on local overload; every rejection
// of a breaker matches it too. DefaultClassifier
// classifies such an error as Ignored, like context.Canceled: it is not
// counted, and a half-open probe that ends with it returns its slot. An
// error opts in with an Is method that reports true for ErrIgnored.
var ErrIgnored error = ignoredError{}

// ignoredError is ErrIgnored's type, a type of its own rather than
// errors.New's: an ordinary error (errors.New's type) then differs from it
// by type alone, so that comparing one with it takes no runtime call.
type ignoredError struct{}

func (ignoredError) Error() string {
	return "core: ignored: the call says nothing about the dependency"
}

// DefaultClassifier is the default classification: nil is Success, an error matching
// context.Canceled is Ignored (the caller gave up, which says nothing about the dependency), so
// is an error matching ErrIgnored (a local limit refused the call), and every other error,
// context.DeadlineExceeded included, is Failure.
func DefaultClassifier(err error) Outcome {
	switch {
	case err == nil:
		return Success
	case ignoredErr(err):
		return Ignored
	}
	return Failure
}

// plainFailure reports whether DefaultClassifier makes err a Failure
// without running any code of err's own: its type has no Is and no Unwrap
// method (errors.New's, and most sentinels) and it is neither ignored
// target, so classifying it cannot panic and needs no deferred release of
// the permit. False says nothing: DefaultClassifier decides such an error.
func plainFailure(err error) bool {
	switch err.(type) {
	case interface{ Is(error) bool }, interface{ Unwrap() error }, interface{ Unwrap() []error }:
		return false
	}
	return err != context.Canceled && err != ErrIgnored
}

// ignoredErr is errors.Is(err, context.Canceled) || errors.Is(err, ErrIgnored)
// in one walk of err's tree, in the order errors.Is walks it (depth first,
// each error before what it wraps), testing both targets at each error:
// every failing call is classified, and the two walks cost a failure twice
// the type assertions. Both targets are of comparable types (a pointer,
// an empty struct), so == never panics.
func ignoredErr(err error) bool {
	for {
		if err == context.Canceled || err == ErrIgnored {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && (x.Is(context.Canceled) || x.Is(ErrIgnored)) {
			return true
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			if err = x.Unwrap(); err == nil {
				return false
			}
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if e != nil && ignoredErr(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
}

// Permit is the small value Allow returns: the right to make one call, tied to
// the generation it was granted in. Pass it to Done or Record exactly
// once. It is a plain value: copying it costs nothing and allocates nothing.
//
// A permit whose generation has passed when its outcome arrives is stale: its
// outcome changes nothing, however many transitions have passed: its
// generation is compared whole, all 64 bits, so a permit held across 2^20
// or any other number of transitions below 2^64 never passes for a current
// one (docs/design.md). A zero Permit, or one built by hand, is
// treated as a permit of the generation it names (the zero Permit: of
// generation 0, current only until the first transition).
type Permit struct {
	// Generation is the breaker generation the permit was granted in: the
	// number of transitions the breaker had committed since New (the same
	// count as Transition.Generation and Counts.Generation), as an unsigned
	// 64-bit number that wraps only after 2^64 transitions. Zero on a
	// rejection.
	Generation uint64
	// Probe is true for a half-open probe.
	Probe bool
	// Start is the clock reading at Allow, taken only when slow calls are
	// configured, the permit is not a probe and the breaker is not
	// disabled (otherwise zero, and no clock was read for it; a disabled
	// breaker records nothing): nothing measures a probe's duration, and the
	// reading of the open -> half-open transition that hands out the first
	// probe may be another call's (docs/design.md, Transitions).
	Start time.Duration
	// RetryAfter is set on a rejection: how long, on the breaker clock,
	// until a call may be admitted. For ErrOpen, the time left of the open
	// duration; for ErrHalfOpenFull, Config.HalfOpenFullWait, or the time
	// left of the half-open max wait if that is shorter (always positive);
	// zero for ErrForcedOpen (only a manual control ends it), for
	// ErrRampingUp (the next call may be admitted) and for an admitted call.
	// The rejection error says the same: RetryAfterOf(err) equals
	// RetryAfter at the same clock reading.
	RetryAfter time.Duration
}

// The rejection reasons. Allow and Do never return these values
// themselves: they return an error of the breaker that refused, which
// matches its reason and ErrRejected with errors.Is (compare with
// errors.Is, never with ==) and implements RetryAfterHint with the wait of
// Permit.RetryAfter, so that RetryAfterOf(err) says when to try again. Returning
// a rejection allocates nothing.
var (
	// ErrOpen: the breaker is open and the call was not made; the wait is
	// the time left until a probe may go.
	ErrOpen error = &rejection{msg: "core: circuit breaker is open"}
	// ErrHalfOpenFull: the breaker is half-open and every permitted probe
	// is in flight, or the probes in flight already decide the verdict
	// (in flight + successes + tolerated failures = SuccessesToClose +
	// FailuresToReopen - 1; with the default FailuresToReopen of 1: no
	// more successes are needed than are in flight); the wait is
	// Config.HalfOpenFullWait, or less when the half-open max wait ends
	// sooner.
	ErrHalfOpenFull error = &rejection{msg: "core: circuit breaker is half-open and has no probe permit left"}
	// ErrForcedOpen: the breaker is ForcedOpen (Breaker.ForceOpen); the
	// wait is zero, as only a manual control ends it.
	ErrForcedOpen error = &rejection{msg: "core: circuit breaker is forced open"}
	// ErrRampingUp: the ramp-up after closing (Config.RampUpDuration) shed
	// the call; the wait is zero.
	ErrRampingUp error = &rejection{msg: "core: circuit breaker is ramping up after closing and shed this call"}
)

// ErrRejected matches every rejection (ErrOpen, ErrHalfOpenFull,
// ErrForcedOpen, ErrRampingUp) with errors.Is: use it to tell "the breaker
// refused" from the call's own errors. Every rejection matches ErrIgnored
// too: a breaker around another (one per target around one per method)
// does not count the inner one's refusals, calls that never left the
// process, as failures of the dependency.
var ErrRejected = errors.New("core: call rejected by the circuit breaker")

// rejection is a precomputed error, so the reject path never allocates
// (cep21/circuit does the same).
type rejection struct{ msg string }

func (r *rejection) Error() string        { return r.msg }
func (r *rejection) Is(target error) bool { return target == ErrRejected || target == ErrIgnored }
