package core

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Reconfigure descheduled right after its swap to moving holds up no
// one: the calls that find the word moving build the successor from the
// plan themselves, exactly one offer wins (one notification), and the
// reconfigurer, resuming, goes on with that one.
func TestReconfigureHalfDoneIsCompletedByCallers(t *testing.T) {
	var mu sync.Mutex
	var got []Transition
	c := Config{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 50, Clock: NewManualClock(0),
		OnStateChange: func(tr Transition) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, tr)
		}}
	b, err := New(c)
	require.NoError(t, err)
	for range 4 {
		p, err := b.Allow()
		require.NoError(t, err)
		b.Record(p, Failure)
	}
	c.WindowSize, c.MinimumNumberOfCalls = 3, 3
	s, changed, err := b.cfg.Reconfigured(c)
	require.NoError(t, err)
	// The reconfigurer's first step, and no more.
	w := b.load()
	b.plan.Store(&reconfiguration{set: s, changed: changed, from: w, gen: b.genOf(w)})
	require.True(t, b.cas(w, moving))

	var wg sync.WaitGroup
	successors := make([]*Breaker, 8)
	for i := range successors {
		wg.Go(func() {
			require.Equal(t, Counts{State: Closed, Calls: 3, Failures: 3}, b.Counts())
			successors[i] = b.next.Load()
		})
	}
	wg.Wait()
	for _, n := range successors {
		require.Same(t, successors[0], n, "one successor won")
	}
	require.Same(t, successors[0], b.successor(), "the reconfigurer resumes with the winner")
	require.Equal(t, 3, b.Settings().WindowSize)
	mu.Lock()
	require.Len(t, got, 1)
	require.Equal(t, Transition{From: Closed, To: Closed, Reason: ReasonReconfigured, Changed: "WindowSize,MinimumNumberOfCalls"}, got[0])
	mu.Unlock()
	p, err := b.Allow()
	require.NoError(t, err)
	b.Record(p, Failure)
	require.Equal(t, Open, b.State(), "the new rule judges the next outcome: 3 of 3 failed")
}

// hops is how many breakers a call on b passes through to reach the one
// holding its state.
func hops(b *Breaker) int {
	n := 0
	for x := b.next.Load(); x != nil; x = x.next.Load() {
		n++
	}
	return n
}

// Thousands of Reconfigures racing traffic: a call on the breaker New
// returned is forwarded once, and every breaker in between is garbage
// (each gets a cleanup, which unlike a finalizer does not keep what
// it points to alive for a cycle: all but the newest few must run).
func TestReconfigureManyTimesLeavesGarbage(t *testing.T) {
	c := Config{WindowSize: 100, MinimumNumberOfCalls: 100, FailureRateThreshold: 100, CollectMetrics: true,
		Clock: NewManualClock(0), OnStateChange: func(Transition) {}}
	b, err := New(c)
	require.NoError(t, err)
	const n = 3000
	var finalized atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if p, err := b.Allow(); err == nil {
					b.Record(p, Outcome(i%2))
				}
			}
		})
	}
	for i := range n {
		c.WindowSize = 100 + i%2
		require.NoError(t, b.Reconfigure(c))
		require.LessOrEqual(t, hops(b), 1, "after Reconfigure %d", i)
		runtime.AddCleanup(b.latest(), func(struct{}) { finalized.Add(1) }, struct{}{})
	}
	close(stop)
	wg.Wait()
	require.Equal(t, 1, hops(b))
	require.Nil(t, b.plan.Load(), "the first breaker, which is never collected, keeps its first plan (a whole Settings)")
	for range 10 {
		runtime.GC()
		if finalized.Load() >= n-2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.GreaterOrEqual(t, finalized.Load(), int64(n-2), "breakers in between kept alive")
	m := b.Metrics()
	require.Equal(t, m.Admitted, m.Successes+m.Failures+m.Dropped, "%+v", m)
}

// A Reconfigure whose notification's listener panics still forwards the
// breaker New returned to the newest successor: else each such
// Reconfigure lengthens the line every call walks, and keeps every
// breaker on it alive.
func TestReconfigurePanickingListenerKeepsOneHop(t *testing.T) {
	c := Config{ConsecutiveFailures: 5, OnStateChange: func(tr Transition) {
		if tr.Reason == ReasonReconfigured {
			panic("listener")
		}
	}}
	b, err := New(c)
	require.NoError(t, err)
	for i := range 100 {
		c.ConsecutiveFailures = 5 + i%2 + 1
		require.Panics(t, func() { _ = b.Reconfigure(c) })
		require.LessOrEqual(t, hops(b), 1, "after Reconfigure %d", i)
	}
	require.Equal(t, 7, b.Settings().ConsecutiveFailures)
}

// A reconfigured breaker takes the fast paths New would choose for its
// rules: Allow's, a success's and a plain error's. (With the successor's
// validated Classifier, never nil, taken for a caller's own, a
// reconfigured breaker lost the plain-error path for good.)
func TestReconfigureChoosesNewsPaths(t *testing.T) {
	configs := []Config{
		{WindowSize: 100, FailureRateThreshold: 50},
		{WindowType: TimeBased, WindowSize: 10, FailureRateThreshold: 50},
		{WindowSize: 100, FailureRateThreshold: 50, ConsecutiveFailures: 5},
		{ConsecutiveFailures: 5},
		{WindowSize: 100, FailureRateThreshold: 50, CollectMetrics: true},
		{WindowSize: 100, FailureRateThreshold: 50, Classifier: func(error) Outcome { return Failure }},
		{WindowSize: 100, FailureRateThreshold: 50, MaxRetryAfter: time.Minute},
	}
	for i, from := range configs {
		for j, to := range configs {
			if from.CollectMetrics != to.CollectMetrics {
				continue // wiring: kept from New's Config
			}
			b, err := New(from)
			require.NoError(t, err)
			if err := b.Reconfigure(to); err != nil || b.next.Load() == nil {
				continue // refused, or nothing changed
			}
			want, err := New(to)
			require.NoError(t, err)
			got := b.latest()
			require.Equal(t, [3]any{want.plainAllow, want.success, want.plainErrors}, [3]any{got.plainAllow, got.success, got.plainErrors},
				"from config %d to %d", i, j)
		}
	}
}

// An OpenDurationFunc may call into the lock-free breaker (only the
// baseline's runs under a mutex). When kept probe failures re-open the
// breaker under a Reconfigure's new rules, the function must not run while
// the breaker is mid-way (moving, with no successor yet): there, its call
// into the breaker builds a successor of its own, which runs the function
// again, without end (a fatal stack overflow; the function here panics
// past a depth of 3 instead, and the test fails on that).
func TestReconfigureOpenDurationFuncMayCallIn(t *testing.T) {
	var b *Breaker
	var depth, deepest atomic.Int64
	c := Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: time.Minute,
		PermittedCallsInHalfOpen: 2, FailuresToReopen: 2, SuccessesToClose: 2, MaxWaitInHalfOpen: WaitForever,
		Clock: NewManualClock(0)}
	c.OpenDurationFunc = func(int, error) time.Duration {
		d := depth.Add(1)
		defer depth.Add(-1)
		if d > deepest.Load() {
			deepest.Store(d)
		}
		if d > 3 {
			panic("recursed")
		}
		_ = b.State()
		return 5 * time.Second
	}
	b, err := New(c)
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	b.Record(p, Failure)
	c.Clock.(*ManualClock).Advance(5 * time.Second) // the function's open duration
	p, err = b.Allow()
	require.NoError(t, err)
	b.Record(p, Failure) // 1 of 2
	next := c
	next.FailuresToReopen = 1
	require.NotPanics(t, func() { require.NoError(t, b.Reconfigure(next)) })
	require.EqualValues(t, 1, deepest.Load(), "the function ran inside itself")
	require.Equal(t, Open, b.State())
	require.Equal(t, 5*time.Second, b.RetryAfter(), "the function's open duration")
}

// A success whose time-window judge summed while Seal ran reports trips,
// undecided (buckets' sumAndJudge), and its recorder judges it again on
// the successor (finishTrip, carriedTrip) with the clock as it is then.
// If the clock moved meanwhile, eviction alone can make that window trip
// the rule; judged as it is now (Snapshot) rather than as an outcome in
// its current second left it (SnapshotOwed), the trip was committed though
// no order of the outcomes trips (found by an adversary's review): here the rule is 100% of at least 2 calls; second 0 holds a failure
// and four successes (S, the undecided one, among them), second 1 two
// failures (3 of 7),
// and at second 2 the window holds only the two failures. S placed at any
// reading of the clock its call spans trips nothing (a success at second
// 2 makes 2 of 3). White-box: the recorder's return from the undecided
// judgement is simulated by calling finishTrip(gen, true) on the breaker
// New returned, as Done's successInBuckets path does.
func TestReconfigureUndecidedJudgementTripsNothingOnEviction(t *testing.T) {
	clk := NewManualClock(time.Hour + 500*time.Millisecond)
	cfg := Config{WindowType: TimeBased, WindowSize: 2, MinimumNumberOfCalls: 2, FailureRateThreshold: 100,
		OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, SuccessesToClose: 2, Clock: clk}
	b, err := New(cfg)
	require.NoError(t, err)
	fail := errors.New("fail")
	// Second 0: F_a, then S (whose judge sums: the window is unclean and
	// S meets the minimum), then S_x, S_y, S_z: 1 of 5 failed.
	for k := range 5 {
		p, err := b.Allow()
		require.NoError(t, err)
		if k == 0 {
			b.Done(p, fail)
		} else {
			b.Done(p, nil)
		}
	}
	alt := cfg
	alt.PermittedCallsInHalfOpen, alt.SuccessesToClose = 4, 3
	require.NoError(t, b.Reconfigure(alt))
	clk.Advance(time.Second) // second 1
	for range 2 {
		p, err := b.Allow()
		require.NoError(t, err)
		b.Done(p, fail)
	}
	require.Equal(t, Closed, b.State(), "3 of 7 failed")
	clk.Advance(time.Second) // second 2: the successes leave the window
	require.Equal(t, Closed, b.State(), "eviction alone trips nothing")
	b.finishTrip(0, true) // S's recorder, back from its undecided judgement
	require.Equal(t, Closed, b.State(), "no order of the outcomes trips the rule; S's undecided judgement tripped it on eviction")
}
