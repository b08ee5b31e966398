// Package resilience holds the circuit breaker's companions and the way to
// stack them around a call:
//
//   - Retry: capped exponential backoff with full, equal or no jitter, a
//     retryable predicate that never retries a breaker rejection as if it
//     were transient (but can wait out its RetryAfter on request), and a
//     shared retry Budget so that a failing dependency never gets a retry
//     storm;
//   - Bulkhead: at most N calls in flight, with lock-free admission and an
//     optional bounded wait; its ErrBulkheadFull is ignored for the
//     breaker's default classifier;
//   - TimeLimiter: a context deadline per call, whose timeout is a
//     distinct error (ErrTimeout) that the breaker counts as a failure;
//   - Stack: the layers in the order the caller picks, run with Do;
//     DefaultStack is Retry(Breaker(Bulkhead(TimeLimiter(call)))).
//
// Like package core, every part is lock-free on its admission path and a
// call that succeeds at once allocates nothing in Retry, Budget, Bulkhead
// and Stack (a TimeLimiter costs its deadline context, and a breaker layer
// given a *registry.Breaker the 48-byte context that marks its permit,
// core.WithHeldPermit). Time comes from an
// injected Timer: SystemTimer in production, ManualTimer (on a
// core.ManualClock) in tests, so that no test sleeps.
//
//	r, _ := resilience.NewRetry(resilience.RetryConfig{Budget: budget})
//	s, _ := resilience.DefaultStack(r, breaker, bulkhead, limiter)
//	body, err := resilience.Do(ctx, s, fetch)
//
// docs/composition.md in the repository compares the two orders of retry
// and breaker and says why the default puts the retry outside.
package resilience
