package race_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/casbreaker/casbreaker/core"
)

// A transition's clock reading and its commit are one step (R13; defect 4
// of docs/verification.md, "Defects the tests were built on"). Every
// transition that sets a deadline from the clock (a trip, a re-open, a
// retry-after hint's trip, ForceOpen(d), the open -> half-open flip and the
// max wait's restart, which start the max-wait clock, and a close that
// starts a ramp-up) is parked by the clock right after its reading;
// meanwhile the clock steps and another call looks at the breaker. After
// everything returned, one more call shows the deadline the transition
// set. The history of these calls, with their real call and return order,
// goes to porcupine with the sequential model (model_test.go), as in
// TestLinearizable.
//
// Before the fix the lock-free core read the clock and then swapped the
// word: the observer, after the step, still saw the old state, and the
// deadline came from the reading before the step, so no order of the step,
// the observer and the transition explains both (every case was Illegal).
// Now a transition first claims the word, reads the clock after the claim
// and commits; a call that finds the word claimed completes the transition
// with its own reading first. The observer then sees the new state with the
// deadline from the stepped clock, and returns while the transition is
// still parked (lock-free: no call waits for a descheduled one). The mutex
// baseline reads the clock under its lock: the observer waits for it. The
// parking and the waiting are forced by a schedule (schedule_test.go), not
// by timing.
func TestTransitionReadsTheClockAfterItsClaim(t *testing.T) {
	procs(t, 4)
	g0 := core.Permit{}
	probe2 := core.Permit{Generation: 2, Probe: true}
	allow := linIn{kind: linAllow}
	done := func(p core.Permit, err int) linIn { return linIn{kind: linDone, p: p, err: err} }
	advance := func(d time.Duration) linIn { return linIn{kind: linAdvance, d: d} }
	// The common prefix of the half-open cases: trip at 0 s, reach the
	// 1 s deadline, take the one probe (generation 2).
	toHalfOpen := []linIn{allow, done(g0, 1), advance(time.Second), allow}
	oneFailure := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 1}
	withMaxWait := oneFailure
	withMaxWait.MaxWaitInHalfOpen = 10 * time.Second // units of 10 ms
	withRamp := oneFailure
	withRamp.RampUpDuration = 10 * time.Second // starting at 0 %: the ramp's first call is shed
	withHints := core.Config{ConsecutiveFailures: 5, OpenDuration: time.Second, MaxRetryAfter: 10 * time.Second}
	for _, tc := range []struct {
		name   string
		cfg    core.Config
		prefix []linIn       // client 0, one after another
		parked linIn         // client 1: parked right after its first clock reading once armed
		step   time.Duration // client 2 steps the clock while it is parked
		look   linIn         // client 3, after the step, while it is parked
		after  []linIn       // client 0, once everything returned
	}{
		// Closed -> open at 0 s for 1 s; the observer's Allow after the
		// step to 500 ms, and the last one's wait.
		{"trip", oneFailure, []linIn{allow}, done(g0, 1), 500 * time.Millisecond, allow, []linIn{allow}},
		// A hinted failure trips for the 3 s hint.
		{"hinted-trip", withHints, []linIn{allow}, done(g0, 4), time.Second, allow, []linIn{allow}},
		// Half-open -> open at 1 s for 1 s; the observer's State after the
		// step to 1.5 s.
		{"reopen", oneFailure, toHalfOpen, done(probe2, 1), 500 * time.Millisecond, linIn{kind: linState}, []linIn{allow}},
		// ForceOpen(1 s) at 0 s.
		{"force-open", oneFailure, nil, linIn{kind: linForceOpen, d: time.Second}, 500 * time.Millisecond, allow, []linIn{allow}},
		// The manual HalfOpen from open at 0 s, its 10 s max wait from its
		// own reading; the observer's Counts after the step to 1 s; then a
		// probe, and at 10.5 s a call refused if the max wait runs to 11 s
		// (the reading after the claim), or a new probe if it ran out at
		// 10 s (a reading before it).
		{"manual-half-open", withMaxWait, []linIn{allow, done(g0, 1)}, linIn{kind: linHalfOpen}, time.Second,
			linIn{kind: linCounts}, []linIn{allow, advance(9500 * time.Millisecond), allow}},
		// Open -> half-open: the call that flips reads 1 s; the observer's
		// Counts after the step to 2 s; the last Allow's wait is the max
		// wait left, from the flip's reading.
		{"flip", withMaxWait, []linIn{allow, done(g0, 1), advance(time.Second)}, allow, time.Second,
			linIn{kind: linCounts}, []linIn{allow}},
		// Half-open -> half-open once the max wait has passed (at 11 s).
		{"restart", withMaxWait, append(append([]linIn(nil), toHalfOpen...), advance(10*time.Second)), allow, time.Second,
			linIn{kind: linCounts}, []linIn{allow}},
		// Half-open -> closed with a 10 s ramp-up from 0 %: the close
		// reads 1 s; after the step to 11 s the observer is refused
		// (half-open is full) or shed; the last Allow is admitted only if
		// the ramp started at 1 s.
		{"close-with-ramp", withRamp, toHalfOpen, done(probe2, 0), 10 * time.Second, allow, []linIn{allow}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				cfg := tc.cfg
				cfg.Classifier = classify
				s := newSchedule(t, "test")
				clk := &schedClock{ManualClock: core.NewManualClock(0), s: s}
				c := cfg
				c.Clock = clk
				b := mustNew(t, newB, c)
				h := newHistorian(b, clk.ManualClock, fullCounts, 4)
				for _, in := range tc.prefix {
					h.do(0, in)
				}
				parked := s.spawn("parked", 1, func() { h.do(1, tc.parked) })
				s.settle()
				if !s.isParked(parked) {
					t.Fatalf("%v did not stop at a clock reading:\n%s", tc.parked, s.lanesText())
				}
				h.do(2, advance(tc.step))
				look := s.spawn("look", 0, func() { h.do(3, tc.look) })
				s.settle()
				if implName(t) == "lockfree" && !s.done(look) {
					t.Fatalf("lock-free: the look waits for the parked call instead of completing its transition: %s", s.describe([]*lane{look}))
				}
				s.release(parked)
				s.finish()
				for _, in := range tc.after {
					h.do(0, in)
				}
				hist := h.history()
				var steps atomic.Int64
				if res := linearizable(t, linModel(cfg, 0, fullCounts, &steps), hist, ""); res != porcupine.Ok {
					t.Fatalf("the history is %s against the sequential model:\n%s", res, describeHistory(hist))
				}
			})
		})
	}
}
