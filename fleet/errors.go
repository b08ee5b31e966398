package fleet

import (
	"errors"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// ErrLeaseRefused is what the error of a half-open Allow refused for want
// of a probe lease matches with errors.Is: the fleet's probe budget for
// this half-open period is taken by other members' probes. The error also
// matches core.ErrHalfOpenFull (and so core.ErrRejected and
// core.ErrIgnored), and core.RetryAfterOf gives the wait.
var ErrLeaseRefused = errors.New("fleet: half-open probe refused: the fleet's probe budget is taken")

// ErrStoreUnavailable is what the error of a half-open Allow refused under
// Options.FailClosed matches with errors.Is: the store could not be
// reached to take a probe lease. The error also matches
// core.ErrHalfOpenFull.
var ErrStoreUnavailable = errors.New("fleet: half-open probe refused: the store cannot be reached (FailClosed)")

// leaseRefusal is the error of a refusal for want of a lease: one pointer,
// so returning it allocates nothing, and its RetryAfter is computed when
// asked, from the wait the store gave.
type leaseRefusal struct{ m *Member }

func (r leaseRefusal) Error() string        { return ErrLeaseRefused.Error() }
func (r leaseRefusal) Is(target error) bool { return target == ErrLeaseRefused }
func (r leaseRefusal) Unwrap() error        { return core.ErrHalfOpenFull }
func (r leaseRefusal) RetryAfter() time.Duration {
	return max(time.Duration(r.m.refusedUntil.Load())-r.m.clock.Now(), 0)
}

// storeRefusal is the error of a refusal under Options.FailClosed.
type storeRefusal struct{ m *Member }

func (r storeRefusal) Error() string             { return ErrStoreUnavailable.Error() }
func (r storeRefusal) Is(target error) bool      { return target == ErrStoreUnavailable }
func (r storeRefusal) Unwrap() error             { return core.ErrHalfOpenFull }
func (r storeRefusal) RetryAfter() time.Duration { return r.m.o.MinBackoff }
