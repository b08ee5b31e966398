package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
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

// Half-open judged by a ratio: of ten probes, eight successes close the
// breaker and the third failure re-opens it, so two failing probes (a
// dependency that is mostly back) do not send it back to open.
func ExampleConfig_failuresToReopen() {
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock,
		PermittedCallsInHalfOpen: 10, SuccessesToClose: 8, FailuresToReopen: 3})
	p, _ := b.Allow()
	b.Done(p, errors.New("boom")) // trips
	clock.Advance(time.Second)
	probes := make([]core.Permit, 10)
	for i := range probes {
		probes[i], _ = b.Allow()
	}
	for i, p := range probes {
		var err error
		if i == 3 || i == 6 {
			err = errors.New("still warming up")
		}
		b.Done(p, err)
	}
	fmt.Println(b.State())
	// Output:
	// closed
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

// oneOpen is an OpenGate of one slot: of the breakers sharing it, one at
// a time may be open. (The registry package gives its breakers a share of
// their number instead: registry.Options.MaxOpenPercent.)
type oneOpen struct{ held atomic.Int64 }

func (g *oneOpen) TryAcquire() bool { return g.held.CompareAndSwap(0, 1) }
func (g *oneOpen) Acquire()         { g.held.Add(1) }
func (g *oneOpen) Release()         { g.held.Add(-1) }

// Two replicas of a dependency behind breakers that share a gate of one
// slot: when both fail, the first to trip opens and the second's trip is
// capped, so calls still reach one of them. When the first closes again,
// its slot is free for the next trip.
func ExampleOpenGate() {
	gate := &oneOpen{}
	clock := core.NewManualClock(0)
	var breakers []*core.Breaker
	for _, name := range []string{"replica-a", "replica-b"} {
		b, err := core.New(core.Config{Name: name, ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock, OpenGate: gate,
			OnStateChange: func(t core.Transition) { fmt.Println(t.Name, t.From, "->", t.To, t.Reason) }})
		if err != nil {
			log.Fatal(err)
		}
		breakers = append(breakers, b)
	}
	fail := func(b *core.Breaker) {
		if p, err := b.Allow(); err == nil {
			b.Done(p, errors.New("unavailable"))
		}
	}
	fail(breakers[0])
	fail(breakers[1])
	clock.Advance(time.Second)
	p, _ := breakers[0].Allow() // the probe
	breakers[0].Done(p, nil)
	fail(breakers[1])
	// Output:
	// replica-a closed -> open consecutive-failures
	// replica-b closed -> closed capped
	// replica-a open -> half-open open-duration-elapsed
	// replica-a half-open -> closed probes-passed
	// replica-b closed -> open consecutive-failures
}

// oneProbe is a ProbeGate that lets one probe out at a time across every
// breaker that shares it, as a fleet of replicas' lease does across
// processes: a refusal asks the caller to come back in 100 ms.
type oneProbe struct{ out atomic.Int64 }

var errNoLease = fmt.Errorf("no probe lease: %w", core.ErrHalfOpenFull)

func (g *oneProbe) AdmitProbe(core.Permit) (time.Duration, error) {
	if !g.out.CompareAndSwap(0, 1) {
		return 100 * time.Millisecond, errNoLease
	}
	return 0, nil
}
func (g *oneProbe) ProbeDone(core.Permit, core.Outcome) { g.out.Store(0) }

// Two replicas' breakers of one dependency, each allowed two probes, share
// a probe gate of one: when both go half-open, one probe goes out in all
// and the other calls are refused with the gate's wait; once the probe
// reports, the next one may go.
func ExampleProbeGate() {
	gate := &oneProbe{}
	clock := core.NewManualClock(0)
	var breakers []*core.Breaker
	for range 2 {
		b, err := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
			PermittedCallsInHalfOpen: 2, SuccessesToClose: 2, Clock: clock, ProbeGate: gate})
		if err != nil {
			log.Fatal(err)
		}
		p, _ := b.Allow()
		b.Done(p, errors.New("unavailable")) // trips
		breakers = append(breakers, b)
	}
	clock.Advance(time.Second)
	p, err := breakers[0].Allow()
	fmt.Println(p.Probe, err)
	q, err := breakers[0].Allow()
	fmt.Println(q.RetryAfter, errors.Is(err, core.ErrHalfOpenFull))
	q, err = breakers[1].Allow()
	fmt.Println(q.RetryAfter, err)
	breakers[0].Done(p, nil)
	q, err = breakers[1].Allow()
	fmt.Println(q.Probe, err, breakers[0].Counts().ProbeSuccesses)
	// Output:
	// true <nil>
	// 100ms true
	// 100ms no probe lease: core: circuit breaker is half-open and has no probe permit left
	// true <nil> 1
}

// The open duration from a function of the re-open count and the failure:
// doubling from one second on each failed probe, a minute for a dependency
// that says it is overloaded, never past MaxOpenDuration.
func ExampleConfig_openDurationFunc() {
	errOverloaded := errors.New("503 overloaded")
	clock := core.NewManualClock(0)
	b, _ := core.New(core.Config{
		ConsecutiveFailures: 1,
		OpenDuration:        time.Second,      // for a result of zero or less
		MaxOpenDuration:     10 * time.Second, // required: it bounds the function
		OpenDurationFunc: func(reopens int, lastFailure error) time.Duration {
			if errors.Is(lastFailure, errOverloaded) {
				return time.Minute // bounded: 10 s
			}
			return time.Second << reopens
		},
		Clock: clock,
	})
	fail := func(err error) {
		p, _ := b.Allow()
		b.Done(p, err)
		fmt.Println(b.RetryAfter())
		clock.Advance(b.RetryAfter()) // the next call is the probe
	}
	fail(errors.New("timeout")) // a trip from closed: 0 re-opens
	fail(errors.New("timeout")) // the probe fails: 1 re-open
	fail(errors.New("timeout"))
	fail(errOverloaded)
	// Output:
	// 1s
	// 2s
	// 4s
	// 10s
}

// Jitter: breakers that trip together, at clock readings a few
// milliseconds apart (two replicas), stay open for different times, so
// their probes do not arrive together. The fraction is a hash of the
// reading, not a random draw: the same reading gives the same duration.
func ExampleConfig_openDurationJitter() {
	for _, at := range []time.Duration{0, 3 * time.Millisecond, 0} {
		b, _ := core.New(core.Config{
			ConsecutiveFailures: 1,
			OpenDuration:        10 * time.Second,
			OpenDurationJitter:  0.2, // up to 20 % longer
			Clock:               core.NewManualClock(at),
		})
		p, _ := b.Allow()
		b.Done(p, errors.New("timeout"))
		fmt.Println(b.RetryAfter())
	}
	// Output:
	// 11.223s
	// 10.622s
	// 11.223s
}

// A breaker that remembers across a restart: the service stores its
// snapshot when it stops and restores it when it starts, so a dependency
// that was failing is not hit again at once. The wall-clock times and the
// breaker clocks are fixed here; a service passes time.Now() and leaves
// Config.Clock unset.
func ExampleRestore() {
	cfg := core.Config{ConsecutiveFailures: 3, OpenDuration: time.Minute, Clock: core.NewManualClock(0)}
	stopped := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

	old, _ := core.New(cfg)
	_ = old.ForceOpen(time.Minute) // as after a trip: open for a minute
	snap, err := old.Snapshot(stopped, false)
	if err != nil {
		log.Fatal(err)
	}
	saved, _ := json.Marshal(snap) // or snap.MarshalBinary(): 44 bytes

	// Twenty seconds later, in the new process, whose breaker clock
	// starts anew.
	cfg.Clock = core.NewManualClock(0)
	var loaded core.Snapshot
	if err := json.Unmarshal(saved, &loaded); err != nil {
		log.Fatal(err) // corrupt, cut short or of a newer version: errors.Is(err, core.ErrInvalidSnapshot)
	}
	b, err := core.Restore(cfg, loaded, stopped.Add(20*time.Second))
	if errors.Is(err, core.ErrSnapshotMismatch) {
		b, err = core.New(cfg) // the config changed on purpose: start fresh
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.State(), "for", b.RetryAfter().Round(time.Second))
	// Output: open for 40s
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

// Reconfigure tightens a live breaker's failure-rate threshold: the window
// keeps its outcomes (the newest that fit the new size), the next outcome
// is judged by the new rule, and one notification names what changed.
func ExampleBreaker_Reconfigure() {
	c := core.Config{
		WindowSize:           10,
		MinimumNumberOfCalls: 10,
		FailureRateThreshold: 50,
		OnStateChange: func(t core.Transition) {
			fmt.Printf("%v -> %v (%v)", t.From, t.To, t.Reason)
			if t.Changed != "" {
				fmt.Print(" changed ", t.Changed)
			}
			fmt.Println()
		},
	}
	b, err := core.New(c)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 10 {
		p, _ := b.Allow()
		if i%4 == 0 {
			b.Record(p, core.Failure) // 3 failures in 10 calls: 30 %, below 50
		} else {
			b.Record(p, core.Success)
		}
	}
	c.WindowSize, c.MinimumNumberOfCalls, c.FailureRateThreshold = 5, 5, 25
	if err := b.Reconfigure(c); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("kept %d calls, %d failed\n", b.Counts().Calls, b.Counts().Failures)
	p, _ := b.Allow()
	b.Record(p, core.Success) // 1 failure in the last 5: 20 %, below 25
	p, _ = b.Allow()
	b.Record(p, core.Failure) // 2 in the last 5: 40 %, the new rule trips
	fmt.Println(b.State())
	// Output:
	// closed -> closed (reconfigured) changed WindowSize,MinimumNumberOfCalls,FailureRateThreshold
	// kept 5 calls, 1 failed
	// closed -> open (failure-rate)
	// open
}
