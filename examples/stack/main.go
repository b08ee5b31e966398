// Command stack runs one client through the recommended resilience stack,
// Retry(Breaker(Bulkhead(TimeLimiter(call)))), while its dependency goes
// through a brownout and an outage, and prints what each layer did about
// it, phase by phase.
//
// Time is simulated: the breaker, the retry budget, the backoff waits and
// the time limiter all run on one core.ManualClock, driven by a stepping
// timer, so the whole minute of the script takes a few milliseconds, and
// every run prints the same numbers. A call is issued every 10 ms of that
// clock; the dependency follows the script:
//
//	0 s - 10 s    healthy: every call succeeds
//	10 s - 30 s   brownout: 4 calls in 10 fail at once (a 503)
//	30 s - 45 s   outage: every call hangs until the time limiter's 1 s deadline
//	45 s - 60 s   healthy again
//
// What to watch: in the brownout the breaker stays closed (4 failures in
// 10 are below its 50 % threshold and never 5 in a row), and the retry
// budget, not the attempt limit, caps the retries at about 12 % of the
// calls (its 10 % plus its floor). In the outage the time limiter turns
// each hang into a failure; the window, already near its threshold after
// the brownout, trips on the second, and from then on the retry loop stops at
// the first rejection: calls fail in no time and no attempt reaches the
// dependency but the half-open probes. When the dependency heals, a probe
// succeeds and the breaker closes.
//
// Run it with `make demo-stack` or `go run ./examples/stack`. It exits with
// status 0 if the breaker opened in the outage and closed after it, the
// budget held the brownout's retries to its bound, and no retry followed a
// rejection; with 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/resilience"
)

// The script.
const (
	tick          = 10 * time.Millisecond // between two calls
	brownoutStart = 10 * time.Second
	outageStart   = 30 * time.Second
	recoveryStart = 45 * time.Second
	runFor        = 60 * time.Second
	timeout       = time.Second // the time limiter's deadline
)

// The retry budget: 10 % of the calls, a floor of 1 retry a second, at most
// 20 saved.
const (
	budgetPercent = 10
	budgetFloor   = 1
	budgetSaved   = 20
)

type phase int

const (
	healthy phase = iota
	brownout
	outage
	recovered
	numPhases
)

func (p phase) String() string {
	return [...]string{"healthy", "brownout", "outage", "recovered"}[p]
}

func phaseAt(d time.Duration) phase {
	switch {
	case d < brownoutStart:
		return healthy
	case d < outageStart:
		return brownout
	case d < recoveryStart:
		return outage
	}
	return recovered
}

// tally is what one phase saw.
type tally struct {
	calls, ok, failed, rejected int // calls and how they ended
	attempts, retries           int // attempts that reached the dependency; retries among all attempts
	budgetStops, timeouts       int // calls the budget stopped; attempts the time limiter's deadline ended
	stoppedMidRetry             int // calls whose retry loop a rejection ended after an attempt
	retryAfterReject            int // attempts made after a rejection in the same call: must stay 0
}

// errUnavailable is the brownout's fast failure.
var errUnavailable = errors.New("503 service unavailable")

// dependency is the scripted service behind the stack.
type dependency struct {
	clock *core.ManualClock
	timer *resilience.ManualTimer
	calls int // every attempt that reached it, for the brownout's pattern
}

func (d *dependency) serve(ctx context.Context) (string, error) {
	d.calls++
	switch phaseAt(d.clock.Now()) {
	case brownout:
		if d.calls%10 < 4 {
			return "", errUnavailable
		}
	case outage:
		// A hang that honours its context: the clock runs on to the
		// time limiter's deadline, which ends the call.
		_ = d.timer.Sleep(ctx, timeout, nil)
		<-ctx.Done()
		return "", ctx.Err()
	}
	return "ok", nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// run plays the script twice, with the retry budget and without it, prints
// the report of the first and the brownout's retries of the second, and
// returns an error saying which expectation failed.
func run(w io.Writer) error {
	phases, transitions, err := simulate(true)
	if err != nil {
		return err
	}
	unbudgeted, _, err := simulate(false)
	if err != nil {
		return err
	}
	report(w, &phases, transitions, unbudgeted[brownout])
	return check(&phases, transitions, unbudgeted[brownout])
}

// simulate plays the script through a fresh stack, with or without the
// retry budget, and returns what each phase saw and the breaker's
// transitions.
func simulate(withBudget bool) (phases [numPhases]tally, transitions []core.Transition, err error) {
	clock := core.NewManualClock(0)
	timer := resilience.NewSteppingTimer(clock)
	breaker, err := core.New(core.Config{
		Name:                 "dependency",
		WindowSize:           20,
		FailureRateThreshold: 50,
		MinimumNumberOfCalls: 10,
		ConsecutiveFailures:  5,
		OpenDuration:         5 * time.Second,
		Clock:                clock,
		OnStateChange:        func(t core.Transition) { transitions = append(transitions, t) },
	})
	if err != nil {
		return phases, nil, err
	}
	var budget *resilience.Budget
	if withBudget {
		budget, err = resilience.NewBudget(resilience.BudgetConfig{
			Percent: budgetPercent, MinPerSecond: budgetFloor, MaxSaved: budgetSaved, Clock: clock,
		})
		if err != nil {
			return phases, nil, err
		}
	}
	retry, err := resilience.NewRetry(resilience.RetryConfig{
		MaxAttempts: 3, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
		Budget: budget, Timer: timer, Seed: 1,
	})
	if err != nil {
		return phases, nil, err
	}
	bulkhead, err := resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 8})
	if err != nil {
		return phases, nil, err
	}
	limiter, err := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: timeout, Timer: timer})
	if err != nil {
		return phases, nil, err
	}
	watched := &watchedBreaker{Breaker: breaker}
	stack, err := resilience.DefaultStack(retry, watched, bulkhead, limiter)
	if err != nil {
		return phases, nil, err
	}

	dep := &dependency{clock: clock, timer: timer}
	ctx := context.Background()
	for clock.Now() < runFor {
		p := &phases[phaseAt(clock.Now())]
		attempts, before := 0, watched.rejections
		_, err := resilience.Do(ctx, stack, func(ctx context.Context) (string, error) {
			attempts++
			if watched.rejections > before {
				p.retryAfterReject++
			}
			v, err := dep.serve(ctx)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				p.timeouts++
			}
			return v, err
		})
		p.record(err, attempts)
		clock.Advance(tick)
	}
	return phases, transitions, nil
}

// watchedBreaker is the breaker as the stack sees it, counting the
// rejections, so that the demo can tell whether an attempt followed one.
type watchedBreaker struct {
	*core.Breaker
	rejections int
}

func (w *watchedBreaker) Allow() (core.Permit, error) {
	p, err := w.Breaker.Allow()
	if err != nil {
		w.rejections++
	}
	return p, err
}

// record counts one call that made attempts attempts and ended with err.
func (t *tally) record(err error, attempts int) {
	t.calls++
	t.attempts += attempts
	t.retries += max(attempts-1, 0)
	switch {
	case err == nil:
		t.ok++
	case errors.Is(err, core.ErrRejected):
		t.rejected++
		if attempts > 0 {
			t.stoppedMidRetry++
		}
	default:
		t.failed++
	}
	if errors.Is(err, resilience.ErrRetryBudgetExhausted) {
		t.budgetStops++
	}
}

func report(w io.Writer, phases *[numPhases]tally, transitions []core.Transition, unbudgeted tally) {
	fmt.Fprintln(w, "Retry(Breaker(Bulkhead(TimeLimiter(call)))), one call every 10 ms of a simulated clock")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-10s %6s %6s %7s %9s %9s %8s %8s %13s %9s\n",
		"phase", "calls", "ok", "failed", "rejected", "attempts", "retries", "retry%", "budget-stops", "timeouts")
	for p := range numPhases {
		t := phases[p]
		fmt.Fprintf(w, "%-10s %6d %6d %7d %9d %9d %8d %7.1f%% %13d %9d\n",
			p, t.calls, t.ok, t.failed, t.rejected, t.attempts, t.retries, percent(t.retries, t.calls), t.budgetStops, t.timeouts)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "breaker transitions:")
	for _, tr := range transitions {
		fmt.Fprintf(w, "  %7.2fs  %-9s -> %-9s  %s\n", tr.At.Seconds(), tr.From, tr.To, tr.Reason)
	}
	o := phases[outage]
	fmt.Fprintf(w, "\noutage: %d of %d calls rejected, %d of them before any attempt; %d attempts reached the hung dependency"+
		" (before the trip, and the probes); %d retry loops ended at a rejection, and %d attempts followed one\n",
		o.rejected, o.calls, o.rejected-o.stoppedMidRetry, o.attempts, o.stoppedMidRetry, o.retryAfterReject)
	b := phases[brownout]
	fmt.Fprintf(w, "brownout: %d retries for %d calls (%.1f%%), %d stopped by the budget; the same script without the budget: %d retries for %d calls (%.1f%%)\n",
		b.retries, b.calls, percent(b.retries, b.calls), b.budgetStops, unbudgeted.retries, unbudgeted.calls, percent(unbudgeted.retries, unbudgeted.calls))
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// check says which of the demo's claims did not hold.
func check(phases *[numPhases]tally, transitions []core.Transition, unbudgeted tally) error {
	opened, closedAfter := false, false
	for _, tr := range transitions {
		p := phaseAt(tr.At)
		if tr.To == core.Open && p == outage {
			opened = true
		}
		if tr.To == core.Closed && p == recovered {
			closedAfter = true
		}
	}
	b := phases[brownout]
	seconds := int((outageStart - brownoutStart) / time.Second)
	bound := (phases[healthy].calls+b.calls)*budgetPercent/100 + budgetFloor*(seconds+1) + budgetSaved
	var errs []error
	if !opened {
		errs = append(errs, errors.New("the breaker never opened in the outage"))
	}
	if !closedAfter {
		errs = append(errs, errors.New("the breaker did not close after the outage"))
	}
	if b.retries > bound {
		errs = append(errs, fmt.Errorf("the brownout made %d retries, above the budget's bound of %d", b.retries, bound))
	}
	if b.budgetStops == 0 || unbudgeted.retries <= b.retries {
		errs = append(errs, fmt.Errorf("the budget did not cap the brownout's retries: %d stopped, %d retries against %d without it", b.budgetStops, b.retries, unbudgeted.retries))
	}
	for p := range numPhases {
		if n := phases[p].retryAfterReject; n > 0 {
			errs = append(errs, fmt.Errorf("%v: %d attempts followed a rejection", p, n))
		}
	}
	return errors.Join(errs...)
}
