package race_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// pausingClock is a manual clock that, once armed, parks the goroutine
// making its parkAt-th reading (counted from arming) until release is closed
// (or a minute passes, so a broken test cannot hang). paused is closed when
// that goroutine is parked.
type pausingClock struct {
	*core.ManualClock
	parkAt  int32
	armed   atomic.Bool
	reads   atomic.Int32
	paused  chan struct{}
	release chan struct{}
}

func newPausingClock(parkAt int32) *pausingClock {
	return &pausingClock{ManualClock: core.NewManualClock(0), parkAt: parkAt, paused: make(chan struct{}), release: make(chan struct{})}
}

func (c *pausingClock) Now() time.Duration {
	if c.armed.Load() && c.reads.Add(1) == c.parkAt {
		close(c.paused)
		select {
		case <-c.release:
		case <-time.After(time.Minute):
		}
	}
	return c.ManualClock.Now()
}

// A Record and the trip it causes are one step (R1, R13). The trip rule
// holds "after every counted outcome": once an outcome that makes the rule
// hold is counted, the breaker is open for everybody. Here goroutine A
// records the success that brings a count window to 1 failure in 2 calls (50
// %, minimum 2), and is parked by the clock on its way to the trip: the
// lock-free Record reads the clock for the open deadline after its window
// add and before its CAS on the state word. While A is parked, the test
// records one more success and asks for the state.
//
// In every sequential order of these calls the breaker is open once both
// successes are recorded: if A's comes first it trips, and otherwise the
// test's own success is the second call (1 failure in 2) and trips. The
// mutex baseline holds its lock across the clock read, so the test's calls
// wait for A and see open. The lock-free core closes the count window of the
// generation in the very swap that adds A's outcome (atomicring.RecordTrip):
// the test's success finds the window closed, is stale, and commits A's trip
// itself before returning, so State says open and Allow refuses. Before that
// fix the success was counted in a window already holding A's outcome (1
// failure in 3), the breaker stayed closed, and TestLinearizable found the
// same from random histories.
//
// The Counts cases park a trip by the first failure (failure count 1). With
// a count window, Counts sees the closed window and commits the trip first,
// so it reports open. With a time window Counts reads the window through a
// Snapshot, which is one state of it, finds a closed breaker whose window
// trips the rule, and commits that trip first, so it reports open too
// (docs/design.md, A record and its trip are one step). Before, the
// lock-free Counts reported closed with 1 failure in the window, a snapshot
// no sequential order produces.
func TestRecordAndItsTripAreOneStep(t *testing.T) {
	t.Run("record-and-state", func(t *testing.T) {
		forEachImpl(t, func(t *testing.T, newB newFunc) {
			clk := newPausingClock(1) // the trip's read, the only one of a count-window Record
			b := mustNew(t, newB, core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
				OpenDuration: time.Second, Clock: clk})
			p0, _ := b.Allow()
			b.Record(p0, core.Failure) // 1 call: below the minimum
			pA, _ := b.Allow()
			clk.armed.Store(true)
			aDone := make(chan struct{})
			go func() {
				defer close(aDone)
				b.Record(pA, core.Success) // 1 failure in 2: trips, parked on the clock
			}()
			<-clk.paused

			type seen struct {
				granted bool
				st      core.State
				again   bool
			}
			res := make(chan seen, 1)
			go func() {
				var s seen
				p, err := b.Allow()
				if s.granted = err == nil; s.granted {
					b.Record(p, core.Success)
				}
				s.st = b.State()
				p2, err := b.Allow()
				if s.again = err == nil; s.again {
					b.Record(p2, core.Ignored)
				}
				res <- s
			}()
			var s seen
			got := false
			select {
			case s = <-res:
				got = true
			case <-time.After(200 * time.Millisecond):
				// The baseline: its calls wait for A's lock. Not a timing
				// assertion; the verdict below is the same either way.
			}
			close(clk.release)
			<-aDone
			if !got {
				s = <-res
			}
			var wrong []string
			if s.granted && s.st != core.Open {
				wrong = append(wrong, "State() after the test's success returned says "+s.st.String())
			}
			if s.granted && s.again {
				wrong = append(wrong, "Allow after it granted a closed-state permit")
			}
			if st := b.State(); st != core.Open {
				wrong = append(wrong, "after both successes returned the breaker is "+st.String()+": no trip happened")
			}
			if len(wrong) > 0 {
				t.Fatal(strings.Join(wrong, "; "))
			}
		})
	})
	for _, wt := range []core.WindowType{core.CountBased, core.TimeBased} {
		t.Run("counts/"+wt.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				// A count-window Record reads the clock once, for the open
				// deadline; a time-window Record reads it for the outcome's
				// second, then for the deadline: park the deadline's read.
				parkAt := int32(1)
				if wt == core.TimeBased {
					parkAt = 2
				}
				clk := newPausingClock(parkAt)
				b := mustNew(t, newB, core.Config{WindowType: wt, WindowSize: 10, FailureCountThreshold: 1,
					OpenDuration: time.Second, Clock: clk})
				p, _ := b.Allow()
				clk.armed.Store(true)
				aDone := make(chan struct{})
				go func() {
					defer close(aDone)
					b.Record(p, core.Failure) // trips, parked on the clock
				}()
				<-clk.paused
				res := make(chan core.Counts, 1)
				go func() { res <- b.Counts() }()
				var c core.Counts
				got := false
				select {
				case c = <-res:
					got = true
				case <-time.After(200 * time.Millisecond): // the baseline waits for the lock
				}
				close(clk.release)
				<-aDone
				if !got {
					c = <-res
				}
				if c.State == core.Closed && c.Failures > 0 {
					t.Fatalf("Counts during the trip: %+v", c)
				}
			})
		})
	}
}
