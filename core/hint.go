package core

import "time"

// RetryAfterHint is implemented by an error that carries the dependency's
// own word on when to call again: an HTTP 429 or 503 with a Retry-After
// header, a gRPC RetryInfo, a rate limiter's reset time. With
// Config.MaxRetryAfter set, a call whose outcome is Failure and whose error
// carries a positive hint trips the breaker at once.
type RetryAfterHint interface {
	// RetryAfter is how long the dependency asks callers to stay away. Zero
	// or negative means no hint.
	RetryAfter() time.Duration
}

// RetryAfterOf returns the first positive hint in err's tree (err, then
// what Unwrap() error or Unwrap() []error returns, depth first, as errors.As
// walks it), or 0 if there is none. It allocates nothing.
func RetryAfterOf(err error) time.Duration {
	for err != nil {
		if h, ok := err.(RetryAfterHint); ok {
			if d := h.RetryAfter(); d > 0 {
				return d
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if d := RetryAfterOf(e); d > 0 {
					return d
				}
			}
			return 0
		default:
			return 0
		}
	}
	return 0
}

// WithRetryAfter returns an error that wraps err (errors.Is and errors.As
// see through it) and carries the hint d, for callers that read a
// Retry-After header themselves. A d of zero or less is no hint, and a
// breaker honours hints only with Config.MaxRetryAfter set. It allocates
// one small value; a nil err stays nil, since a successful call carries no
// hint.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &hinted{err: err, after: d}
}

type hinted struct {
	err   error
	after time.Duration
}

func (h *hinted) Error() string             { return h.err.Error() }
func (h *hinted) Unwrap() error             { return h.err }
func (h *hinted) RetryAfter() time.Duration { return h.after }

// hint bounds a retry-after hint by Config.MaxRetryAfter: it returns 0 when
// hints are off or d is not positive (no hint: the outcome is a plain
// failure), MaxRetryAfter when d exceeds it, and d otherwise.
func (s *Settings) hint(d time.Duration) time.Duration {
	if s.MaxRetryAfter == 0 || d <= 0 {
		return 0
	}
	return min(d, s.MaxRetryAfter)
}

// openDurationHinted is the open duration of a trip or re-open at backoff
// step with the bounded hint h: the longer of the step's open duration and
// h rounded up to whole milliseconds, so that a hint never shortens the
// configured open duration. The rounding is what lets the claim of the
// transition carry the hint (state.go: 35 bits of milliseconds); the
// deadline is kept in whole milliseconds anyway.
func (s *Settings) openDurationHinted(step uint8, h time.Duration) time.Duration {
	return max(s.openDuration(step), wholeMillis(h))
}

// wholeMillis is d rounded up to whole milliseconds (d >= 0, at most
// MaxOpenDurationLimit): how a retry-after hint and ForceOpen's duration
// are kept.
func wholeMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
