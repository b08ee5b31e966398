package core_test

// Forced interleavings of a trip in flight: a recorder is held by its clock
// between the window write that decides a trip and the state-word swap that
// commits it, while other operations run; each must see one sequential
// order. Lock-free only: the baseline reads its clock under its mutex.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// A's failure fills a 2-call count window with failures (100% >= 100%,
// trip); before A commits the trip, B records a success. Were B to evict a
// failure (window [F,S], 50%) and return, a Counts call would see closed,
// 1 failure in 2 calls, and A would then trip the breaker on its stale
// snapshot: no sequential order of A, B and that Counts ends open after
// such a Counts. A's swap closes the window with the trip
// (atomicring.RecordTrip): B finds it closed, is stale, and commits A's
// trip before returning, so the Counts in between already sees open.
func TestNoTripOnStaleWindowSnapshot(t *testing.T) {
	hc := &hookClock{}
	b, err := core.New(core.Config{
		WindowSize: 2, MinimumNumberOfCalls: 2, FailureRateThreshold: 100,
		OpenDuration: time.Second,
		Clock:        hc,
	})
	require.NoError(t, err)
	p, _ := b.Allow()
	b.Record(p, core.Success)
	p, _ = b.Allow()
	b.Record(p, core.Failure) // window [S, F]: 50%
	pa, _ := b.Allow()
	pb, _ := b.Allow()
	entered, release := hc.blockAt(1) // A's only clock read: the trip time
	done := make(chan struct{})
	go func() { defer close(done); b.Record(pa, core.Failure) }()
	<-entered
	b.Record(pb, core.Success)
	mid := b.Counts()
	close(release)
	<-done
	after := b.Counts()
	t.Logf("between: %+v\nafter: %+v", mid, after)
	require.Equal(t, core.Open, mid.State, "B returned after A's window tripped: the breaker must be open for every later call")
	require.Equal(t, mid, after, "the trip happened once, before B returned")
}

// gateClock is a manual clock whose next Now blocks, once armed, until
// released: it holds a lock-free recorder between the ring swap that closed
// the window and the state-word swap that commits the trip (trip reads the
// clock in between). Lock-free only: the baseline reads its clock under its
// mutex.
type gateClock struct {
	*core.ManualClock
	armed   atomic.Bool
	paused  chan struct{}
	release chan struct{}
}

func (c *gateClock) Now() time.Duration {
	if c.armed.CompareAndSwap(true, false) {
		c.paused <- struct{}{}
		<-c.release
	}
	return c.ManualClock.Now()
}

func newGateClock() *gateClock {
	return &gateClock{ManualClock: core.NewManualClock(0), paused: make(chan struct{}), release: make(chan struct{})}
}

// holdAtClockRead starts rec on its own goroutine with the gate armed and
// returns once rec is held in its first clock read, and a function that
// releases it and waits for it to return.
func holdAtClockRead(t *testing.T, c *gateClock, rec func()) (finish func()) {
	t.Helper()
	done := make(chan struct{})
	c.armed.Store(true)
	go func() {
		defer close(done)
		rec()
	}()
	select {
	case <-c.paused:
	case <-time.After(5 * time.Second):
		t.Fatal("the recorder never read the clock")
	}
	return func() {
		close(c.release)
		<-done
	}
}

// gatedLockFree builds a lock-free breaker from c with a gateClock and a
// listener that appends every notification to the returned log, under the
// returned mutex.
func gatedLockFree(t *testing.T, c core.Config) (*core.Breaker, *gateClock, *[]core.Transition, *sync.Mutex) {
	t.Helper()
	clk := newGateClock()
	var mu sync.Mutex
	var log []core.Transition
	c.Clock = clk
	c.OnStateChange = func(tr core.Transition) {
		mu.Lock()
		log = append(log, tr)
		mu.Unlock()
	}
	b, err := core.New(c)
	require.NoError(t, err)
	return b, clk, &log, &mu
}

// The closed bit, and helping: while the recorder whose outcome closed the
// window is held before its trip swap, every other operation sees the trip:
// Counts commits it and reports open, a second closed permit's outcome is
// stale (dropped, not counted) and finds it committed, Allow is rejected.
// Exactly one C>O notification and one generation step, and the held
// recorder's late swap changes nothing.
func TestClosedBitHelpersCommitOneTrip(t *testing.T) {
	b, clk, log, mu := gatedLockFree(t, core.Config{WindowSize: 4, MinimumNumberOfCalls: 2, FailureRateThreshold: 50,
		OpenDuration: time.Second, CollectMetrics: true})
	p1, err := b.Allow()
	require.NoError(t, err)
	p2, err := b.Allow()
	require.NoError(t, err)
	p3, err := b.Allow()
	require.NoError(t, err)
	b.Record(p1, core.Success)
	finish := holdAtClockRead(t, clk, func() { b.Record(p2, core.Failure) }) // 1 of 2 failed: trips
	c := b.Counts()
	require.Equal(t, core.Open, c.State, "Counts while the trip is pending: %+v", c)
	require.Equal(t, uint64(1), c.Generation)
	b.Record(p3, core.Failure) // after the trip: stale
	_, err = b.Allow()
	require.ErrorIs(t, err, core.ErrOpen)
	finish()
	c = b.Counts()
	require.Equal(t, core.Open, c.State)
	require.Equal(t, uint64(1), c.Generation)
	mu.Lock()
	require.Len(t, *log, 1)
	require.Equal(t, core.Transition{From: core.Closed, To: core.Open, Reason: core.ReasonFailureRate, Generation: 1, OpenUntil: time.Second}, (*log)[0])
	mu.Unlock()
	m := b.Metrics()
	require.Equal(t, [3]uint64{1, 1, 1}, [3]uint64{m.Successes, m.Failures, m.Dropped}, "%+v", m)
	require.Equal(t, uint64(1), m.Transitions[core.Closed][core.Open])
	require.Equal(t, uint64(1), m.RejectedOpen)
}

// The closed bit in metrics-only: the held recorder's "would have opened" is
// committed once by whoever sees the closed bit; the next window is fresh.
func TestClosedBitMetricsOnlyCommitsOnce(t *testing.T) {
	b, clk, log, mu := gatedLockFree(t, core.Config{WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 100,
		OpenDuration: time.Second})
	b.MetricsOnly() // generation 1
	p1, _ := b.Allow()
	p2, _ := b.Allow()
	finish := holdAtClockRead(t, clk, func() { b.Record(p1, core.Failure) })
	b.Record(p2, core.Failure) // sees the closed bit: commits M>M for p1, p2 is stale
	c := b.Counts()
	require.Equal(t, core.MetricsOnly, c.State)
	require.Equal(t, uint64(2), c.Generation)
	require.Equal(t, uint64(0), c.Calls)
	finish()
	require.Equal(t, uint64(2), b.Counts().Generation)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, *log, 2)
	require.Equal(t, core.MetricsOnly, (*log)[1].From)
	require.Equal(t, core.MetricsOnly, (*log)[1].To)
}

// Lock-free only, metrics: the recorder whose outcome closed the count
// window counts that outcome in Metrics (Failures) before its trip swap. If
// a manual control that commits first could cancel the trip, the history
// would have Failures = 1, Dropped = 0 and only the control's notification
// (C>C), which no sequential order explains: outcome first means a C>O trip
// and an O>C reset (Transitions[Closed][Open] = 1); reset first means the
// outcome is stale (Dropped = 1). The pending trip in the state word makes
// the control commit the trip first, so the lock-free breaker gives one of
// the two, as the baseline always does.
func TestWindowTripRacingResetIsOneOrder(t *testing.T) {
	trippingFailureRacesReset(t, core.Config{WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 100,
		OpenDuration: time.Second, CollectMetrics: true})
}

// The run of consecutive failures beside a window trips no later than a
// window trip does: an outcome that completes the run and loses its trip to
// a Reset is dropped or followed by its trip, never counted with neither.
func TestConsecutiveTripRacingResetIsOneOrder(t *testing.T) {
	trippingFailureRacesReset(t, core.Config{WindowSize: 10, MinimumNumberOfCalls: 10, FailureRateThreshold: 100,
		ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true})
}

// A failure that completes the run of consecutive failures claims the state
// word before it reads the clock for the trip's deadline, so a success
// recorded while it is paused there finds the claim, completes the trip
// first and is then stale. Sequentially, A then B opens the breaker; B then
// A would leave it closed with the failure in the 1-call window and a run of
// 1, but A has claimed before B starts, so only A then B is allowed. A
// window whose last outcome is the success beside a run that ends in the
// failure, with no trip, would be neither order (the window and the run are
// two words, so the claim is what orders them here).
func TestTripClaimOrdersARacingSuccessAfterIt(t *testing.T) {
	hc := &hookClock{}
	b, err := core.New(core.Config{
		WindowSize: 1, MinimumNumberOfCalls: 1,
		SlowCallRateThreshold: 100, SlowCallDurationThreshold: time.Hour, // a window that never trips
		ConsecutiveFailures: 2,
		OpenDuration:        time.Second,
		Clock:               hc,
	})
	require.NoError(t, err)
	p0, _ := b.Allow()
	b.Record(p0, core.Failure) // run 1
	pa, _ := b.Allow()
	pb, _ := b.Allow()
	// A's Record reads the clock twice: the slow-call stamp, then the trip's time.
	entered, release := hc.blockAt(2)
	done := make(chan struct{})
	go func() { defer close(done); b.Record(pa, core.Failure) }()
	<-entered
	b.Record(pb, core.Success)
	close(release)
	<-done
	c := b.Counts()
	require.Equal(t, core.Open, c.State, "A then B: the run tripped and B, after the claim, came after the trip: %+v", c)
	require.Equal(t, uint64(1), c.Generation, "one transition, the trip: %+v", c)
}

// The pending-trip rule: a Reset racing the held trip comes after it: the
// trip is committed first (C>O), then the reset (O>C), so the outcome that
// closed the window is never superseded; the held recorder's late swap
// changes nothing, and a stale outcome does not enter the fresh window.
func TestResetRacingHeldTripComesAfterIt(t *testing.T) {
	b, clk, log, mu := gatedLockFree(t, core.Config{WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 100,
		OpenDuration: time.Second, CollectMetrics: true})
	p, _ := b.Allow()
	q, _ := b.Allow()
	finish := holdAtClockRead(t, clk, func() { b.Record(p, core.Failure) })
	b.Reset()
	b.Record(q, core.Failure) // stale: generation 0
	finish()
	c := b.Counts()
	require.Equal(t, core.Closed, c.State)
	require.Equal(t, uint64(2), c.Generation)
	require.Equal(t, uint64(0), c.Calls)
	mu.Lock()
	require.Equal(t, []core.Transition{{From: core.Closed, To: core.Open, Reason: core.ReasonFailureRate, Generation: 1, OpenUntil: time.Second}, {From: core.Open, To: core.Closed, Reason: core.ReasonManual, Generation: 2}}, *log)
	mu.Unlock()
	m := b.Metrics()
	require.Equal(t, [2]uint64{1, 1}, [2]uint64{m.Failures, m.Dropped}, "%+v", m)
}

// trippingFailureRacesReset records a failure that trips c's breaker,
// holds the recorder in the trip's clock read while a Reset commits, and
// requires Metrics and the notifications to match one sequential order:
// outcome first (counted, C>O, then the reset) or reset first (the outcome
// dropped as stale, C>C).
func trippingFailureRacesReset(t *testing.T, c core.Config) {
	t.Helper()
	b, clk, log, mu := gatedLockFree(t, c)
	p, _ := b.Allow()
	finish := holdAtClockRead(t, clk, func() { b.Record(p, core.Failure) }) // held in trip's clock read
	b.Reset()
	finish()
	m := b.Metrics()
	mu.Lock()
	tr := fmt.Sprint(*log)
	mu.Unlock()
	outcomeFirst := m.Failures == 1 && m.Dropped == 0 && m.Transitions[core.Closed][core.Open] == 1
	resetFirst := m.Failures == 0 && m.Dropped == 1 && m.Transitions[core.Closed][core.Closed] == 1
	require.True(t, outcomeFirst || resetFirst,
		"Failures=%d Dropped=%d C>O=%d C>C=%d notifications %s", m.Failures, m.Dropped,
		m.Transitions[core.Closed][core.Open], m.Transitions[core.Closed][core.Closed], tr)
}

// hookClock reads 0 and, once armed, blocks its n-th read until released.
type hookClock struct {
	mu      sync.Mutex
	reads   int
	at      int
	entered chan struct{}
	release chan struct{}
}

func (h *hookClock) blockAt(n int) (entered chan struct{}, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads, h.at = 0, n
	h.entered, h.release = make(chan struct{}), make(chan struct{})
	return h.entered, h.release
}

func (h *hookClock) Now() time.Duration {
	h.mu.Lock()
	h.reads++
	block := h.at != 0 && h.reads == h.at
	entered, release := h.entered, h.release
	h.mu.Unlock()
	if block {
		close(entered)
		<-release
	}
	return 0
}
