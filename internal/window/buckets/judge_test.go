package buckets

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// Two judgements race in one second: A (a success) sums the window before F
// (a failure) is recorded, F sums it with F in it, and A installs first, so
// the installed slack is of a window without F. F's install then fails, and
// F must start over and take a unit of that slack; otherwise F is neither in
// the installed view nor charged to it, and a later failure G, recorded by
// one goroutine after both have returned, takes slack F already used and is
// judged not to trip on a window that trips (as it would be if judge
// returned after a lost install).
func TestJudge_LostInstallChargesTheWinner(t *testing.T) {
	w, rule, now, arrived := parkedJudges(t) // A arrives first, then F
	const gen = 1

	done := make(chan bool, 2)
	go func() { _, tr := w.RecordTrip(gen, now, false, false, rule); done <- tr }() // A
	releaseA := <-arrived                                                           // A has summed {2 calls, 1 failure}
	go func() { _, tr := w.RecordTrip(gen, now, true, false, rule); done <- tr }()  // F
	releaseF := <-arrived                                                           // F has summed {3, 2}
	testHookJudged = nil                                                            // F's retry, if any, must not park again
	close(releaseA)
	require.False(t, <-done, "A")
	close(releaseF)
	require.False(t, <-done, "F")

	_, trips := w.RecordTrip(gen, now, true, false, rule) // G
	c := w.Snapshot(gen, now)
	require.Equal(t, window.Counts{Calls: 4, Failures: 3}, c)
	require.True(t, trips, "G brings the window to 3 failures: it must trip")
}

// A judgement made below the minimum number of calls does not cover a fast
// success. F, a failure, is recorded but not yet judged (in the breaker: its
// goroutine is descheduled between the two); a Snapshot (the breaker's
// Counts) then holds F and no trip, since the window is below the minimum.
// The successes that follow bring the window to the minimum at a 50% rate:
// in the order the Snapshot fixes (F, the Snapshot, the successes), the last
// success trips. Before the fix every success skipped on the spent
// judgement, because its slack only counts the failures that have taken a
// unit, not those recorded and still in flight, and a breaker read closed
// after the successes had returned while the sequential history had opened.
func TestJudge_SuccessBelowTheMinimumIsJudged(t *testing.T) {
	w := mustNew(t, 10)
	rule := &trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 10}
	const gen = 1
	now := 500 * time.Millisecond
	for i := range 4 { // the first sums {1, 1} and installs slack 3; the others take it
		_, trips := w.RecordTrip(gen, now, true, false, rule)
		require.False(t, trips, "failure %d", i)
	}
	_, ok := w.record(gen, now, true, false, false) // F, in flight: recorded, not judged
	require.True(t, ok)
	c := w.Snapshot(gen, now)
	require.Equal(t, window.Counts{Calls: 5, Failures: 5}, c)
	require.False(t, rule.Trips(c), "below the minimum")
	for i := range 4 {
		_, trips := w.RecordTrip(gen, now, false, false, rule)
		require.False(t, trips, "success %d: %d calls", i, 6+i)
	}
	_, trips := w.RecordTrip(gen, now, false, false, rule)
	require.Equal(t, window.Counts{Calls: 10, Failures: 5}, w.Snapshot(gen, now))
	require.True(t, trips, "the tenth call brings the window to the minimum at 50%: it must trip")
}

// A judge that is summing stops only on a judgement that covers its
// outcome: for a failure, one installed over the word its own move left
// (so summed after its record); for a success, a full one. Anything else
// (its own word still there, another failure's move, a judgement below the
// minimum for a success, a recycled bucket) keeps it summing.
func TestJudge_StopsSummingOnlyWhenCovered(t *testing.T) {
	w := mustNew(t, 10)
	rule := &trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 4}
	const gen = 1
	now := 500 * time.Millisecond
	_, trips := w.RecordTrip(gen, now, false, false, rule)
	require.False(t, trips)
	_, trips = w.RecordTrip(gen, now, true, false, rule) // judges {2, 1}: safe, below the minimum
	require.False(t, trips)
	b := w.bucket(w.slot(0))
	id := b.id.Load()
	_, inc, _ := unpackID(id)
	belowMinimum := b.judge.Load()
	require.NotZero(t, belowMinimum&judgeSafe)
	require.Zero(t, belowMinimum&judgeFull)

	success := judging{b: b, id: id, j: belowMinimum, inc: inc, ours: true}
	require.False(t, success.now(), "a success on a judgement below the minimum sums")

	moved := nextJudgement(belowMinimum, inc, 0) // a failure's move before its sum
	require.True(t, b.judge.CompareAndSwap(belowMinimum, moved))
	failure := judging{b: b, id: id, j: moved, inc: inc, failureOrSlow: true, ours: true}
	require.False(t, failure.now(), "its own move: nobody has judged since")

	other := nextJudgement(moved, inc, 0) // another failure moved it on
	require.True(t, b.judge.CompareAndSwap(moved, other))
	require.False(t, failure.now(), "a move is no judgement")

	full := nextJudgement(other, inc, margin(rule, window.Counts{Calls: 10, Failures: 1}))
	require.NotZero(t, full&judgeFull)
	require.True(t, b.judge.CompareAndSwap(other, full))
	require.True(t, failure.now(), "installed over its move: summed with it")
	require.True(t, success.now(), "a full judgement covers a success")
	require.False(t, (&judging{b: b, id: id, j: full, inc: inc, failureOrSlow: true, ours: true}).now(),
		"a failure that moved nothing of this judgement's")
	require.False(t, (&judging{b: b, id: id, j: moved, inc: inc, failureOrSlow: true}).now(),
		"a judge whose bucket moved on before its sum")

	_, ok := w.record(gen, 10*time.Second+now, false, false, false) // second 10 recycles the bucket
	require.True(t, ok)
	require.False(t, failure.now(), "recycled: that judgement is gone with its second")
}

// A failure in flight (recorded, not yet judged) has not taken its unit of
// slack, and a later failure takes that unit instead: the slack counts
// the failures that have reached judge, not those the window already
// holds. F1 installs slack 1 under a count threshold of 3; F2 is recorded
// and its goroutine descheduled before judge; a Snapshot (the breaker's
// Counts) holds F2 and no trip; then G, which began after that Snapshot
// returned, is recorded and takes F2's unit. The window holding G holds
// three failures, and in the order the Snapshot fixes (F1, F2, the
// Snapshot, G) G's outcome trips; judged on the slack, it does not, and a
// breaker reads closed after G has returned while the sequential history
// has opened. (F2 trips when it reaches judge, but it is ordered before
// the Snapshot, on a window of two failures.) The Snapshot after G's
// record, which RecordTrip stood for before the judgement, trips.
func TestJudge_FailureInFlightKeepsItsUnitOfSlack(t *testing.T) {
	w := mustNew(t, 10)
	rule := &trip.Rule{FailureCountThreshold: 3}
	const gen = 1
	now := 500 * time.Millisecond
	_, trips := w.RecordTrip(gen, now, true, false, rule) // F1: sums {1, 1}, installs slack 1
	require.False(t, trips)
	_, ok := w.record(gen, now, true, false, false) // F2, in flight: recorded, not judged
	require.True(t, ok)
	c := w.Snapshot(gen, now)
	require.Equal(t, window.Counts{Calls: 2, Failures: 2}, c)
	require.False(t, rule.Trips(c))
	_, trips = w.RecordTrip(gen, now, true, false, rule) // G
	require.Equal(t, window.Counts{Calls: 3, Failures: 3}, w.Snapshot(gen, now))
	require.True(t, trips, "G brings the window to 3 failures after a Snapshot held the other two: it must trip")
}

// A judge whose Snapshot shows its caller a failure in flight must retract
// even when its own judgement does not install: what it showed fixes the
// failure before its outcome, so a later failure may not take the unit of
// slack the failure in flight still owns. B (a success) sums the window
// before F (a failure) is recorded; A (a success) sums it with F in it; B
// then installs slack 1 (a count threshold of 3, one failure), and A's
// install fails on B's. A returns no trip on a window of two failures,
// with F recorded and not yet judged. G, recorded by one goroutine after A
// has returned, brings the window to three failures: it must sum and trip,
// not take the unit B's judgement left, which is F's.
func TestJudge_LostInstallStillRetracts(t *testing.T) {
	w, rule, now, arrived := parkedJudges(t)
	const gen = 1

	done := make(chan bool, 2)
	go func() { _, tr := w.RecordTrip(gen, now, false, false, rule); done <- tr }() // B
	releaseB := <-arrived                                                           // B has summed {2 calls, 1 failure}
	_, ok := w.record(gen, now, true, false, false)                                 // F, in flight: recorded, not judged
	require.True(t, ok)
	go func() { _, tr := w.RecordTrip(gen, now, false, false, rule); done <- tr }() // A
	releaseA := <-arrived                                                           // A has summed {4, 2}
	testHookJudged = nil
	close(releaseB)
	require.False(t, <-done, "B")
	close(releaseA)
	require.False(t, <-done, "A")

	_, trips := w.RecordTrip(gen, now, true, false, rule) // G
	require.Equal(t, window.Counts{Calls: 5, Failures: 3}, w.Snapshot(gen, now))
	require.True(t, trips, "G brings the window to 3 failures after A's Snapshot held two: it must trip")
}

// parkedJudges is the setup of the lost-install tests: a 10-second window
// of generation 1 with a failure count threshold of 3 and one failure in
// second 0, so it is unclean from then on; now, in second 1, whose bucket
// has no judgement yet; and the judge hook set so that each judgement that
// reaches it parks until released, its release channel sent on arrived in
// the order they arrive.
func parkedJudges(t *testing.T) (w *Window, rule *trip.Rule, now time.Duration, arrived chan chan struct{}) {
	t.Helper()
	w = mustNew(t, 10)
	rule = &trip.Rule{FailureCountThreshold: 3}
	_, trips := w.RecordTrip(1, 500*time.Millisecond, true, false, rule)
	require.False(t, trips)
	arrived = make(chan chan struct{}, 2)
	testHookJudged = func() {
		release := make(chan struct{})
		arrived <- release
		<-release
	}
	t.Cleanup(func() { testHookJudged = nil })
	return w, rule, 1500 * time.Millisecond, arrived
}

// A full judgement publishes its incarnation in head.full, which lets that
// incarnation's fast successes skip their judgement: for every incarnation,
// the first one too (second 0 of generation 0, the id New leaves, which a
// breaker whose clock starts at 0 records into for its first second), and
// a judgement that finds the rule holding takes it back.
func TestJudge_FullJudgementPublishesItsIncarnation(t *testing.T) {
	// A count rule: a success after the trip leaves it holding.
	rule := &trip.Rule{FailureCountThreshold: 12, MinimumNumberOfCalls: 10, MinimumAppliesToCount: true}
	for _, now := range []time.Duration{0, 7 * sec} {
		w := mustNew(t, 3)
		w.RecordFailure(0, now, rule)
		for range 20 {
			_, trips := w.RecordSuccess(0, now, rule)
			require.False(t, trips)
		}
		id := w.ids[w.slot(w.tick(now))].Load()
		require.Equal(t, ^id, w.head.full.Load(), "at %v: the minimum is met and the rule false", now)
		for n := 0; ; n++ {
			if _, trips := w.RecordFailure(0, now, rule); trips {
				break
			}
			require.Less(t, n, 30, "the failures never tripped the rule")
		}
		require.Zero(t, w.head.full.Load(), "at %v: the rule holds", now)
		_, trips := w.RecordSuccess(0, now, rule)
		require.True(t, trips, "at %v: a success on a window that trips is judged, and trips", now)
	}
}

// A Snapshot retracts every judgement made before it (retract), head.full
// included: a fast success after it may not skip on a full judgement made
// before it. F1 installs a full judgement (the minimum met, one unit of
// slack under a count threshold of 3); F2 and F3 are recorded and their
// goroutines descheduled before judge; a Snapshot holds all three, and the
// rule. S, which began after that Snapshot returned, is ordered after F2
// and F3, and its window trips the rule: RecordTrip sums it, finding the
// judgement retracted, and trips; RecordSuccess must too, not skip on
// head.full. (In the breaker, Counts commits the trip it shows only when
// the window holds an outcome of its current second.)
func TestJudge_SuccessAfterARetractionIsJudged(t *testing.T) {
	rule := &trip.Rule{FailureCountThreshold: 3, MinimumNumberOfCalls: 2, MinimumAppliesToCount: true}
	const gen = 1
	now := 500 * time.Millisecond
	for _, fast := range []bool{false, true} {
		w := mustNew(t, 10)
		_, trips := w.RecordTrip(gen, now, false, false, rule) // a clean window: no judgement
		require.False(t, trips)
		_, trips = w.RecordTrip(gen, now, true, false, rule) // F1: sums {2, 1}, installs slack 1, full
		require.False(t, trips)
		require.Equal(t, ^w.ids[w.slot(0)].Load(), w.head.full.Load(), "F1's judgement is full")
		for range 2 { // F2 and F3, in flight: recorded, not judged
			_, ok := w.record(gen, now, true, false, false)
			require.True(t, ok)
		}
		c := w.Snapshot(gen, now)
		require.Equal(t, window.Counts{Calls: 4, Failures: 3}, c)
		require.True(t, rule.Trips(c))
		_, trips = recordVia(w, fast, gen, now, false, false, rule) // S
		require.Equal(t, window.Counts{Calls: 5, Failures: 3}, w.Snapshot(gen, now))
		require.True(t, trips, "fast %v: S comes after a Snapshot that held three failures: it must trip", fast)
	}
}

// The cached sum of the other buckets holds every outcome a caller could
// have seen in them. Second 0 holds four failures; F, the first outcome of
// second 1, sums the window {5, 5} and publishes the others, {4, 4}. Then
// a success lands in second 0's bucket: its writer read head before head
// moved to second 1 (recordAt with second 0). Either it has returned
// ("landed"), or it is still on its way and a Snapshot has shown it
// ("shown"). The successes of second 1 that follow are each judged below
// the minimum of 10 calls; the window holds the late success, so the
// fourth brings it to {10, 5}, 50%, and must trip. A cache that missed the
// late success would judge {9, 5} and not trip: what removing landed, or
// SnapshotOwed's move of head.others, does.
func TestJudge_CachedSumHoldsWhatLandsElsewhere(t *testing.T) {
	rule := &trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 10}
	const gen = 1
	for _, late := range []string{"landed", "shown"} {
		w := mustNew(t, 10)
		for i := range 4 {
			_, trips := w.RecordTrip(gen, 500*time.Millisecond, true, false, rule)
			require.False(t, trips, "%s: failure %d", late, i)
		}
		now := 1500 * time.Millisecond
		_, trips := w.RecordFailure(gen, now, rule) // F
		require.False(t, trips, late)
		require.Equal(t, w.ids[w.slot(1)].Load(), w.seq.cache.id.Load(), "%s: F published the others", late)
		switch late {
		case "landed":
			_, ok := w.recordAt(gen, 0, false, false, false)
			require.True(t, ok)
		case "shown":
			b := w.bucket(w.slot(0))
			require.True(t, b.addTagged(b.cell(0), b.id.Load())) // the add, and no more
			require.Equal(t, window.Counts{Calls: 6, Failures: 5}, w.Snapshot(gen, now))
		}
		for i := range 3 {
			_, trips := w.RecordSuccess(gen, now, rule)
			require.False(t, trips, "%s: success %d", late, i)
		}
		_, trips = w.RecordSuccess(gen, now, rule)
		require.Equal(t, window.Counts{Calls: 10, Failures: 5}, w.Snapshot(gen, now), late)
		require.True(t, trips, "%s: the fourth success brings the window to the minimum at 50%%: it must trip", late)
	}
}

// Below the minimum number of calls every outcome a judgement does not
// cover is judged on the whole window; the first sum of a second publishes
// the other buckets' part, and the judges after it add their own bucket
// to it, so a second's warm-up sums its 3,600 buckets once, not once per
// outcome. Every sum a judge takes moves head.others (it publishes with a
// compare-and-swap on it, or moves it so that no older cache stays
// current), and nothing else does here, so head.others counts the sums:
// one per second. Disabling the cache (cached always false) makes it one
// per success.
func TestJudge_WarmUpSumsTheWindowOncePerSecond(t *testing.T) {
	w, err := NewWidth(360, 100*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, w.ids, MaxBuckets)
	rule := &trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 100}
	const gen = 1
	for s := range 3 {
		now := time.Duration(s)*100*time.Millisecond + 50*time.Millisecond
		before := w.head.others.Load()
		for i := range 30 {
			var trips bool
			if i%10 == 0 {
				_, trips = w.RecordFailure(gen, now, rule)
			} else {
				_, trips = w.RecordSuccess(gen, now, rule)
			}
			require.False(t, trips, "second %d, outcome %d", s, i)
		}
		require.Equal(t, window.Counts{Calls: uint64(30 * (s + 1)), Failures: uint64(3 * (s + 1))}, w.Snapshot(gen, now))
		require.Equal(t, uint64(1), w.head.others.Load()-before-1, "second %d: sums besides the Snapshot's own move", s)
	}
}
