package core_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// slots is a core.OpenGate of a fixed number of slots, shared by any
// number of breakers, that counts what it is asked.
type slots struct {
	mu       sync.Mutex
	capacity int
	held     int
	asked    int // TryAcquire calls
	granted  int // TryAcquire calls that reserved a slot
	negative bool
}

func (g *slots) TryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	if g.held >= g.capacity {
		return false
	}
	g.held++
	g.granted++
	return true
}

func (g *slots) Acquire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held++
}

func (g *slots) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held--; g.held < 0 {
		g.negative = true
	}
}

// askedN is the number of TryAcquire calls so far.
func (g *slots) askedN() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked
}

// requireHeld asserts the gate's count of held slots.
func requireHeld(t *testing.T, g *slots, want int, what string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	require.False(t, g.negative, "a Release with no slot held")
	require.Equal(t, want, g.held, what)
}

// tripOnNextFailure is a lock-free breaker of config c with a count window
// of two calls, a minimum of two and a threshold of 50 %, metrics and a
// manual clock, that has recorded one failure; the permit it returns is
// the second call's, whose failure decides the trip.
func tripOnNextFailure(t *testing.T, c core.Config) (*core.Breaker, core.Permit) {
	t.Helper()
	c.WindowSize, c.MinimumNumberOfCalls, c.FailureRateThreshold = 2, 2, 50
	c.OpenDuration, c.CollectMetrics, c.Clock = time.Second, true, core.NewManualClock(0)
	b, err := core.New(c)
	require.NoError(t, err)
	p1, _ := b.Allow()
	p2, _ := b.Allow()
	b.Done(p1, errFail)
	return b, p2
}

// A trip the gate refuses commits closed -> closed with ReasonCapped: a
// new generation, a fresh window, the outcome counted, nothing rejected,
// and Metrics.Capped; a trip it lets through holds the slot through
// half-open and re-opens, and gives it back on closing.
func TestOpenGateCapsTrips(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		g := &slots{capacity: 0}
		r := mk.build(t, core.Config{WindowSize: 4, MinimumNumberOfCalls: 2, FailureRateThreshold: 50,
			OpenDuration: time.Second, CollectMetrics: true, OpenGate: g})
		r.X(core.Success)
		r.X(core.Failure)
		r.Is(core.Closed)
		require.Equal(t, []core.Transition{{From: core.Closed, To: core.Closed, Reason: core.ReasonCapped, Generation: 1}}, r.Transitions())
		r.Cnt(0, 0, 0, 0)
		m := r.B.Metrics()
		require.Equal(t, [4]uint64{1, 1, 1, 1}, [4]uint64{m.Capped, m.Transitions[core.Closed][core.Closed], m.Successes, m.Failures})
		requireHeld(t, g, 0, "refused")

		g.capacity = 1
		r.X(core.Failure)
		r.X(core.Failure)
		r.Is(core.Open)
		requireHeld(t, g, 1, "open")
		r.At(1)
		r.D(r.A(), core.Failure) // half-open -> open: the same slot
		requireHeld(t, g, 1, "re-opened")
		r.At(3)
		r.D(r.A(), core.Success)
		r.Is(core.Closed)
		requireHeld(t, g, 0, "closed")
		require.Equal(t, 2, g.askedN(), "the gate is asked once per trip from closed, never on a re-open")
		require.Equal(t, []string{"C>C@0", "C>O@0", "O>H@1", "H>O@1", "O>H@3", "H>C@3"}, r.CBs())
	})
}

// A retry-after hint's trip is capped too; metrics-only's "would have
// opened" never asks the gate.
func TestOpenGateHintsAndMetricsOnly(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		g := &slots{}
		r := mk.build(t, core.Config{ConsecutiveFailures: 5, MaxRetryAfter: time.Minute, OpenGate: g})
		r.B.RecordHint(r.A(), time.Second)
		r.Is(core.Closed)
		require.Equal(t, core.ReasonCapped, r.Transitions()[0].Reason)
		r.B.MetricsOnly()
		r.XN(5, core.Failure)
		r.Is(core.MetricsOnly)
		require.Equal(t, 1, g.askedN())
		require.Equal(t, []string{"C>C@0", "C>M@0", "M>M@0"}, r.CBs())
	})
}

// A capped trip ends a ramp-up, as the trip it stands for would have.
func TestOpenGateCappedTripEndsRampUp(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		g := &slots{capacity: 1}
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: time.Minute, OpenGate: g})
		r.X(core.Failure)
		r.At(1)
		r.D(r.A(), core.Success)
		r.Reject(core.ErrRampingUp) // 0 % at the instant of closing
		require.NoError(t, r.B.ForceOpen(0))
		r.B.Reset()
		g.capacity = 0
		r.At(2)
		for !r.Try(core.Failure) {
			r.At(r.Clock.Now().Seconds() + 0.001)
		}
		r.Is(core.Closed)
		require.Equal(t, core.ReasonCapped, r.Transitions()[len(r.Transitions())-1].Reason)
		for range 10 {
			r.A() // no ramp-up after the capped trip
		}
	})
}

// The manual controls that eject (ForceOpen, HalfOpen) take a slot even
// when none is free, once however often they repeat; the controls that
// end an ejection (Reset, Disable, MetricsOnly) give it back; an ejecting
// InitialState takes one at New.
func TestOpenGateManualControls(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		g := &slots{}
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenGate: g})
		for _, c := range []struct {
			do   func()
			held int
		}{
			{func() { require.NoError(t, r.B.ForceOpen(0)) }, 1},
			{func() { require.NoError(t, r.B.ForceOpen(time.Second)) }, 1},
			{r.B.HalfOpen, 1},
			{r.B.Disable, 0},
			{r.B.HalfOpen, 1},
			{r.B.MetricsOnly, 0},
			{func() { require.NoError(t, r.B.ForceOpen(time.Second)) }, 1},
			{r.B.Reset, 0},
			{r.B.Reset, 0},
			{func() { require.Error(t, r.B.ForceOpen(-1)) }, 0},
		} {
			c.do()
			requireHeld(t, g, c.held, "after "+r.B.State().String())
		}
		require.Zero(t, g.askedN(), "an operator's decision is not asked, only counted")

		for _, st := range []core.State{core.Open, core.HalfOpen, core.ForcedOpen, core.Closed, core.Disabled, core.MetricsOnly} {
			g := &slots{}
			mk.build(t, core.Config{ConsecutiveFailures: 1, InitialState: st, OpenGate: g})
			want := 0
			if st == core.Open || st == core.HalfOpen || st == core.ForcedOpen {
				want = 1
			}
			requireHeld(t, g, want, "InitialState "+st.String())
		}
	})
}

// Breakers sharing one slot, tripped, probed and reset from many
// goroutines: every trip that opens had a slot granted, every capped one
// a refusal, and once all is done the gate's count is the number of
// breakers ejected, never having gone below zero. Run under the race
// detector.
func TestOpenGateSharedUnderRace(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		for range rounds(50, 10) {
			g := &slots{capacity: 1}
			rs := make([]*rig, 4)
			var opened, capped atomic.Int32
			for i := range rs {
				rs[i] = mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Millisecond, OpenGate: g},
					func(tr core.Transition) {
						switch {
						case tr.From == core.Closed && tr.To == core.Open:
							opened.Add(1)
						case tr.Reason == core.ReasonCapped:
							capped.Add(1)
						}
					})
			}
			parallel(8, func(i int) {
				r := rs[i%len(rs)]
				for k := range 190 {
					switch {
					case k%100 == 99:
						r.B.Reset()
					case k%10 == 7:
						r.Clock.Advance(time.Millisecond)
					default:
						if p, err := r.B.Allow(); err == nil {
							o := core.Failure
							if k%3 == 0 {
								o = core.Success
							}
							r.D(p, o)
						}
					}
				}
			})
			want := 0
			for _, r := range rs {
				switch r.B.State() {
				case core.Open, core.HalfOpen, core.ForcedOpen:
					want++
				}
			}
			requireHeld(t, g, want, "after the goroutines")
			g.mu.Lock()
			granted, refused := g.granted, g.asked-g.granted
			g.mu.Unlock()
			require.LessOrEqual(t, int(opened.Load()), granted, "trips that opened, slots granted")
			require.LessOrEqual(t, int(capped.Load()), refused, "capped trips, refusals")
			require.Positive(t, capped.Load(), "no trip was capped: the test proves nothing")
		}
	})
}

// heldGate is slots whose next TryAcquire or Acquire, once armed, decides
// (grants or refuses) and then blocks until released: it holds a
// lock-free trip or manual control between its reservation and the swap
// that commits it. Lock-free only:
// the baseline asks its gate under its mutex, so nothing can come between.
type heldGate struct {
	slots
	armed            atomic.Bool
	entered, release chan struct{}
}

func (g *heldGate) arm() {
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	g.armed.Store(true)
}

func (g *heldGate) TryAcquire() bool {
	ok := g.slots.TryAcquire()
	g.hold()
	return ok
}

func (g *heldGate) Acquire() {
	g.slots.Acquire()
	g.hold()
}

func (g *heldGate) hold() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
}

// A trip or a manual control whose swap loses, after its gate reserved a
// slot, gives the slot back; a trip whose gate refused commits nothing
// once another transition came first. Each race is forced: the trip (or
// ForceOpen) is held in its gate while a Reset or a trip commits.
func TestOpenGateLostTripGivesSlotBack(t *testing.T) {
	trip := func(b *core.Breaker, p core.Permit) { b.Record(p, core.Failure) }
	forceOpen := func(b *core.Breaker, _ core.Permit) { _ = b.ForceOpen(0) }
	for _, c := range []struct {
		name     string
		capacity int
		op       func(b *core.Breaker, p core.Permit) // the operation held in the gate
		race     func(b *core.Breaker, p core.Permit)
		held     int
		state    core.State
		cbs      []string
	}{
		{"reserved, then Reset", 1, trip, func(b *core.Breaker, _ core.Permit) { b.Reset() }, 0, core.Closed, []string{"C>C manual"}},
		{"reserved, then another trip", 2, trip, trip, 1, core.Open, []string{"C>O consecutive-failures"}},
		{"refused, then Reset", 0, trip, func(b *core.Breaker, _ core.Permit) { b.Reset() }, 0, core.Closed, []string{"C>C manual"}},
		{"ForceOpen, then a trip", 2, forceOpen, trip, 1, core.ForcedOpen, []string{"C>O consecutive-failures", "O>F manual"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &heldGate{slots: slots{capacity: c.capacity}}
			var mu sync.Mutex
			var cbs []string
			b, err := core.New(core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0), OpenGate: g,
				OnStateChange: func(tr core.Transition) {
					mu.Lock()
					defer mu.Unlock()
					cbs = append(cbs, letter(tr.From)+">"+letter(tr.To)+" "+tr.Reason.String())
				}})
			require.NoError(t, err)
			pa, _ := b.Allow()
			pb, _ := b.Allow()
			g.arm()
			done := make(chan struct{})
			go func() { defer close(done); c.op(b, pa) }()
			<-g.entered
			c.race(b, pb)
			close(g.release)
			<-done
			requireHeld(t, &g.slots, c.held, "slots held")
			require.Equal(t, c.state, b.State())
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, c.cbs, cbs, "the held operation committed nothing, or after the race")
		})
	}
}

// A trip from closed runs Config.OpenDurationFunc before it asks the gate,
// in both implementations: a trip the gate caps has run it (its result
// unused), and its panic goes on once the capped trip is committed and
// notified.
func TestOpenGateCappedTripRunsOpenDurationFunc(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		var calls atomic.Int32
		panics := false
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: time.Minute,
			CollectMetrics: true, OpenGate: &slots{},
			OpenDurationFunc: func(int, error) time.Duration {
				calls.Add(1)
				if panics {
					panic("open duration")
				}
				return 5 * time.Second
			}})
		r.X(core.Failure)
		require.Equal(t, int32(1), calls.Load(), "the capped trip ran the function")
		panics = true
		p := r.A()
		require.PanicsWithValue(t, "open duration", func() { r.B.Done(p, errFail) })
		r.Is(core.Closed)
		require.Equal(t, uint64(2), r.B.Metrics().Capped)
		require.Equal(t, []string{"C>C@0", "C>C@0"}, r.CBs(), "both capped trips committed and notified")
	})
}

// A trip that another call commits on behalf of the deciding call takes
// the one slot of its gate, while the deciding call runs its
// open-duration function: the function runs before the deciding call
// reserves, so it holds no slot there. Lock-free only (the baseline runs
// the function under its mutex, where nothing can come between).
func TestOpenGateTripCommittedOnBehalfTakesTheSlot(t *testing.T) {
	gate := &slots{capacity: 1}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b, p2 := tripOnNextFailure(t, core.Config{MaxOpenDuration: time.Minute, OpenGate: gate,
		OpenDurationFunc: func(int, error) time.Duration {
			once.Do(func() { close(entered); <-release })
			return time.Second
		}})
	done := make(chan struct{})
	go func() { defer close(done); b.Done(p2, errFail) }() // decides the trip
	<-entered
	require.Equal(t, core.Open, b.Counts().State, "Counts commits the trip it finds decided")
	close(release)
	<-done
	require.Equal(t, core.Open, b.State())
	require.Zero(t, b.Metrics().Capped)
	requireHeld(t, gate, 1, "the open breaker's slot")
}

// relayGate is slots whose first TryAcquire reserves and then waits until
// a second TryAcquire, refused, lets it go on: the deciding call of a trip
// is still inside the gate, holding the one slot, when another call of
// the breaker is refused it.
type relayGate struct {
	slots
	asks             atomic.Int32
	entered, proceed chan struct{}
}

func (g *relayGate) TryAcquire() bool {
	ok := g.slots.TryAcquire()
	switch g.asks.Add(1) {
	case 1:
		close(g.entered)
		<-g.proceed
	case 2:
		close(g.proceed)
	}
	return ok
}

// A call refused the slot that the deciding call of the same trip holds
// yields until that call has committed the trip, then finds the breaker
// open: the trip is not capped. GOMAXPROCS is 1, so the deciding call,
// made runnable by the refused TryAcquire, runs to its end at the refused
// call's first yield. Without the wait the refused call commits "would
// have opened". Lock-free only, as above.
func TestOpenGateRefusedCallWaitsForTheTrip(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	gate := &relayGate{slots: slots{capacity: 1}, entered: make(chan struct{}), proceed: make(chan struct{})}
	b, p2 := tripOnNextFailure(t, core.Config{OpenGate: gate})
	done := make(chan struct{})
	go func() { defer close(done); b.Done(p2, errFail) }() // decides the trip, reserves the one slot
	<-gate.entered
	require.Equal(t, core.Open, b.Counts().State, "Counts, refused, waited for the trip")
	<-done
	require.Zero(t, b.Metrics().Capped)
	requireHeld(t, &gate.slots, 1, "the open breaker's slot")
	require.Equal(t, 2, gate.askedN())
}

// movingGate is heldGate that, on each refused TryAcquire up to limit,
// wakes a goroutine that moves the state word of its breaker once (moves).
type movingGate struct {
	heldGate
	refused atomic.Int32
	limit   int32
	moves   chan struct{}
}

func (g *movingGate) TryAcquire() bool {
	ok := g.heldGate.TryAcquire()
	if !ok && g.refused.Add(1) <= g.limit {
		g.moves <- struct{}{}
	}
	return ok
}

// A refused call's wait for another ask of its breaker is bounded over all
// its attempts at the trip, not per attempt. The deciding call stays held
// inside the gate with the one slot; a second failure decided the trip too
// (a time window: its judgement stands) and is refused. Each time it is
// refused, another outcome of the generation moves the state word (it
// starts or ends a run of failures, short of the rule): GOMAXPROCS is 1,
// so that outcome runs at the refused call's yield, and the call, finding
// the word moved, tries again. It gives up once its wait has lasted 10 ms
// in all, and commits "would have opened" while the deciding call is still
// held (Known limits). With a fresh wait per attempt it never gave up
// while the word kept moving: it waited as long as the deciding call was
// held (here, until the test's limit of attempts stops the moves).
func TestOpenGateRefusedCallWaitIsBoundedOverRetries(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const limit = 200000 // attempts, far more than 10 ms of them
	gate := &movingGate{heldGate: heldGate{slots: slots{capacity: 1}}, limit: limit, moves: make(chan struct{}, 1)}
	b, err := core.New(core.Config{WindowType: core.TimeBased, WindowSize: 10, MinimumNumberOfCalls: 2,
		FailureRateThreshold: 100, ConsecutiveFailures: core.MaxConsecutiveFailures,
		OpenDuration: time.Second, OpenGate: gate, CollectMetrics: true, Clock: core.NewManualClock(0)})
	require.NoError(t, err)
	p0, _ := b.Allow()
	p1, _ := b.Allow()
	p2, _ := b.Allow()
	b.Done(p0, errFail)
	gate.arm()
	held := make(chan struct{})
	go func() { defer close(held); b.Done(p1, errFail) }() // decides the trip, held with the one slot
	<-gate.entered
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for i := 0; ; i++ {
			if _, ok := <-gate.moves; !ok {
				return
			}
			p, err := b.Allow()
			if err != nil {
				continue
			}
			if i%2 == 0 {
				b.Done(p, nil) // ends the run of failures: the word moves
			} else {
				b.Done(p, errFail) // starts one, short of the rule: the word moves
			}
		}
	}()
	b.Done(p2, errFail) // decides the trip too, refused: waits, tries again, gives up
	attempts := gate.refused.Load()
	close(gate.moves)
	<-moved
	close(gate.release)
	<-held
	require.Less(t, attempts, int32(limit), "the refused call waited as long as the word kept moving")
	require.Equal(t, core.Closed, b.State())
	require.Equal(t, uint64(1), b.Metrics().Capped)
	requireHeld(t, &gate.slots, 0, "the capped breaker holds no slot")
}
