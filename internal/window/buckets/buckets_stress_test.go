package buckets

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// These tests check what -race cannot: exact accounting (every outcome
// Record accepted is counted exactly once, none is wiped by a recycle) and
// the Counts invariants of every Snapshot taken while writers run.

// withProcs runs the rest of the test with GOMAXPROCS at least n, so that
// goroutines interleave even on small machines, and restores it after.
func withProcs(t *testing.T, n int) {
	prev := runtime.GOMAXPROCS(max(n, runtime.NumCPU()))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// violation keeps the first failure seen by a helper goroutine, which may
// not call t.FailNow; the test reports it once the goroutines are done.
type violation struct {
	once sync.Once
	msg  string
}

func (v *violation) set(format string, args ...any) {
	v.once.Do(func() { v.msg = fmt.Sprintf(format, args...) })
}

// checkInvariants is window.Counts' contract: what any Snapshot returns.
func checkInvariants(c window.Counts) error {
	if c.Failures > c.Calls || c.SlowCalls > c.Calls || c.SlowFailures > min(c.SlowCalls, c.Failures) {
		return fmt.Errorf("invariant broken: %+v", c)
	}
	return nil
}

// outcome returns the failure and slow flags of the i-th outcome of a
// known mix: a quarter fail, a third are slow.
func outcome(i int) (failure, slow bool) { return i%4 == 0, i%3 == 0 }

func add(c *window.Counts, failure, slow bool) {
	c.Calls++
	if failure {
		c.Failures++
	}
	if slow {
		c.SlowCalls++
	}
	if failure && slow {
		c.SlowFailures++
	}
}

// TestRegression_BurstAfterIdleLosesNoWrites is the cep21/circuit bug. Its
// lock-free rolling bucket (faststats/rolling_bucket.go) published the new
// bucket index before clearing the bucket, so after an idle gap the first
// writers of the new second could write into the bucket and then see a
// slower goroutine clear it: a burst of traffic right after a quiet period
// lost writes; cep21/circuit fixed it by falling back to a mutex. Here the
// clear is a CAS that only moves a counter forward to the new incarnation,
// so no write of the new second can be wiped.
//
// Each round idles for more than B seconds, alternating gaps that land on
// the same bucket indexes as the last round (dirty buckets) and on other
// ones, then 64 goroutines released together all record into the new
// second and half of them also into the next; the snapshot must equal what
// was recorded, exactly, every round.
func TestRegression_BurstAfterIdleLosesNoWrites(t *testing.T) {
	withProcs(t, 4)
	const (
		b          = 10
		goroutines = 64
		perG       = 4
	)
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	w := mustNew(t, b)
	gaps := []time.Duration{2 * b, b + 1, 5*b + 3}
	base := time.Duration(0)
	for round := range rounds {
		base += gaps[round%len(gaps)] * sec
		var want window.Counts
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		var bad violation
		for g := range goroutines {
			for i := range perG {
				f, s := outcome(g + i)
				add(&want, f, s)
				if g%2 == 1 {
					f, s = outcome(g + i + 1)
					add(&want, f, s)
				}
			}
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				for i := range perG {
					// Spread within the second; odd goroutines also write
					// the next second, racing with its recycle.
					f, s := outcome(g + i)
					if !w.Record(1, base+time.Duration(g*i)*time.Millisecond, f, s) {
						bad.set("goroutine %d: Record %d dropped", g, i)
					}
					if g%2 == 1 {
						f, s = outcome(g + i + 1)
						if !w.Record(1, base+sec+time.Duration(g)*time.Millisecond, f, s) {
							bad.set("goroutine %d: Record %d into the next second dropped", g, i)
						}
					}
				}
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		require.Empty(t, bad.msg, "round %d", round)
		require.Equal(t, want, w.Snapshot(1, base+sec), "round %d at %v", round, base)
	}
}

// G writers record a known mix while a clock goroutine moves time through
// the first B seconds, so every bucket is recycled (from the fresh window's
// generation 0) under load but nothing expires. A reader checks every
// snapshot: the invariants hold and calls never decrease. Totals are exact.
func TestStress_ConservationHammer(t *testing.T) {
	withProcs(t, 4)
	const b = 10
	writers, perW := 8, 20000
	if testing.Short() {
		writers, perW = 4, 3000
	}
	w := mustNew(t, b)
	var clock atomic.Int64
	end := time.Duration(b)*sec - 1 // the last instant of second B-1
	stop := make(chan struct{})
	var helpers, writing sync.WaitGroup
	var bad violation

	var progress atomic.Int64
	total := int64(writers * perW)

	helpers.Add(2)
	go func() { // clock: keeps pace with the writers, reaching end with them
		defer helpers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			clock.Store(int64(end) / total * progress.Load())
			runtime.Gosched()
		}
	}()
	go func() { // reader
		defer helpers.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := w.Snapshot(1, time.Duration(clock.Load()))
			if err := checkInvariants(c); err != nil {
				bad.set("%v", err)
			}
			if c.Calls < last {
				bad.set("calls went down from %d to %d", last, c.Calls)
			}
			last = c.Calls
		}
	}()

	var want window.Counts
	for g := range writers {
		for i := range perW {
			f, s := outcome(g*perW + i)
			add(&want, f, s)
		}
		writing.Add(1)
		go func() {
			defer writing.Done()
			for i := range perW {
				f, s := outcome(g*perW + i)
				if !w.Record(1, time.Duration(clock.Load()), f, s) {
					bad.set("writer %d: Record %d dropped", g, i)
				}
				progress.Inc()
			}
		}()
	}
	writing.Wait()
	close(stop)
	helpers.Wait()
	require.Empty(t, bad.msg)
	require.Equal(t, want, w.Snapshot(1, end))
}

// Writers race a clock that runs through many windows, so buckets are
// recycled for new seconds while writers of their old second are still
// recording, and Records may be dropped. The accounting must still be
// exact: an outcome whose clock reading is inside the final window was
// never dropped and is counted; the total counted never exceeds what
// Record accepted; every snapshot keeps the invariants.
func TestStress_RollingWindowAccounting(t *testing.T) {
	for _, width := range []time.Duration{sec, MinWidth} {
		t.Run(width.String(), func(t *testing.T) { rollingWindowAccounting(t, width) })
	}
}

// rollingWindowAccounting is TestStress_RollingWindowAccounting for a
// window of 3 s in buckets of width.
func rollingWindowAccounting(t *testing.T, width time.Duration) {
	withProcs(t, 4)
	const seconds = 3
	writers, perW := 8, 20000
	if testing.Short() {
		writers, perW = 4, 3000
	}
	w, err := NewWidth(seconds, width)
	require.NoError(t, err)
	b := uint64(len(w.ids))
	var clock atomic.Int64
	// Each Record moves the clock on by a step, so the run crosses
	// about 40 windows in total and each second sees hundreds of outcomes.
	step := time.Duration(40*seconds) * sec / time.Duration(writers*perW)
	stop := make(chan struct{})
	var reading, writing sync.WaitGroup
	var bad violation

	reading.Add(1)
	go func() {
		defer reading.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := checkInvariants(w.Snapshot(1, time.Duration(clock.Load()))); err != nil {
				bad.set("%v", err)
			}
		}
	}()

	type tally struct {
		sec      uint64
		accepted window.Counts
		dropped  uint64
	}
	perWriter := make([][]tally, writers)
	for g := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			var ts []tally
			for i := range perW {
				now := time.Duration(clock.Add(int64(step)))
				f, s := outcome(i)
				ok := w.Record(1, now, f, s)
				at := w.tick(now)
				if len(ts) == 0 || ts[len(ts)-1].sec != at {
					ts = append(ts, tally{sec: at})
				}
				if ok {
					add(&ts[len(ts)-1].accepted, f, s)
				} else {
					ts[len(ts)-1].dropped++
				}
			}
			perWriter[g] = ts
		}()
	}
	writing.Wait()
	close(stop)
	reading.Wait()
	require.Empty(t, bad.msg)

	// now = 0 reads the window at its head: the newest second seen.
	got := w.Snapshot(1, 0)
	head := w.head.second.Load()
	var inWindow, accepted window.Counts
	var dropped uint64
	for _, ts := range perWriter {
		for _, x := range ts {
			accepted.Calls += x.accepted.Calls
			dropped += x.dropped
			if x.sec+b > head {
				// Its second, and any later one it was counted in, is in
				// the window: it must be there.
				require.Zero(t, x.dropped, "outcomes of second %d (head %d) dropped", x.sec, head)
				inWindow.Calls += x.accepted.Calls
				inWindow.Failures += x.accepted.Failures
				inWindow.SlowCalls += x.accepted.SlowCalls
				inWindow.SlowFailures += x.accepted.SlowFailures
			}
		}
	}
	require.NoError(t, checkInvariants(got))
	require.GreaterOrEqual(t, got.Calls, inWindow.Calls, "lost an outcome of the final window")
	require.GreaterOrEqual(t, got.Failures, inWindow.Failures)
	require.GreaterOrEqual(t, got.SlowCalls, inWindow.SlowCalls)
	require.GreaterOrEqual(t, got.SlowFailures, inWindow.SlowFailures)
	require.LessOrEqual(t, got.Calls, accepted.Calls)
	t.Logf("head %d: counted %d (%d from the final window's own seconds), %d accepted, %d dropped",
		head, got.Calls, inWindow.Calls, accepted.Calls, dropped)
}

// Writers record under whatever generation is current while another
// goroutine keeps starting new ones, one every few microseconds: far faster
// than any breaker can transition, so buckets are recycled by generation
// hundreds of times while a writer may be descheduled, past the 8-bit
// incarnation horizon (see bucket). The bumper stops after 2^20
// generations, well inside the 24-bit generation horizon. Outcomes of the
// final generation are never dropped and are counted exactly; outcomes of
// older ones never show in its snapshot.
func TestStress_GenerationChangesUnderLoad(t *testing.T) {
	withProcs(t, 4)
	const b = 5
	writers, perW := 8, 10000
	if testing.Short() {
		writers, perW = 4, 2000
	}
	w := mustNew(t, b)
	var gen atomic.Uint32
	gen.Store(1)
	stop := make(chan struct{})
	var bumping, writing sync.WaitGroup
	bumping.Add(1)
	go func() {
		defer bumping.Done()
		for range 1 << 20 {
			select {
			case <-stop:
				return
			default:
			}
			gen.Inc()
			runtime.Gosched()
		}
	}()

	perWriter := make([]map[uint32]genTally, writers)
	for g := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			tallies := map[uint32]genTally{}
			for i := range perW {
				cur := gen.Load()
				f, s := outcome(i)
				x := tallies[cur]
				// Seconds 0..B-1: once head reaches B-1 they all count
				// there (R14); nothing expires.
				if w.Record(cur, time.Duration(i%b)*sec+time.Duration(g), f, s) {
					add(&x.accepted, f, s)
				} else {
					x.dropped++
				}
				tallies[cur] = x
			}
			perWriter[g] = tallies
		}()
	}
	writing.Wait()
	close(stop)
	bumping.Wait()

	checkFinalGeneration(t, w, b, gen.Load(), perWriter)
}

// genTally is what one writer saw of one generation: the outcomes the
// window accepted and how many it dropped.
type genTally struct {
	accepted window.Counts
	dropped  int
}

// checkFinalGeneration checks a window of b seconds after writers that
// tallied per generation: no generation newer than final ever existed, so
// none of final's outcomes may have been dropped; b more, recorded now,
// must land, and the Snapshot holds exactly final's outcomes.
func checkFinalGeneration(t *testing.T, w *Window, b int, final uint32, perWriter []map[uint32]genTally) {
	t.Helper()
	var want window.Counts
	for k, tallies := range perWriter {
		x := tallies[final]
		require.Zero(t, x.dropped, "writer %d: outcomes of the final generation dropped", k)
		want.Calls += x.accepted.Calls
		want.Failures += x.accepted.Failures
		want.SlowCalls += x.accepted.SlowCalls
		want.SlowFailures += x.accepted.SlowFailures
	}
	for i := range b {
		f, s := outcome(i)
		require.True(t, w.Record(final, time.Duration(i)*sec, f, s))
		add(&want, f, s)
	}
	require.Equal(t, want, w.Snapshot(final, 0))
}

// Sweeps racing with records: one committer raises the generation by
// 2^18+1 at a time and reports each to Advance, so the window is swept
// about every 16 of them, while writers record the current generation. As
// in the breaker, which checks its word just before a window write, a
// writer's generation is current when it records: it holds a read lock
// across loading the generation and recording, and the committer raises
// the generation under the write lock, but sweeps outside it, so sweeps
// (for the current generation and, late, for older ones) run concurrently
// with records. A sweep never touches a bucket of the generation it sweeps
// for or of a newer one, so no outcome of the final generation is dropped,
// and the final Snapshot holds exactly those outcomes.
func TestStress_SweepUnderLoad(t *testing.T) {
	withProcs(t, 4)
	const b = 5
	writers, perW := 8, 10000
	if testing.Short() {
		writers, perW = 4, 2000
	}
	w := mustNew(t, b)
	var gen atomic.Uint32
	gen.Store(1)
	// 256 raises of 2^18+1: one sweep per 16, whatever the scheduling.
	const bumps = 256
	var bumped atomic.Bool
	var bumping, writing sync.WaitGroup
	var bump sync.RWMutex
	sweeps := 0
	bumping.Add(1)
	go func() {
		defer bumping.Done()
		defer bumped.Store(true)
		for range bumps {
			before := w.head.swept.Load()
			bump.Lock()
			g := gen.Add(1<<18 + 1)
			bump.Unlock()
			w.Advance(g)
			if w.head.swept.Load() != before {
				sweeps++
			}
			runtime.Gosched()
		}
	}()
	perWriter := make([]map[uint32]genTally, writers)
	for k := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			tallies := map[uint32]genTally{}
			for i := 0; i < perW || !bumped.Load(); i++ {
				bump.RLock()
				cur := gen.Load()
				f, s := outcome(i)
				x := tallies[cur]
				if w.Record(cur, time.Duration(i%b)*sec+time.Duration(k), f, s) {
					add(&x.accepted, f, s)
				} else {
					x.dropped++
				}
				bump.RUnlock()
				tallies[cur] = x
			}
			perWriter[k] = tallies
		}()
	}
	writing.Wait()
	bumping.Wait()
	require.Equal(t, bumps*(1<<18+1)/sweepEvery, sweeps)

	checkFinalGeneration(t, w, b, gen.Load(), perWriter)
}

// TestStress_JudgementsCoverExactly: judgements made while writers run hand
// out no slack the window does not have. Each round, goroutines record a
// mix of outcomes into one second of a window judged with one of the
// judgeRules (so judgements, their slack and lost installs all race); then
// one goroutine records failures one at a time, each followed by a fast
// success, until the rule trips, and every one of those must be judged
// exactly as rule.Trips on the window's Snapshot says. A failure of the concurrent phase that escaped both the
// installed judgement's Snapshot and its slack would leave a slack larger
// than the window's, and a sequential failure would then be covered on a
// window that trips. In every other round some of the concurrent outcomes
// land late, in the second before, as from a writer that read head before
// it moved on (recordAt), while judges cache the sum of the other buckets
// (judge.go); a cache that missed one would judge the first sequential
// failure on a window with fewer calls or failures than its Snapshot.
func TestStress_JudgementsCoverExactly(t *testing.T) {
	withProcs(t, 4)
	const g, k = 4, 64
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	// allFail trips at the first sequential failure and not before: every
	// judgement of the concurrent phase has slack up to it, and one made on
	// a Snapshot that caught a failure's call but not yet its failure must
	// not hand out more (see risky).
	allFail := &trip.Rule{FailureRateThreshold: 100, MinimumNumberOfCalls: g*k + 2}
	// A judgement yields between its Snapshot and its install, so that
	// other outcomes land in between, where a lost or a stale install is
	// decided.
	testHookJudged = runtime.Gosched
	defer func() { testHookJudged = nil }()
	for round := range rounds {
		rule := &judgeRules[round%len(judgeRules)]
		failPct := []int{0, 5, 20, 45}[round/len(judgeRules)%4]
		if round%3 == 0 {
			rule, failPct = allFail, 100
		}
		w := mustNew(t, 3)
		now := time.Duration(round%5+1) * sec
		// A failure in the second before: the window is unclean, so every
		// outcome of the round is judged.
		_, _ = w.RecordTrip(1, now-sec, true, false, rule)
		late := round%2 == 1
		var wg sync.WaitGroup
		for i := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range k {
					h := uint64(round*g*k+i*k+j) * 0x9e3779b97f4a7c15 >> 40 % 100
					f, s := int(h) < failPct, failPct < 100 && int(h)%7 == 0 && int(h) < 2*failPct
					if late && j%4 == i {
						recordLate(w, 1, now, f, s, rule)
						continue
					}
					_, _ = recordVia(w, h%2 == 0, 1, now, f, s, rule)
				}
			}()
		}
		wg.Wait()
		for n := 0; ; n++ {
			_, trips := w.RecordTrip(1, now, true, false, rule)
			// Then a fast success, before any Snapshot (whose retraction
			// would hide a head.full that the concurrent phase left
			// standing): judged as Trips says on the window with it, and
			// the failure on the window without it.
			_, successTrips := w.RecordSuccess(1, now, rule)
			c := w.Snapshot(1, now)
			before := c
			before.Calls--
			require.Equal(t, rule.Trips(before), trips, "round %d, rule %+v, sequential failure %d: window %+v", round, *rule, n, before)
			require.Equal(t, rule.Trips(c), successTrips, "round %d, rule %+v, the success after sequential failure %d: window %+v", round, *rule, n, c)
			if trips || n == 2*g*k {
				break
			}
		}
	}
}

// recordLate is RecordTrip for an outcome at now from a writer that read
// the window's current second one second before now and was descheduled
// until now: it adds the outcome to that second's bucket (recordAt) and
// then judges it at now, as RecordTrip does after record.
func recordLate(w *Window, gen uint32, now time.Duration, failure, slow bool, rule *trip.Rule) {
	if s, ok := w.recordAt(gen, w.tick(now-sec), failure, slow, false); ok && !w.cleanAt(s) {
		_ = w.judge(gen, now, failure, slow, rule)
	}
}

// TestStress_SnapshotIsAState: every Snapshot is the window after some
// prefix of one writer's outcomes. The writer records a known sequence
// (failures, slow calls, slow failures and fast successes, these on the
// stripe of whatever P it runs on) into one second; readers snapshot all
// along, and each result must equal the counts of the first Calls outcomes
// exactly. A Snapshot that read one outcome's counters apart from
// another's (a failure's call without its failure, a success after a
// failure it missed) matches no prefix. The same holds, run again, for the
// window a judge reads from the cached sum of the other buckets and its
// own bucket (cached): the second before holds a failure, and a success
// judged before the writer starts publishes it; without the head bucket's
// seq check, such a read fails it as a plain sum does.
func TestStress_SnapshotIsAState(t *testing.T) {
	withProcs(t, 4)
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	kind := func(i int) (failure, slow bool) { return i%3 == 0, i%5 == 0 }
	prefix := make([]window.Counts, n+1)
	for i := range n {
		prefix[i+1] = prefix[i]
		f, s := kind(i)
		add(&prefix[i+1], f, s)
	}
	for _, judged := range []bool{false, true} {
		w := mustNew(t, 4)
		now := 7 * sec
		// read is what a reader sees, less what was there before the
		// writer began (base).
		read := func() (window.Counts, bool) { return w.Snapshot(1, now), true }
		var base window.Counts
		if judged {
			rule := &trip.Rule{FailureRateThreshold: 100}
			_, _ = w.RecordTrip(1, now-sec, true, false, rule)
			_, _ = w.RecordTrip(1, now, false, false, rule) // sums and publishes the others: {1, 1}
			base = window.Counts{Calls: 2, Failures: 1}
			b := w.bucket(w.slot(w.tick(now)))
			id := b.id.Load()
			_, inc, s := unpackID(id)
			read = func() (window.Counts, bool) {
				return w.cached(&judging{b: b, id: id, inc: inc, sec: s, ours: true})
			}
			_, ok := read()
			require.True(t, ok, "the cache is published")
		}
		var done atomic.Bool
		var bad violation
		var wg sync.WaitGroup
		reads := make([]int, 3)
		for r := range reads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					c, ok := read()
					if !ok {
						continue // the head bucket moved while read: sum instead
					}
					c = window.Counts{Calls: c.Calls - base.Calls, Failures: c.Failures - base.Failures, SlowCalls: c.SlowCalls, SlowFailures: c.SlowFailures}
					if c.Calls > uint64(n) || c != prefix[c.Calls] {
						bad.set("judged %v: %+v is no prefix of the writer's outcomes (the prefix of %d calls is %+v)", judged, c, c.Calls, prefix[min(c.Calls, uint64(n))])
						return
					}
					reads[r]++
				}
			}()
		}
		for i := range n {
			f, s := kind(i)
			require.True(t, w.Record(1, now, f, s))
		}
		done.Store(true)
		wg.Wait()
		require.Empty(t, bad.msg)
		require.Equal(t, plus(base, prefix[n]), w.Snapshot(1, now))
		t.Logf("judged %v: %d outcomes, %v reads, each a prefix", judged, n, reads)
	}
}

// TestStress_SealMidStream: Seal takes exactly what was reported recorded.
// Writers record a known mix of the current generation, through every
// entry point (RecordCurrent included), and of a stale one; one goroutine
// seals the window at a point of the stream that changes every round. Per
// second of the sealed window, the sealed counts must equal what the
// writers were told was recorded; every record that began after Seal
// returned must be dropped; the window then holds nothing, and a window
// seeded from the result holds it all. Two kinds of round:
//
//   - moving: the writers move a shared clock on, within a second and,
//     now and then, by a whole window, so that buckets recycle under
//     them. Each holds a read lock across reading the clock and recording,
//     and moves it under the write lock, so each outcome counts in its
//     reading's second (head is never ahead of the clock) and each knows
//     it. Seal reads the clock under the read lock and runs outside it,
//     alongside records, recycles and catch-ups, while the clock and head
//     may move on.
//   - hammer: one second, no lock, the writers in a tight loop until they
//     see Seal returned, so that some are between their load of the id
//     and their counter CAS whenever Seal swaps that counter: the race a
//     Seal that reads a counter apart from moving it loses.
func TestStress_SealMidStream(t *testing.T) {
	withProcs(t, 4)
	rounds, perW := 120, 300
	if testing.Short() {
		rounds, perW = 24, 150
	}
	for round := range rounds {
		sealMidStream(t, round, perW, round%2 == 1)
	}
}

// sealMidStream is one round of TestStress_SealMidStream: perW records a
// writer in a moving round, or a tight loop until Seal in a hammer one.
func sealMidStream(t *testing.T, round, perW int, hammer bool) {
	const writers = 4
	width := []time.Duration{sec, MinWidth}[round/2%2]
	seconds := []int{1, 3, 10}[round/4%3]
	w, err := NewWidth(seconds, width)
	require.NoError(t, err)
	b := uint64(len(w.ids))
	rule := &judgeRules[round%len(judgeRules)]

	var clockMu sync.RWMutex
	clock := time.Duration(round) * width
	var begun atomic.Int64 // records begun, to place the seal
	sealAt := int64(round*7919) % int64(writers*perW)
	var shut atomic.Bool // Seal has returned
	var sealed Sealed
	var sealNow time.Duration
	var bad violation
	var wg sync.WaitGroup

	tallies := make([]map[uint64]window.Counts, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tally := map[uint64]window.Counts{}
			var one window.Counts // a hammer's only second
			for i, afterward := 0, 0; hammer && afterward < 16 || !hammer && i < perW; i++ {
				if !hammer && i%37 == g*5 {
					clockMu.Lock()
					if i%3 == 0 {
						clock += time.Duration(seconds) * sec // the whole window: every bucket recycles
					} else {
						clock += width / 4
					}
					clockMu.Unlock()
				}
				k := g*perW + i
				f, s := outcome(k)
				gen := uint32(2)
				if k%7 == 0 {
					gen = 1 // stale once generation 2 holds the bucket
				}
				if !hammer {
					clockMu.RLock()
				}
				now := clock
				after := shut.Load()
				begun.Inc()
				ok := recordAny(w, k/7, gen, gen == 2, now, f, s, rule)
				if !hammer {
					clockMu.RUnlock()
				}
				if after {
					afterward++
					if ok {
						bad.set("round %d: writer %d, record %d began after Seal and was recorded", round, g, i)
					}
				}
				switch {
				case !ok || gen != 2:
				case hammer:
					add(&one, f, s)
				default:
					c := tally[w.tick(now)]
					add(&c, f, s)
					tally[w.tick(now)] = c
				}
			}
			if hammer {
				tally[w.tick(clock)] = one
			}
			tallies[g] = tally
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for begun.Load() < sealAt {
			runtime.Gosched()
		}
		clockMu.RLock()
		sealNow = clock
		clockMu.RUnlock()
		// Outside the lock: the clock may move on, by a window even,
		// while Seal runs, and head with it.
		sealed = w.Seal(2, sealNow)
		shut.Store(true)
	}()
	wg.Wait()
	require.Empty(t, bad.msg)

	head := sealed.head
	require.GreaterOrEqual(t, head, w.tick(sealNow), "round %d", round)
	require.LessOrEqual(t, head, w.tick(clock), "round %d: no outcome is ahead of the clock", round)
	want := map[uint64]window.Counts{}
	for _, tally := range tallies {
		for s, c := range tally {
			// s > head too: an outcome recorded there would be one
			// Seal missed.
			if s+b > head && c.Calls != 0 {
				want[s] = plus(want[s], c)
			}
		}
	}
	got := map[uint64]window.Counts{}
	for _, x := range sealed.secs {
		got[x.sec] = x.counts()
	}
	require.Equal(t, want, got, "round %d (%d s of %v, hammer %v, sealed after %d records): sealed vs recorded, per second", round, seconds, width, hammer, sealAt)
	require.Equal(t, window.Counts{}, w.Snapshot(2, sealNow))

	n, err := NewFrom(seconds, width, sealNow)
	require.NoError(t, err)
	n.Seed(2, sealed, sealNow)
	require.Equal(t, sealed.Counts(), n.Snapshot(2, sealNow))
}
