package buckets

// ADVERSARIAL FINDINGS (branch adv-windows). These tests are expected to
// FAIL against the library as it stands: each shows a way the O(1)
// judgement of judge.go differs from rule.Trips(Snapshot).

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/window"
)

// judgeBegin and judgeFinish are judge() split at the point where a
// goroutine can be descheduled: between summing the window and installing
// the judgement. They follow judge's "break" path line for line (the word
// loaded is not safe / has no slack, so the outcome sums the window).
type judging struct {
	b   bucket
	id  uint64
	inc uint8
	j   uint64
	c   window.Counts
}

func (w *Window) judgeBegin(at recorded, gen uint32, now time.Duration) judging {
	b, id := w.bucket(at.i), at.id
	_, inc, _ := unpackID(id)
	j := b.judge.Load()
	return judging{b: b, id: id, inc: inc, j: j, c: w.Snapshot(gen, now)}
}

// judgeFinish installs the judgement as judge does when the rule does not
// hold, and reports whether the CAS landed.
func (g judging) judgeFinish(rule *window.Rule) bool {
	return g.b.id.Load() == g.id && g.b.judge.CompareAndSwap(g.j, nextJudgement(g.j, g.inc, margin(rule, g.c)))
}

// ADV FINDING 1: an outcome F can be in the window, judged (no trip) and
// returned, and still be invisible to the judgement that ends up installed:
// A summed the window before F was recorded, F summed after, and A's CAS
// landed first (F's then fails, which judge ignores). ver proves "no
// judgement installed and no slack taken since A's load", but not "no
// outcome recorded since A's Snapshot". The installed slack is therefore
// one failure too generous, and a failure G recorded strictly after A and
// F have both returned (no concurrency with anything) takes that slack and
// is reported as not tripping although rule.Trips(Snapshot) holds: a missed
// trip on a sequential call, which judge.go's guarantee ("one whose
// judgement is skipped provably could not trip the rule") excludes.
func TestAdvJudge_StaleInstallHidesCompletedOutcome(t *testing.T) {
	w := mustNew(t, 10)
	rule := &window.Rule{FailureCountThreshold: 3}
	const gen = 1
	// Second 0: one failure, so the window is unclean from now on.
	_, trips := w.RecordTrip(gen, 500*time.Millisecond, true, false, rule)
	require.False(t, trips)

	now := 1500 * time.Millisecond // second 1: bucket 1 has no judgement yet
	// A (a success): recorded, loads judge, sums the window {2 calls, 1 failure}.
	atA, ok := w.record(gen, now, false, false, false)
	require.True(t, ok)
	a := w.judgeBegin(atA, gen, now)
	// F (a failure): recorded, loads the same judge word, sums {3, 2}: no trip.
	atF, ok := w.record(gen, now, true, false, false)
	require.True(t, ok)
	f := w.judgeBegin(atF, gen, now)
	require.False(t, rule.Trips(f.c), "F is judged on a window with F: no trip")
	// A's install lands first (slack 1, computed without F); F's fails.
	require.True(t, a.judgeFinish(rule))
	require.False(t, f.judgeFinish(rule))
	// Both A and F have returned. G, a later sequential failure:
	_, trips = w.RecordTrip(gen, now, true, false, rule)
	c := w.Snapshot(gen, now)
	require.Equal(t, rule.Trips(c), trips,
		"G's judgement: window %+v trips %+v, but G took slack granted from a Snapshot without F", c, *rule)
}

// ADV FINDING 1b: the same with the real RecordTrip only. Two goroutines
// record concurrently into a fresh generation; after both have returned,
// failures are recorded one at a time by this goroutine alone, and each
// verdict must equal rule.Trips(Snapshot) (judge.go: "in sequential use it
// equals rule.Trips(Snapshot(gen, now)) after the record"). A judgement
// installed from a Snapshot that missed a concurrent, completed outcome
// makes one of them skip a trip. Nondeterministic: it needs the
// interleaving of finding 1, so it may pass on a given run.
func TestAdvJudge_SequentialAfterConcurrentMatchesSnapshot(t *testing.T) {
	prev := runtime.GOMAXPROCS(max(4, runtime.NumCPU()))
	defer runtime.GOMAXPROCS(prev)
	w := mustNew(t, 4)
	rule := &window.Rule{FailureCountThreshold: 40}
	now := 100 * time.Millisecond
	deadline := time.Now().Add(3 * time.Second)
	for gen := uint32(1); time.Now().Before(deadline); gen++ {
		now += time.Second
		// Make the window unclean in this generation's first second.
		w.RecordTrip(gen, now, true, false, rule)
		now += time.Second
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range 12 {
					w.RecordTrip(gen, now, (k+g)%3 == 0, false, rule)
				}
			}()
		}
		close(start)
		wg.Wait()
		for range 60 {
			_, trips := w.RecordTrip(gen, now, true, false, rule)
			c := w.Snapshot(gen, now)
			if rule.Trips(c) != trips {
				t.Fatalf("gen %d: sequential failure judged trips=%v on a window %+v that trips=%v", gen, trips, c, rule.Trips(c))
			}
			if trips {
				break
			}
		}
	}
}
