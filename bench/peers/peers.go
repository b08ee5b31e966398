// Package peers adapts the Go circuit breakers people use to the benchmark
// bodies of bench/suite, so that they run under the same names as
// casbreaker's own (impl=lockfree, impl=mutex) and benchstat -col /impl puts
// them side by side. It is a nested module, so none of them ever enters
// casbreaker's go.mod.
//
// Each adapter configures its breaker as close to the spec's policy as the
// library can express and returns suite.Unsupported, with the reason, where
// it cannot. docs/benchmarks.md lists what each does differently.
package peers

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/eapache/go-resiliency/breaker"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"

	"github.com/casbreaker/casbreaker/bench/suite"
	"github.com/casbreaker/casbreaker/core"
)

// Impls is the peers' table, in the order of the benchstat columns after
// casbreaker's own.
var Impls = []suite.Impl{
	{Name: "gobreaker", New: newGobreaker, Construct: constructGobreaker, ExactProbes: true},
	{Name: "failsafe", New: newFailsafePermit, Construct: constructFailsafe, ExactProbes: true},
	{Name: "failsafe-exec", New: newFailsafeExec, ExactProbes: true},
	{Name: "resiliency", New: newResiliency, Construct: constructResiliency},
	{Name: "hystrix", New: newHystrix, Construct: constructHystrix},
}

// openFor is the open duration an adapter that reads real time uses: the
// spec's, or, when the body drives time through Expire (Spec.Clock set),
// the shortest the library can express, so that Expire need not sleep.
func openFor(s suite.Spec, shortest time.Duration) (d time.Duration, expireSleeps bool) {
	if s.Clock == nil {
		return s.OpenFor(), false
	}
	if shortest > 0 && shortest <= time.Microsecond {
		return shortest, false
	}
	return shortest, true
}

func probes(s suite.Spec) int { return max(s.Probes, 1) }

// --- sony/gobreaker/v2 ---------------------------------------------------

func gobreakerSettings(s suite.Spec) (gobreaker.Settings, time.Duration, error) {
	open, _ := openFor(s, time.Nanosecond)
	st := gobreaker.Settings{Name: "bench", MaxRequests: uint32(probes(s)), Timeout: open}
	rule, rated := s.Policy.RateRule()
	switch {
	case rated && rule.TimeBased:
		// A rolling window of rule.Size seconds in buckets of the rule's
		// width (one second, or 100 ms), as casbreaker's;
		// ReadyToTrip runs on every failure (never on a success) with the
		// window's sums.
		st.Interval, st.BucketPeriod = time.Duration(rule.Size)*time.Second, rule.BucketWidth
		minCalls, threshold := uint64(rule.MinCalls), uint64(rule.Threshold)
		st.ReadyToTrip = func(c gobreaker.Counts) bool {
			n := uint64(c.TotalSuccesses) + uint64(c.TotalFailures)
			return n >= minCalls && uint64(c.TotalFailures)*100 >= threshold*n
		}
	case s.Policy.Name == suite.Consecutive.Name || s.AnyRule:
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 }
	default:
		return st, 0, suite.Unsupported("no count-based window: its counts cover a time interval, or every call since the last state change")
	}
	return st, open, nil
}

func newGobreaker(s suite.Spec) (suite.Breaker, error) {
	st, _, err := gobreakerSettings(s)
	if err != nil {
		return nil, err
	}
	return &gobreakerAdapter{cb: gobreaker.NewCircuitBreaker[struct{}](st)}, nil
}

func constructGobreaker(s suite.Spec) (any, error) {
	st, _, err := gobreakerSettings(s)
	if err != nil {
		return nil, err
	}
	return gobreaker.NewCircuitBreaker[struct{}](st), nil
}

// gobreakerAdapter drives CircuitBreaker.Execute, the API most code uses
// (the two-step API returns a closure per call, which allocates).
type gobreakerAdapter struct {
	cb *gobreaker.CircuitBreaker[struct{}]
}

func gobreakerRejected(err error) bool {
	return err == gobreaker.ErrOpenState || err == gobreaker.ErrTooManyRequests
}

func (a *gobreakerAdapter) Run(n int, outcomes []error) int {
	cb, admitted, k := a.cb, 0, 0
	for range n {
		out := outcomes[k]
		if _, err := cb.Execute(func() (struct{}, error) { return struct{}{}, out }); !gobreakerRejected(err) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *gobreakerAdapter) Parallel(pb *testing.PB, outcomes []error) int {
	cb, admitted, k := a.cb, 0, 0
	for pb.Next() {
		out := outcomes[k]
		if _, err := cb.Execute(func() (struct{}, error) { return struct{}{}, out }); !gobreakerRejected(err) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *gobreakerAdapter) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	called := false
	_, _ = a.cb.Execute(func() (struct{}, error) {
		called = true
		decided(true)
		<-release
		return struct{}{}, outcome
	})
	if !called {
		decided(false)
	}
}

func (a *gobreakerAdapter) State() core.State {
	switch a.cb.State() {
	case gobreaker.StateOpen:
		return core.Open
	case gobreaker.StateHalfOpen:
		return core.HalfOpen
	}
	return core.Closed
}

func (a *gobreakerAdapter) Snapshot(n int) int {
	s := 0
	for range n {
		st, c := a.cb.State(), a.cb.Counts()
		s += int(st) + int(c.Requests) + int(c.TotalFailures)
	}
	return s
}

// Expire does nothing: with a spec clock the timeout is 1 ns.
func (a *gobreakerAdapter) Expire() {}

// --- failsafe-go circuitbreaker -------------------------------------------

func failsafeBreaker(s suite.Spec) (circuitbreaker.CircuitBreaker[struct{}], error) {
	open, _ := openFor(s, time.Nanosecond)
	b := circuitbreaker.NewBuilder[struct{}]().
		WithDelay(open).
		WithSuccessThreshold(uint(probes(s)))
	rule, rated := s.Policy.RateRule()
	switch {
	case rated && !rule.TimeBased:
		// Threshold% of the last rule.Size executions (50 of 100), with no
		// minimum number of calls: 50 failures trip it before the window
		// is full.
		b = b.WithFailureThresholdRatio(uint(rule.Threshold*rule.Size/100), uint(rule.Size))
	case rated && rule.BucketWidth != time.Second:
		return nil, suite.Unsupported("its time window always has 10 buckets, so none of them is narrower than its window's tenth")
	case rated:
		// Its time window always has 10 buckets (a constant of the
		// library): 1 s each for 10 s, 6 s for 60 s, 30 s for 300 s; the
		// minimum number of executions; the rate as float64.
		b = b.WithFailureRateThreshold(float64(rule.Threshold)/100, uint(rule.MinCalls), time.Duration(rule.Size)*time.Second)
	case s.Policy.Name == suite.Consecutive.Name || s.AnyRule:
		// 5 failures among the last 5 executions.
		b = b.WithFailureThreshold(5)
	default:
		return nil, suite.Unsupported("policy " + s.Policy.Name)
	}
	return b.Build(), nil
}

func newFailsafePermit(s suite.Spec) (suite.Breaker, error) {
	cb, err := failsafeBreaker(s)
	if err != nil {
		return nil, err
	}
	return &failsafePermit{cb: cb}, nil
}

func constructFailsafe(s suite.Spec) (any, error) { return failsafeBreaker(s) }

// failsafePermit drives the permit API: TryAcquirePermit, then RecordError.
type failsafePermit struct {
	cb circuitbreaker.CircuitBreaker[struct{}]
}

func (a *failsafePermit) Run(n int, outcomes []error) int {
	cb, admitted, k := a.cb, 0, 0
	for range n {
		if cb.TryAcquirePermit() {
			cb.RecordError(outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *failsafePermit) Parallel(pb *testing.PB, outcomes []error) int {
	cb, admitted, k := a.cb, 0, 0
	for pb.Next() {
		if cb.TryAcquirePermit() {
			cb.RecordError(outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *failsafePermit) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	ok := a.cb.TryAcquirePermit()
	decided(ok)
	if !ok {
		return
	}
	<-release
	a.cb.RecordError(outcome)
}

func (a *failsafePermit) State() core.State  { return failsafeState(a.cb) }
func (a *failsafePermit) Snapshot(n int) int { return failsafeSnapshot(a.cb, n) }
func (a *failsafePermit) Expire()            {}
func failsafeState(cb circuitbreaker.CircuitBreaker[struct{}]) core.State {
	switch cb.State() {
	case circuitbreaker.OpenState:
		return core.Open
	case circuitbreaker.HalfOpenState:
		return core.HalfOpen
	}
	return core.Closed
}

func failsafeSnapshot(cb circuitbreaker.CircuitBreaker[struct{}], n int) int {
	s := 0
	m := cb.Metrics()
	for range n {
		s += int(cb.State()) + int(m.Executions()) + int(m.Failures())
	}
	return s
}

func newFailsafeExec(s suite.Spec) (suite.Breaker, error) {
	cb, err := failsafeBreaker(s)
	if err != nil {
		return nil, err
	}
	return &failsafeExec{cb: cb, ex: failsafe.With[struct{}](cb)}, nil
}

// failsafeExec drives the same breaker through failsafe.Executor.Run, the
// way failsafe-go is usually called.
type failsafeExec struct {
	cb circuitbreaker.CircuitBreaker[struct{}]
	ex failsafe.Executor[struct{}]
}

func (a *failsafeExec) Run(n int, outcomes []error) int {
	ex, admitted, k := a.ex, 0, 0
	for range n {
		out := outcomes[k]
		if err := ex.Run(func() error { return out }); !errors.Is(err, circuitbreaker.ErrOpen) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *failsafeExec) Parallel(pb *testing.PB, outcomes []error) int {
	ex, admitted, k := a.ex, 0, 0
	for pb.Next() {
		out := outcomes[k]
		if err := ex.Run(func() error { return out }); !errors.Is(err, circuitbreaker.ErrOpen) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *failsafeExec) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	called := false
	_ = a.ex.Run(func() error {
		called = true
		decided(true)
		<-release
		return outcome
	})
	if !called {
		decided(false)
	}
}

func (a *failsafeExec) State() core.State  { return failsafeState(a.cb) }
func (a *failsafeExec) Snapshot(n int) int { return failsafeSnapshot(a.cb, n) }
func (a *failsafeExec) Expire()            {}

// --- eapache/go-resiliency breaker -----------------------------------------

func resiliencyArgs(s suite.Spec) (errs, succ int, timeout time.Duration, sleeps bool, err error) {
	if s.Policy.Name != suite.Consecutive.Name && !s.AnyRule {
		return 0, 0, 0, false, suite.Unsupported("no window: it counts errors, and forgets them only after an error-free gap as long as its timeout")
	}
	if s.Failing() {
		return 0, 0, 0, false, suite.Unsupported("successes do not reset its error count: 5 errors less than a timeout (60 s) apart trip it, so any failure mix trips it")
	}
	// The timeout is also how long an error is remembered, so it cannot be
	// shorter than the gaps between the failures that trip it: 1 ms.
	timeout, sleeps = openFor(s, time.Millisecond)
	if sleeps && s.FastExpire {
		return 0, 0, 0, false, suite.Unsupported("its open state lasts at least 1 ms of real time (a timer goroutine per open), so a churn driven by Expire would measure sleeping")
	}
	return 5, probes(s), timeout, sleeps, nil
}

func newResiliency(s suite.Spec) (suite.Breaker, error) {
	e, ok, t, _, err := resiliencyArgs(s)
	if err != nil {
		return nil, err
	}
	return &resiliencyAdapter{b: breaker.New(e, ok, t)}, nil
}

func constructResiliency(s suite.Spec) (any, error) {
	return nil, suite.Unsupported("no window to build: an error counter and a timeout")
}

// resiliencyAdapter drives Breaker.Run, its only call API.
type resiliencyAdapter struct {
	b *breaker.Breaker
}

func (a *resiliencyAdapter) Run(n int, outcomes []error) int {
	b, admitted, k := a.b, 0, 0
	for range n {
		out := outcomes[k]
		if err := b.Run(func() error { return out }); err != breaker.ErrBreakerOpen {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *resiliencyAdapter) Parallel(pb *testing.PB, outcomes []error) int {
	b, admitted, k := a.b, 0, 0
	for pb.Next() {
		out := outcomes[k]
		if err := b.Run(func() error { return out }); err != breaker.ErrBreakerOpen {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *resiliencyAdapter) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	called := false
	_ = a.b.Run(func() error {
		called = true
		decided(true)
		<-release
		return outcome
	})
	if !called {
		decided(false)
	}
}

func (a *resiliencyAdapter) State() core.State {
	switch a.b.GetState() {
	case breaker.Open:
		return core.Open
	case breaker.HalfOpen:
		return core.HalfOpen
	}
	return core.Closed
}

// Snapshot reads GetState: the library exposes no counts.
func (a *resiliencyAdapter) Snapshot(n int) int {
	s := 0
	for range n {
		s += int(a.b.GetState())
	}
	return s
}

// Expire waits for the timer goroutine the library starts on every open to
// move the breaker to half-open (with a spec clock its timeout is 1 ms).
func (a *resiliencyAdapter) Expire() {
	deadline := time.Now().Add(time.Second)
	for a.b.GetState() == breaker.Open && time.Now().Before(deadline) {
		time.Sleep(10 * time.Microsecond)
	}
}

// --- afex/hystrix-go -------------------------------------------------------

var hystrixSeq atomic.Int64

func hystrixConfig(s suite.Spec) (hystrix.CommandConfig, bool, error) {
	open, sleeps := openFor(s, time.Millisecond)
	rule, rated := s.Policy.RateRule()
	cfg := hystrix.CommandConfig{
		// SleepWindow is whole milliseconds, and 0 means the 5 s default.
		SleepWindow: max(int(open/time.Millisecond), 1),
		// A bulkhead, not a breaker feature, but its rejections count as
		// errors and can trip the breaker; and a ticket goes back to the
		// pool on a goroutine after Do has returned, so a single caller
		// can hold many. 1<<14 keeps it from rejecting in these
		// benchmarks (1024 did not, under load: docs/benchmarks.md).
		MaxConcurrentRequests: 1 << 14,
	}
	switch {
	case sleeps && s.FastExpire:
		return cfg, false, suite.Unsupported("its sleep window is whole milliseconds of wall-clock time, so a churn driven by Expire would measure sleeping")
	case probes(s) > 1:
		return cfg, false, suite.Unsupported("half-open is one test call per sleep window")
	case rated && rule.TimeBased && rule.Size == 10 && rule.BucketWidth == time.Second:
		// Its fixed rolling window is 10 s of 1 s buckets.
		cfg.RequestVolumeThreshold, cfg.ErrorPercentThreshold = rule.MinCalls, rule.Threshold
	case s.AnyRule:
		// The closest it comes to "5 failures in a row": at least 5 calls
		// in the 10 s window, at least 50% of them errors.
		cfg.RequestVolumeThreshold, cfg.ErrorPercentThreshold = 5, 50
	default:
		return cfg, false, suite.Unsupported("only an error percentage over its fixed 10 s window")
	}
	return cfg, sleeps, nil
}

func newHystrix(s suite.Spec) (suite.Breaker, error) {
	cfg, sleeps, err := hystrixConfig(s)
	if err != nil {
		return nil, err
	}
	// Circuits live in a global registry by name and are never freed:
	// every breaker gets a fresh name.
	name := fmt.Sprintf("bench-%d", hystrixSeq.Add(1))
	hystrix.ConfigureCommand(name, cfg)
	cb, _, err := hystrix.GetCircuit(name)
	if err != nil {
		return nil, err
	}
	a := &hystrixAdapter{name: name, cb: cb}
	if sleeps {
		a.sleep = time.Duration(cfg.SleepWindow) * time.Millisecond
	}
	return a, nil
}

func constructHystrix(s suite.Spec) (any, error) {
	return nil, suite.Unsupported("circuits live in a global registry and each starts a goroutine that never ends: one per iteration would leak")
}

// hystrixAdapter drives hystrix.Do, which runs every call on a goroutine of
// its own with a timeout timer.
type hystrixAdapter struct {
	name  string
	cb    *hystrix.CircuitBreaker
	sleep time.Duration
}

func hystrixRejected(err error) bool {
	return err == hystrix.ErrCircuitOpen || err == hystrix.ErrMaxConcurrency
}

func (a *hystrixAdapter) Run(n int, outcomes []error) int {
	admitted, k := 0, 0
	for range n {
		out := outcomes[k]
		if err := hystrix.Do(a.name, func() error { return out }, nil); !hystrixRejected(err) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *hystrixAdapter) Parallel(pb *testing.PB, outcomes []error) int {
	admitted, k := 0, 0
	for pb.Next() {
		out := outcomes[k]
		if err := hystrix.Do(a.name, func() error { return out }, nil); !hystrixRejected(err) {
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

func (a *hystrixAdapter) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	_ = hystrix.Do(a.name, func() error {
		decided(true)
		<-release
		return outcome
	}, func(err error) error {
		// The fallback also runs for the call's own error; only a
		// rejection is a decision.
		if hystrixRejected(err) {
			decided(false)
		}
		return err
	})
}

// State is Closed or Open: hystrix has no half-open state of its own, only
// single test calls while open.
func (a *hystrixAdapter) State() core.State {
	if a.cb.IsOpen() {
		return core.Open
	}
	return core.Closed
}

// Snapshot reads IsOpen, which sums the window's requests and error
// percentage: the library exports no counts of its own.
func (a *hystrixAdapter) Snapshot(n int) int {
	s := 0
	for range n {
		if a.cb.IsOpen() {
			s++
		}
	}
	return s
}

// Close drops every circuit from hystrix's global registry (a benchmark
// has one alive at a time), so that their ticket pools can be collected;
// the goroutine each circuit started stays behind.
func (a *hystrixAdapter) Close() { hystrix.Flush() }

// Expire sleeps the sleep window (at least 1 ms: hystrix counts it in whole
// milliseconds and reads the wall clock).
func (a *hystrixAdapter) Expire() { time.Sleep(a.sleep) }
