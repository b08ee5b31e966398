// Package breakers is the one table of circuit-breaker implementations that
// every behavioural test, race test and fuzz target runs against (the
// uber-go/ratelimit pattern): the lock-free core and the mutex baseline,
// behind the Breaker contract. Adding an implementation here adds
// it to every test at once.
package breakers

import (
	"errors"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
)

// Breaker is the contract both implementations keep: the lock-free
// core.Breaker and the mutex baseline.Breaker. Every behavioural test runs
// against both through it.
type Breaker interface {
	core.Guard
	RecordHint(p core.Permit, retryAfter time.Duration)
	State() core.State
	Counts() core.Counts
	Metrics() core.Metrics
	RetryAfter() time.Duration
	ForceOpen(d time.Duration) error
	Disable()
	MetricsOnly()
	HalfOpen()
	Reset()
	Snapshot(now time.Time, withWindow bool) (core.Snapshot, error)
}

// Reconfigurable is a Breaker whose rules can be replaced while it runs
// (docs/semantics.md R18): both implementations are; a registry's Breaker,
// which keeps the Breaker contract, is not.
type Reconfigurable interface {
	Breaker
	Reconfigure(c core.Config) error
}

var (
	_ Reconfigurable = (*core.Breaker)(nil)
	_ Reconfigurable = (*baseline.Breaker)(nil)
)

// Impl names one implementation and builds it from a Config.
type Impl struct {
	Name string
	New  func(core.Config) (Breaker, error)
	// Restore builds it from a Config and a snapshot at a wall-clock
	// time (core.Restore, baseline.Restore).
	Restore func(core.Config, core.Snapshot, time.Time) (Breaker, error)
	// Zero is the implementation's zero value, made without New (the
	// misuse every method must refuse with a panic that names New).
	Zero func() Breaker
}

// All lists every implementation, the lock-free core first.
var All = []Impl{
	{
		Name: "lockfree",
		New:  func(c core.Config) (Breaker, error) { return core.New(c) },
		Restore: func(c core.Config, s core.Snapshot, now time.Time) (Breaker, error) {
			return core.Restore(c, s, now)
		},
		Zero: func() Breaker { return new(core.Breaker) },
	},
	{
		Name: "mutex",
		New:  func(c core.Config) (Breaker, error) { return baseline.New(c) },
		Restore: func(c core.Config, s core.Snapshot, now time.Time) (Breaker, error) {
			return baseline.Restore(c, s, now)
		},
		Zero: func() Breaker { return new(baseline.Breaker) },
	},
}

// reasons are the four rejection reasons.
var reasons = [...]error{core.ErrOpen, core.ErrHalfOpenFull, core.ErrForcedOpen, core.ErrRampingUp}

// Reason is the rejection reason (core.ErrOpen, core.ErrHalfOpenFull,
// core.ErrForcedOpen or core.ErrRampingUp) that err matches with
// errors.Is, or err itself when it is no rejection: what a test switches
// on, since each implementation returns rejections of its own that only
// match the reasons.
func Reason(err error) error {
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r
		}
	}
	return err
}

// SameError reports whether the errors two implementations returned for
// the same call agree: the same error, or rejections for the same reason
// that ask for the same wait (core.RetryAfterOf, read now).
func SameError(a, b error) bool {
	if a == b {
		return true
	}
	ra, rb := Reason(a), Reason(b)
	return ra != a && ra == rb && core.RetryAfterOf(a) == core.RetryAfterOf(b)
}
