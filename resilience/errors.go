package resilience

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// ErrInvalidConfig is what every error of NewRetry, NewBudget, NewBulkhead,
// NewTimeLimiter, NewStack and DefaultStack matches with errors.Is; the
// error names the field and its value. It matches core.ErrInvalidConfig
// too, so one errors.Is(err, core.ErrInvalidConfig) covers the breaker's
// configuration and its companions' alike.
var ErrInvalidConfig error = invalidConfig{}

type invalidConfig struct{}

func (invalidConfig) Error() string { return "resilience: invalid config" }

// Is makes the companions' configuration errors the breaker's kind too.
func (invalidConfig) Is(target error) bool { return target == core.ErrInvalidConfig }

// ErrBulkheadFull is what a Bulkhead returns when every slot is taken and,
// with BulkheadConfig.MaxWait, stayed taken for the whole wait. Compare with
// errors.Is. It matches core.ErrIgnored, so a breaker with the default
// classifier does not count it (a full bulkhead is local overload, not
// proof that the dependency is down) and a half-open probe that meets it
// returns its slot. The default retry predicate retries it after a backoff.
// Returning it allocates nothing.
var ErrBulkheadFull error = bulkheadFull{}

type bulkheadFull struct{}

func (bulkheadFull) Error() string { return "resilience: bulkhead is full" }

// Is makes a full bulkhead ignored by the breaker's default classifier.
func (bulkheadFull) Is(target error) bool { return target == core.ErrIgnored }

// ErrTimeout is what the error of a call that a TimeLimiter's deadline
// ended matches with errors.Is. The error also wraps the call's own error
// (typically context.DeadlineExceeded). A breaker with the default
// classifier counts it as a failure, and the default retry predicate
// retries it.
var ErrTimeout = errors.New("resilience: call timed out")

// timeoutError is a call's error when the time limiter's deadline ended
// the call.
type timeoutError struct {
	after time.Duration
	cause error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%v after %v: %v", ErrTimeout, e.after, e.cause)
}

func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }
func (e *timeoutError) Unwrap() error        { return e.cause }

// ErrRetryBudgetExhausted is what a Retry's error matches with errors.Is
// when it stopped because its Budget refused a retry; the error wraps the
// last attempt's error too.
var ErrRetryBudgetExhausted = errors.New("resilience: retry budget exhausted")

// stopped is a Retry's error when something other than the attempts ran
// out: the budget (ErrRetryBudgetExhausted) or the caller's context during a
// backoff wait (its ctx.Err()). It matches both why and the last attempt's
// error.
type stopped struct {
	why, last error
}

func (e *stopped) Error() string   { return e.why.Error() + " (last attempt: " + e.last.Error() + ")" }
func (e *stopped) Unwrap() []error { return []error{e.why, e.last} }

// configError is an ErrInvalidConfig error naming field and its problem.
func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// nilInside is the error for a Timer or Clock field that holds a nil
// pointer (a nil *ManualTimer, say): unset, the field takes its default,
// but a typed nil would be dereferenced at the first wait. nil if v is not
// such a value.
func nilInside(field string, v any) error {
	if !typedNil(v) {
		return nil
	}
	return configError(field, "is a nil %T: leave it unset for the default, or make one (NewManualTimer, NewSteppingTimer, core.NewManualClock)", v)
}

// typedNil reports a nil pointer (or other nil reference) inside a non-nil
// interface value: a nil *core.Breaker, *baseline.Breaker or *ManualTimer
// passed where an interface is taken. Only constructors ask, once, so
// reflect costs no call anything.
func typedNil(v any) bool {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}
