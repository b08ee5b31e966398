package core

import (
	"context"
	"errors"
	"time"
)

// Outcome is what a finished call means to the breaker (R9).
type Outcome uint8

const (
	// Success is counted as a successful call. It is the zero value.
	Success Outcome = iota
	// Failure is counted as a failed call.
	Failure
	// Ignored is not counted at all: no call, no failure, no slow call, no
	// evaluation. In half-open it returns the probe's slot (R9, regressions
	// B05, B06, B08).
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

// DefaultClassifier is R9's rule: nil is Success, an error matching
// context.Canceled is Ignored (the caller gave up; regressions B06, B32), and
// every other error, context.DeadlineExceeded included, is Failure.
func DefaultClassifier(err error) Outcome {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, context.Canceled):
		return Ignored
	}
	return Failure
}

// Permit is the small value Allow returns: the right to make one call, tied to
// the generation it was granted in (R8). Pass it to Done or Record exactly
// once. It is a plain value: copying it costs nothing and allocates nothing.
//
// A permit whose generation has passed when its outcome arrives is stale: its
// outcome changes nothing (R8), however many transitions have passed: its
// generation is compared whole, all 64 bits, so a permit held across 2^20
// or any other number of transitions below 2^64 never passes for a current
// one (R15, docs/design.md). A zero Permit, or one built by hand, is
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
	// configured and the permit is not a probe (otherwise zero, and no
	// clock was read for it): nothing measures a probe's duration, and the
	// reading of the open -> half-open transition that hands out the first
	// probe may be another call's (docs/design.md, Transitions).
	Start time.Duration
	// Wait is set on a rejection from an open breaker (ErrOpen): the time
	// until a call may probe, measured on the breaker clock; and on an
	// ErrHalfOpenFull rejection: the time until the half-open max wait
	// (Config.MaxWaitInHalfOpen) ends and a call may start a new probe
	// generation, unless a verdict comes first. It is zero otherwise, and
	// on ErrHalfOpenFull with MaxWaitInHalfOpen set to WaitForever.
	Wait time.Duration
}

// ErrOpen is returned by Allow while the breaker is open: the call was not
// made. Permit.Wait tells when a probe may go. It matches
// ErrRejected with errors.Is. Returning it allocates nothing.
var ErrOpen error = &rejection{msg: "casbreaker: circuit breaker is open"}

// ErrHalfOpenFull is returned by Allow in half-open when every permitted probe
// is in flight or no more successes are needed (R6). Permit.Wait is the time
// left of the half-open max wait (zero with WaitForever). It matches
// ErrRejected.
var ErrHalfOpenFull error = &rejection{msg: "casbreaker: circuit breaker is half-open and has no probe permit left"}

// ErrForcedOpen is returned by Allow while the breaker is ForcedOpen (see
// Breaker.ForceOpen). Permit.Wait is zero: only a manual control ends it.
// It matches ErrRejected.
var ErrForcedOpen error = &rejection{msg: "casbreaker: circuit breaker is forced open"}

// ErrRampingUp is returned by Allow for a call that the ramp-up after
// closing sheds (Config.RampUpDuration). It matches ErrRejected.
var ErrRampingUp error = &rejection{msg: "casbreaker: circuit breaker is ramping up after closing and shed this call"}

// ErrRejected matches every rejection (ErrOpen, ErrHalfOpenFull,
// ErrForcedOpen, ErrRampingUp) with errors.Is: use it to tell "the breaker
// refused" from the call's own errors.
var ErrRejected = errors.New("casbreaker: call rejected by the circuit breaker")

// rejection is a precomputed error, so the reject path never allocates
// (cep21/circuit does the same).
type rejection struct{ msg string }

func (r *rejection) Error() string        { return r.msg }
func (r *rejection) Is(target error) bool { return target == ErrRejected }
