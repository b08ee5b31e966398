// Package core is casbreaker's lock-free circuit breaker: Breaker, its
// Config, the Permit that ties a call to the breaker generation it was
// admitted in, Do for the common case, and clocks.
//
// A call asks Allow for a Permit, makes the call only if Allow returned no
// error, and reports the result with Done (or Record). Do wraps the three:
//
//	b, err := core.New(core.Config{WindowSize: 20, FailureRateThreshold: 50, MinimumNumberOfCalls: 10})
//	...
//	body, err := core.Do(ctx, b, fetch)
//	if errors.Is(err, core.ErrRejected) {
//		// the breaker refused the call; fetch did not run
//	}
//
// The whole state machine (state, generation, open deadline, backoff step,
// half-open probe counts, ramp-up and max-wait deadlines) is one uint64
// advanced by compare-and-swap; Allow, Done and Record take no lock and
// allocate nothing. The rules both implementations keep are written out in
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md, and
// docs/design.md there has the bit layout, every transition and the known
// limits.
package core
