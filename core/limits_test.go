package core_test

// Known limits (docs/design.md, "Known limits"): each test crosses one bound
// of the design with inputs or an interleaving chosen for it, and asserts
// what each implementation does there today. A test passes while its limit
// exists and fails, with a message that starts "limit fixed:", the day a
// change removes it: then the limit comes out of docs/design.md and the test
// becomes an ordinary test of the rule. The run of consecutive failures
// beside a window needs the package's internals to be shown, so its test is
// in limits_internal_test.go.

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// limitStands fails t, saying that the limit is fixed, unless stands: the
// check that the behaviour a known limit describes still happens.
func limitStands(t *testing.T, stands bool, format string, args ...any) {
	t.Helper()
	if !stands {
		t.Fatalf("limit fixed: "+format+" (take the limit out of docs/design.md, Known limits, and make this a test of the rule)", args...)
	}
}

// Limit: an open breaker that nobody calls Allow on for more than 2^35 ms
// (~397 days) after its deadline flips back from "half-open" to "open" with a
// wait of up to ~397 days: the word's 36-bit deadline is compared by signed
// difference mod 2^36. State and Counts read the word but write nothing, so
// a breaker that is only watched (dashboards polling State) is not kept
// exact. The baseline has no such limit.
func TestLimit_OpenDeadlineAliasesAfterLongIdle(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second}
	lf, mu := rigPair(t, cfg, 0)
	lf.X(core.Failure)
	mu.X(core.Failure) // open until 1 s
	aliased := time.Second + time.Duration(1<<35)*time.Millisecond
	// Polled once a day: the baseline sees half-open every time, the
	// lock-free breaker from day 398 on sees open again.
	for day := 1; day <= 400; day++ {
		at := time.Duration(day) * 24 * time.Hour
		lf.Clock.Set(at)
		mu.Clock.Set(at)
		require.Equal(t, core.HalfOpen, mu.B.State(), "mutex, day %d", day)
		require.Equal(t, core.HalfOpen, mu.B.Counts().State, "mutex, day %d", day)
		want := core.HalfOpen
		if at >= aliased {
			want = core.Open
		}
		if s, c := lf.B.State(), lf.B.Counts().State; s != want || c != want {
			require.Equal(t, core.HalfOpen, s, "lock-free, day %d: State", day)
			require.Equal(t, core.HalfOpen, c, "lock-free, day %d: Counts", day)
			limitStands(t, false, "lock-free, day %d: half-open, 2^35 ms past the open deadline", day)
		}
	}
	mu.A() // day 400: the probe
	p, err := lf.B.Allow()
	limitStands(t, err != nil, "lock-free, day 400: Allow admitted a probe")
	require.ErrorIs(t, err, core.ErrOpen)
	require.Greater(t, p.RetryAfter, 390*24*time.Hour, "lock-free, day 400: the aliased deadline's wait")
}

// Limit (a divergence): the lock-free time window saturates clock readings
// past 2^32-1 seconds of its bucket width after its origin (its seconds
// are 32 bits) into one, so nothing ever leaves the window; the baseline
// keeps int64 seconds and slides. With buckets of 1 s the origin is the
// clock's base and the limit 136 years of readings; narrower buckets count
// from an origin 2^30 widths before the clock's reading at New, so the
// limit is at least 3 x 2^30 widths after New (10.2 years at 100 ms), and
// a clock whose base is far in the past (the Unix epoch) is no nearer it.
// Past it, outcomes older than the window keep counting and trip the
// breaker. Config's BucketWidth states the limit; semantics.md states none.
func TestLimit_TimeWindowSaturatesAfter136Years(t *testing.T) {
	for _, width := range []time.Duration{time.Second, core.MinBucketWidth, 500 * time.Millisecond} {
		cfg := core.Config{WindowType: core.TimeBased, WindowSize: 10, BucketWidth: width, FailureCountThreshold: 3}
		for _, base := range []time.Duration{0, 56 * 365 * 24 * time.Hour} {
			if width == time.Second && base != 0 {
				continue // the clock's base is the origin: 80 years left
			}
			// Where the lock-free window's seconds run out, after New at
			// base: 2^32 widths after an origin of 0, or within a second
			// of 3 x 2^30 widths after base.
			limit := time.Duration(1<<32) * width
			if base != 0 {
				limit = time.Duration(3<<30) * width
			}
			at := func(r *rig, d time.Duration) { r.Clock.Set(base + d) }
			// Built with their clocks at base, as a breaker of a Clock
			// counting from the Unix epoch is.
			var lf, mu *rig
			for i, r := range []**rig{&lf, &mu} {
				c := cfg
				c.Clock = core.NewManualClock(base)
				*r = maker{new: impls[i].New}.build(t, c)
				(*r).Clock = c.Clock.(*core.ManualClock)
			}
			// Ten seconds before the limit, on both sides: the window slides.
			for _, r := range []*rig{lf, mu} {
				at(r, limit-time.Hour-10*time.Second)
				r.XN(2, core.Failure)
				at(r, limit-10*time.Second)
				r.Cnt(0, 0, 0, 0)
			}
			// Past it, only the baseline's does.
			for _, r := range []*rig{lf, mu} {
				at(r, limit+time.Hour)
				r.XN(2, core.Failure)
				at(r, limit+2*time.Hour) // both failures left the 10 s window
			}
			mu.Cnt(0, 0, 0, 0)
			mu.X(core.Failure)
			mu.Is(core.Closed)
			c := lf.B.Counts()
			limitStands(t, c.Calls != 0, "lock-free, %v buckets from %v: the time window slid past 2^32 widths of its origin (%+v)", width, base, c)
			lf.Cnt(2, 2, 0, 0)
			lf.X(core.Failure) // the third failure in a window that never slides
			lf.Is(core.Open)
		}
	}
}

// Limit (the baseline's; a divergence): the baseline calls the user's Clock
// with its mutex held and without defer, so one panicking Clock.Now leaves
// the mutex locked and every later call on the breaker blocks forever. The
// lock-free breaker keeps working. Config.Clock's doc forbids a clock that
// panics. The baseline's wedged call is seen parked on the mutex in a
// goroutine dump, not timed; that goroutine stays blocked for the rest of
// the test binary's run.
func TestLimit_PanickingClockWedgesBaseline(t *testing.T) {
	for _, im := range impls {
		t.Run("impl="+im.Name, func(t *testing.T) {
			var boom atomic.Bool
			clk := core.NewManualClock(0)
			b, err := im.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
				Clock: funcClock(func() time.Duration {
					if boom.Load() {
						panic("clock failure")
					}
					return clk.Now()
				})})
			require.NoError(t, err)
			p, _ := b.Allow()
			boom.Store(true)
			require.Panics(t, func() { b.Record(p, core.Failure) }) // the trip reads the clock
			boom.Store(false)
			s, wedged := stateOrWedged(b)
			if im.Name == "mutex" {
				limitStands(t, wedged, "the baseline's State returned %v after a Clock panic", s)
				return
			}
			require.False(t, wedged, "lock-free State blocked on a mutex after a Clock panic")
			t.Logf("state after the clock panic: %v", s)
		})
	}
}

// stateOrWedged calls b.State in a goroutine and returns its answer, or
// wedged true once a goroutine dump shows that goroutine parked on a mutex.
func stateOrWedged(b breakers.Breaker) (s core.State, wedged bool) {
	done := make(chan core.State, 1)
	id := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		header, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), "[")
		id <- header // "goroutine N "
		done <- b.State()
	}()
	probe := <-id
	for {
		select {
		case s := <-done:
			return s, false
		default:
		}
		if parkedOnMutex(probe) {
			return 0, true
		}
		runtime.Gosched()
	}
}

// parkedOnMutex reports whether the goroutine dump shows the goroutine
// whose header starts with probe ("goroutine N ") parked in
// sync.Mutex.Lock (older runtimes say semacquire).
func parkedOnMutex(probe string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if header, _, _ := strings.Cut(g, "\n"); strings.HasPrefix(header, probe+"[") {
			return strings.Contains(header, "[sync.Mutex.Lock") || strings.Contains(header, "[semacquire")
		}
	}
	return false
}

// funcClock is a Clock whose Now returns what the function returns.
type funcClock func() time.Duration

func (f funcClock) Now() time.Duration { return f() }

// Limit (both implementations, deliberate: docs/design.md, "Open-duration
// resolution"): the deadline is rounded up to a whole millisecond, so with a
// trip committed at a reading that is not a whole millisecond, a call at
// exactly now - openedAt == OpenDuration is rejected, although the boundary
// is inclusive (semantics.md), and Permit.RetryAfter overstates the wait by up to
// 1 ms: here by 500 µs.
func TestLimit_OpenBoundaryNotInclusiveOffMillisecond(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second})
		r.Clock.Set(500 * time.Microsecond)
		r.X(core.Failure) // openedAt = 0.5 ms
		r.Clock.Set(500*time.Microsecond + time.Second)
		p, err := r.B.Allow()
		limitStands(t, err != nil, "now - openedAt == OpenDuration with openedAt at 0.5 ms: a probe went")
		require.ErrorIs(t, err, core.ErrOpen)
		require.Equal(t, 500*time.Microsecond, p.RetryAfter, "the wait to the deadline rounded up to 1.001 s")
		r.Clock.Advance(500 * time.Microsecond)
		r.A() // at the rounded deadline
	})
}

// Limit: the ramp-up deadline has 19 bits of coarse units (1 ms for a 1 s
// ramp-up), compared by signed difference; a remainder above the ramp's
// span counts as over, so a long idle only misleads the lock-free word when
// the first call after the ramp lands within one ramp-up duration before a
// multiple of 2^19 units (about 524 s here) past its end: the ramp then
// resumes from where that remainder says. Here it lands exactly one span
// plus one unit early, where the share is the start share, 0 %. The
// baseline has no such limit.
func TestLimit_RampUpDeadlineAliasesAfterLongIdle(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: time.Second}
	lf, mu := rigPair(t, cfg, 0)
	for _, r := range []*rig{lf, mu} {
		r.X(core.Failure)
		r.At(1)
		r.X(core.Success) // the probe closes: ramp-up from 0 % until t = 2 s
		r.Is(core.Closed)
		r.Clock.Set(2*time.Second + time.Duration(1<<19-1001)*time.Millisecond)
	}
	mu.A() // the ramp ended long ago: every call is admitted
	_, err := lf.B.Allow()
	limitStands(t, err != nil, "lock-free: admitted %v after the ramp's end, 2^19 units less one span", lf.Clock.Now())
	require.ErrorIs(t, err, core.ErrRampingUp)
}

// Limit: the half-open max-wait deadline has 15 bits of coarse units (1 ms
// for a 1 s max wait). A half-open breaker whose probe was lost and whose
// next call comes within one max wait before a multiple of 2^15 units
// (about 33 seconds here, 32 max waits) past the deadline reads it as not passed and
// rejects; a call one max wait later restarts it. The baseline has no such
// limit.
func TestLimit_MaxWaitDeadlineAliasesAfterLongIdle(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxWaitInHalfOpen: time.Second}
	lf, mu := rigPair(t, cfg, 0)
	for _, r := range []*rig{lf, mu} {
		r.X(core.Failure)
		r.At(1)
		r.A() // the probe, lost
		r.Clock.Set(2*time.Second + time.Duration(1<<15-500)*time.Millisecond)
	}
	mu.A() // the max wait passed long ago: a new probe generation
	_, err := lf.B.Allow()
	limitStands(t, err != nil, "lock-free: a new probe generation at %v, 2^15 units less half a max wait past the deadline", lf.Clock.Now())
	require.ErrorIs(t, err, core.ErrHalfOpenFull)
	lf.Clock.Advance(time.Second)
	lf.A() // one max wait later: a new probe generation
}

// stallClock is a manual clock that, once armed, takes its first
// reading and parks the goroutine that made it until release is closed,
// then hands the reading back: a call descheduled right after its reading.
type stallClock struct {
	*core.ManualClock
	armed   atomic.Bool
	reads   atomic.Int32
	paused  chan struct{}
	release chan struct{}
}

func newStallClock() *stallClock {
	return &stallClock{ManualClock: core.NewManualClock(0), paused: make(chan struct{}), release: make(chan struct{})}
}

func (c *stallClock) Now() time.Duration {
	v := c.ManualClock.Now()
	if c.armed.Load() && c.reads.Add(1) == 1 {
		close(c.paused)
		<-c.release
	}
	return v
}

// Limit: a clock stepped backwards across a guard. The Allow that flips open
// -> half-open decides that the deadline has passed on a reading taken
// before its claim. Here it reads 1 s (the deadline) and is descheduled; the
// clock is set back to 500 ms, and another Allow is refused with 500 ms to
// wait; then the first one claims and commits, and holds a probe. In every
// sequential order the refusal (deadline ahead, at 500 ms) comes before the
// flip, and the flip then happens at 500 ms, before its deadline: no order
// explains both. A clock that never goes backwards cannot do this.
// Lock-free only: the baseline reads its clock under its mutex, so the
// second Allow would wait for the first.
func TestLimit_BackwardsClockAcrossTheFlipGuard(t *testing.T) {
	clk := newStallClock()
	b, err := core.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clk})
	require.NoError(t, err)
	p, _ := b.Allow()
	b.Record(p, core.Failure) // open at 0 s until 1 s
	clk.Set(time.Second)
	clk.armed.Store(true)
	flipped := make(chan core.Permit, 1)
	go func() {
		p, _ := b.Allow()
		flipped <- p
	}()
	<-clk.paused
	clk.Set(500 * time.Millisecond)
	_, err = b.Allow()
	require.ErrorIs(t, err, core.ErrOpen) // the deadline is ahead at 500 ms
	close(clk.release)
	probe := <-flipped
	limitStands(t, probe.Probe, "no probe granted at 500 ms after a call saw the 1 s deadline ahead")
	require.Equal(t, core.HalfOpen, b.State())
}

// Limit: a slow call's completion reading comes before its window write.
// Slow threshold 1 s; a call started at 0 completes, reads 500 ms (not slow)
// and is descheduled before it writes the window; the clock steps to 2 s
// and Counts sees an empty window; then the write lands, not slow. In every
// sequential order the empty Counts comes first, so the record happens at
// 2 s and is slow. Both implementations: the baseline too reads the clock
// before it takes its mutex.
func TestLimit_SlowCallClassedByTheReadingBeforeItsWrite(t *testing.T) {
	for _, im := range impls {
		t.Run("impl="+im.Name, func(t *testing.T) {
			clk := newStallClock()
			b, err := im.New(core.Config{WindowSize: 10, FailureRateThreshold: 100, SlowCallRateThreshold: 100,
				SlowCallDurationThreshold: time.Second, MinimumNumberOfCalls: 10, OpenDuration: time.Second, Clock: clk})
			require.NoError(t, err)
			p, _ := b.Allow()
			clk.Set(500 * time.Millisecond)
			clk.armed.Store(true)
			recorded := make(chan struct{})
			go func() {
				defer close(recorded)
				b.Record(p, core.Success)
			}()
			<-clk.paused
			clk.Set(2 * time.Second)
			require.Zero(t, b.Counts().Calls) // the record has not happened yet
			close(clk.release)
			<-recorded
			c := b.Counts()
			require.EqualValues(t, 1, c.Calls)
			limitStands(t, c.SlowCalls == 0, "recorded after a read at 2 s saw it absent, and classed slow, as at 2 s")
		})
	}
}

// Limit: a trip committed on the deciding call's behalf may be capped by
// that call's own reservation, if the deciding call stays paused between
// its reservation and its claim for longer than the other call's bounded
// wait. The lock-free trip reserves its OpenGate slot before it claims the
// state word, so that the gate never counts fewer ejected breakers than
// there are; a call that finds the trip decided but not committed (here
// Counts, on a count window the failure closed) reserves too, and with one
// slot, which the deciding call holds, it is refused. It then yields while
// another ask of the breaker is counted, so that a deciding call that is
// merely running finishes first (TestOpenGateRefusedCallWaitsForTheTrip);
// a gate is opaque, so nothing else tells a slot held for this trip from
// one another breaker took. Here the deciding call is held inside the
// gate's TryAcquire after it reserved the slot, so the wait runs out and
// Counts commits "would have opened": capped, though no other breaker
// holds a slot (R16 caps a trip only when none is free). The deciding call,
// resuming, finds the word moved and gives its slot back. Lock-free only:
// the baseline reserves and trips in one step under its mutex.
func TestLimit_GateCapsATripCommittedOnBehalf(t *testing.T) {
	gate := &heldGate{slots: slots{capacity: 1}}
	b, p2 := tripOnNextFailure(t, core.Config{OpenGate: gate})
	gate.arm()
	done := make(chan struct{})
	go func() { defer close(done); b.Done(p2, errFail) }() // decides the trip, holds the one slot
	<-gate.entered
	st := b.Counts().State // commits the trip it finds decided, on the deciding call's behalf
	close(gate.release)
	<-done
	m := b.Metrics()
	limitStands(t, st == core.Closed && m.Capped == 1 && b.State() == core.Closed && gate.held == 0,
		"alone behind a gate of one slot, the trip committed on its behalf ended %v, capped %d, the gate holding %d",
		b.State(), m.Capped, gate.held)
}
