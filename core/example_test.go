package core_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// The quick start of the README, copied from here: one breaker around a
// call, and a refusal that says why and when to try again.
func Example() {
	b, err := core.New(core.Config{
		WindowSize:           20, // the last 20 calls
		FailureRateThreshold: 50, // percent
		MinimumNumberOfCalls: 10,
		OpenDuration:         5 * time.Second,
	})
	if err != nil {
		log.Fatal(err) // every bad field at once, each named; errors.Is(err, core.ErrInvalidConfig)
	}
	fetch := func(ctx context.Context) ([]byte, error) { // your call
		return nil, errors.New("connection refused")
	}

	ctx := context.Background()
	failed := 0
	for range 11 {
		body, err := core.Do(ctx, b, fetch)
		switch {
		case errors.Is(err, core.ErrOpen): // also ErrHalfOpenFull, ErrForcedOpen, ErrRampingUp; all match ErrRejected
			fmt.Println("not called; try again in", core.RetryAfterOf(err).Round(time.Second))
		case err != nil:
			failed++
		default:
			fmt.Println(len(body), "bytes")
		}
	}
	fmt.Println(failed, "calls failed")
	// Output:
	// not called; try again in 5s
	// 10 calls failed
}

// The two-step API: Allow before the call, Done after it. Nothing allocates.
func ExampleBreaker_Allow() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, Clock: clock})
	for range 2 {
		p, _ := b.Allow()
		b.Done(p, errors.New("timeout"))
	}
	p, err := b.Allow()
	fmt.Println(err, "- retry in", p.RetryAfter)
	clock.Advance(time.Second)
	p, err = b.Allow() // the first call after the open duration is the probe
	fmt.Println(b.State(), err, p.Probe)
	b.Done(p, nil)
	fmt.Println(b.State())
	// Output:
	// core: circuit breaker is open - retry in 1s
	// half-open <nil> true
	// closed
}

// Every configuration problem at once, each naming its field.
func ExampleConfig_Validate() {
	_, err := core.Config{WindowSize: 5, MinimumNumberOfCalls: 10, FailureRateThreshold: 150}.Validate()
	fmt.Println(errors.Is(err, core.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// core: Config.FailureRateThreshold: 150 is outside 0..100 percent
	// core: Config.MinimumNumberOfCalls: 10 exceeds WindowSize 5: a count window of 5 calls can never hold that many
}

// State changes arrive in order, outside any lock, with their generation.
func ExampleConfig_onStateChange() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{
		Name: "payments", ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock,
		OnStateChange: func(t core.Transition) {
			fmt.Printf("%s: %v -> %v (generation %d)\n", t.Name, t.From, t.To, t.Generation)
		},
	})
	p, _ := b.Allow()
	b.Done(p, errors.New("boom"))
	clock.Advance(time.Second)
	p, _ = b.Allow()
	b.Done(p, nil)
	// Output:
	// payments: closed -> open (generation 1)
	// payments: open -> half-open (generation 2)
	// payments: half-open -> closed (generation 3)
}

// A dependency that says when to come back: a 429 with Retry-After trips
// the breaker at once and keeps it open at least that long.
func ExampleWithRetryAfter() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{
		WindowSize: 20, FailureRateThreshold: 50, OpenDuration: 5 * time.Second,
		MaxRetryAfter: time.Minute, Clock: clock,
	})
	p, _ := b.Allow()
	b.Done(p, core.WithRetryAfter(errors.New("429 Too Many Requests"), 30*time.Second))
	p, err := b.Allow()
	fmt.Println(err, "- retry in", p.RetryAfter)
	// Output:
	// core: circuit breaker is open - retry in 30s
}

// The manual controls: forced open until told otherwise, then back to
// closed. Each is one transition, and permits from before it are stale.
func ExampleBreaker_ForceOpen() {
	b, _ := core.New(core.Config{ConsecutiveFailures: 5, Clock: core.NewManualClock(0)})
	if err := b.ForceOpen(0); err != nil {
		panic(err)
	}
	_, err := b.Allow()
	fmt.Println(b.State(), errors.Is(err, core.ErrForcedOpen))
	fmt.Println(b.ForceOpen(-time.Second) != nil) // a bad duration changes nothing
	b.Reset()
	_, err = b.Allow()
	fmt.Println(b.State(), err)
	// Output:
	// forced-open true
	// true
	// closed <nil>
}

// How long until a call may go, asked without making one: the wait a
// rejection would carry now, with no transition and no notification.
func ExampleBreaker_RetryAfter() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, Clock: clock})
	fmt.Println(b.RetryAfter()) // closed: now
	p, _ := b.Allow()
	b.Done(p, errors.New("boom")) // trips
	clock.Advance(4 * time.Second)
	fmt.Println(b.RetryAfter(), b.State()) // six seconds of the open duration left
	clock.Advance(6 * time.Second)
	fmt.Println(b.RetryAfter(), b.State()) // elapsed: the next call probes
	_ = b.ForceOpen(0)
	fmt.Println(b.RetryAfter() == core.WaitForever)
	// Output:
	// 0s
	// 6s open
	// 0s half-open
	// true
}

// HalfOpen lets probes through at once, without waiting out the open
// duration: after a deploy that fixed the dependency, say.
func ExampleBreaker_HalfOpen() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, SuccessesToClose: 1, Clock: clock})
	p, _ := b.Allow()
	b.Done(p, errors.New("boom")) // trips for a minute
	b.HalfOpen()
	p, err := b.Allow()
	fmt.Println(b.State(), p.Probe, err)
	b.Done(p, nil) // the probe succeeds
	fmt.Println(b.State())
	// Output:
	// half-open true <nil>
	// closed
}

// A breaker that starts open: the service knows at start that the
// dependency is down, and lets it be probed after the open duration.
func ExampleConfig_initialState() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{ConsecutiveFailures: 5, OpenDuration: 30 * time.Second, InitialState: core.Open, Clock: clock})
	_, err := b.Allow()
	fmt.Println(b.State(), core.RetryAfterOf(err))
	clock.Advance(30 * time.Second)
	p, _ := b.Allow()
	fmt.Println(b.State(), p.Probe)
	// Output:
	// open 30s
	// half-open true
}

// Cumulative counters, read without stopping the callers.
func ExampleBreaker_Metrics() {
	b, _ := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
		CollectMetrics: true, Clock: core.NewManualClock(0)})
	p, _ := b.Allow()
	b.Done(p, nil)
	p, _ = b.Allow()
	b.Done(p, errors.New("boom")) // trips
	_, _ = b.Allow()              // rejected
	m := b.Metrics()
	fmt.Println(m.Admitted, m.Successes, m.Failures, m.RejectedOpen, m.Transitions[core.Closed][core.Open])
	// Output:
	// 2 1 1 1 1
}

// A time window slides in steps of its bucket width. In a window of 2 s a
// failure at 0.95 s leaves, with buckets of 1 s, at 2 s, 1.05 s after it;
// with buckets of 100 ms it leaves at 2.9 s, 1.95 s after it: the narrower
// the buckets, the closer every outcome stays to the full 2 s.
func ExampleConfig_bucketWidth() {
	for _, width := range []time.Duration{time.Second, 100 * time.Millisecond} {
		clock := core.NewManualClock(0)
		b, err := core.New(core.Config{
			WindowType:            core.TimeBased,
			WindowSize:            2, // seconds
			BucketWidth:           width,
			FailureCountThreshold: 3,
			MinimumNumberOfCalls:  1,
			Clock:                 clock,
		})
		if err != nil {
			log.Fatal(err)
		}
		for _, at := range []time.Duration{950 * time.Millisecond, 1500 * time.Millisecond} {
			clock.Set(at)
			p, _ := b.Allow()
			b.Done(p, errors.New("timeout"))
		}
		clock.Set(2500 * time.Millisecond)
		fmt.Printf("buckets of %v: %d failures in the window at 2.5s\n", width, b.Counts().Failures)
	}
	_, err := core.New(core.Config{WindowType: core.TimeBased, BucketWidth: 300 * time.Millisecond, FailureRateThreshold: 50})
	fmt.Println(err)
	// Output:
	// buckets of 1s: 1 failures in the window at 2.5s
	// buckets of 100ms: 2 failures in the window at 2.5s
	// core: Config.BucketWidth: 300ms is not a whole number of milliseconds from 100ms to 1s that divides 1s (100ms, 125ms, 200ms, 250ms, 500ms or 1s; 0: 1s)
}
