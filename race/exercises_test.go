//go:build exercises

package race_test

// The exercises of docs/learn.md, one per section from 1 to 10: a small
// variant with the section's mistake (exercises_broken_test.go), and a test
// here that fails on it, through a forced interleaving where there is one.
// A failing exercise logs the drawing of its run (docs/learn.md, "How to
// read a drawing"). Fix the variant until
//
//	go test -tags exercises -run TestExercise ./race/
//
// passes, then compare with exercises_solutions_test.go, which
//
//	go test -tags exercises,solutions -run TestExercise ./race/
//
// runs (make test does, and vets the broken variants with the tests).

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// Section 1: two goroutines count a failure each; the first is parked
// after its load while the second counts. Both failures must be counted.
// Fix fail so that nothing another goroutine does can come between its
// read of the count and its write.
func TestExercise1_LostUpdate(t *testing.T) {
	s := newSchedule(t, "test")
	c := &failureCounter{hooks: traced(s)}
	first := s.spawn("first", 1, c.fail)
	s.settle()
	s.spawn("second", 0, c.fail)
	s.settle()
	s.release(first)
	s.finish()
	require.Equal(t, int64(2), c.n.Load(), "two failures counted")
}

// Section 2: two goroutines increment a counter whose limit they never
// reach; the first is parked after its load while the second increments.
// Every increment that says it counted must be counted. Fix inc with the
// load, decide, CAS loop.
func TestExercise2_CASLoop(t *testing.T) {
	s := newSchedule(t, "test")
	c := &boundedCounter{hooks: traced(s), max: 10}
	var counted atomic.Int64
	inc := func() {
		if c.inc() {
			counted.Add(1)
		}
	}
	first := s.spawn("first", 1, inc)
	s.settle()
	s.spawn("second", 0, inc)
	s.settle()
	s.finish()
	require.Equal(t, counted.Load(), c.n.Load(), "increments that said they counted, and the count")
	require.True(t, s.done(first))
}

// Section 3: every field of the state word keeps its value whatever the
// others hold. Fix packWord and unpackWord to the table's bit ranges.
func TestExercise3_PackedWord(t *testing.T) {
	for _, f := range [][4]uint64{
		{0, 0, 0, 0},
		{7, 31, 1<<36 - 1, 1<<20 - 1},
		{5, 0, 1<<36 - 1, 1},
		{2, 31, 0, 1<<20 - 1},
		{1, 3, 123456789, 54321},
	} {
		st, step, payload, gen := unpackWord(packWord(f[0], f[1], f[2], f[3]))
		require.Equal(t, f, [4]uint64{st, step, payload, gen}, "state, step, payload, generation through packWord and unpackWord")
	}
}

// Section 4: one probe is permitted; two callers arrive after the open
// duration, one after the other. The first flips open to half-open and is
// the first probe: the flip must count it (regression B04). Fix the flip.
func TestExercise4_FlipCountsItsProbe(t *testing.T) {
	clk := core.NewManualClock(2 * time.Second)
	f := &flipBreaker{clock: clk, deadline: time.Second, permitted: 1}
	f.w.Store(uint64(core.Open))
	admitted := 0
	for range 2 {
		if f.allow() {
			admitted++
		}
	}
	require.Equal(t, 1, admitted, "callers admitted after the open duration, for 1 permitted probe")
}

// Section 5: call A is admitted while closed; another call's failure
// trips; the open duration ends and a probe is admitted; then A succeeds.
// A's permit is of generation 0, the breaker is in generation 2: A's
// success must change nothing (only the probe's may close). Fix record.
func TestExercise5_StaleSuccess(t *testing.T) {
	g := &genBreaker{}
	a := g.allow()
	g.record(g.allow(), core.Failure) // trips: open, generation 1
	probe := g.allow()                // half-open, generation 2
	require.True(t, probe.Probe)
	g.record(a, core.Success)
	require.Equal(t, core.HalfOpen, g.state, "after a success from generation %d in generation %d", a.Generation, g.gen)
}

// Section 6: the breaker tripped at 0 s for 1 s and closed again; at 10 s
// a call loads the deadline and is parked; a trip at 10 s writes the
// deadline, then the state; the call goes on. No call may be admitted as a
// probe before 11 s. Writing the deadline first does not help a reader
// that loads the two fields apart: fix untilBreaker so that one load sees
// both.
func TestExercise6_OneLoadSeesBoth(t *testing.T) {
	s := newSchedule(t, "test")
	clk := core.NewManualClock(0)
	u := &untilBreaker{hooks: traced(s), clock: clk, open: time.Second}
	s.act(func() string {
		u.trip()
		clk.Set(time.Second)
		u.close() // as a probe's success would

		clk.Set(10 * time.Second)
		return "trip at 0s, closed at 1s; clock -> 10s"
	})
	var probe, ok bool
	call := s.spawn("call", 1, func() { probe, ok = u.allow() })
	s.settle()
	s.act(func() string { u.trip(); return "trip at 10s" })
	s.release(call)
	s.finish()
	require.False(t, ok && probe, "a call at 10 s, during the trip at 10 s, was admitted as a probe")
}

// Section 7: a bucket held second 3; at 13 s the recycler relabels it and
// is parked; two writers add failures of second 13; the recycler goes on
// and adds its own. All three must be in the bucket. Fix bucket so that
// relabel and clear are one step.
func TestExercise7_RecycleInOneStep(t *testing.T) {
	s := newSchedule(t, "test")
	b := &bucket{hooks: traced(s)}
	b.add(3)
	r := s.spawn("recycler", 1, func() { b.add(13) })
	s.settle()
	for i := range 2 {
		s.spawn(fmt.Sprintf("writer %d", i+1), 0, func() { b.add(13) })
		s.settle()
	}
	if s.isParked(r) {
		s.release(r)
	}
	s.finish()
	require.EqualValues(t, 3, b.failures(13), "failures of second 13 in the bucket")
}

// Section 8: the listener of a trip calls back into the breaker. The
// call must return. Fix notifier so that the listener runs after the
// unlock.
func TestExercise8_ListenerAfterTheUnlock(t *testing.T) {
	s := newSchedule(t, "test")
	var (
		n       *notifier
		seen    core.State
		rescued atomic.Bool
	)
	n = &notifier{listener: func(core.Transition) {
		seen = n.State()
		if rescued.Load() {
			s.park("") // while the test locks the mutex again for fail's unlock
		}
	}}
	l := s.spawn("fail", 0, n.fail)
	s.settle()
	if !s.done(l) {
		// Unstick it before failing: unlock from outside (only a test
		// may), then lock again for fail's own unlock.
		reason := s.blockedOn(l)
		rescued.Store(true)
		n.mu.Unlock()
		s.settle()
		n.mu.Lock()
		s.finish()
		t.Fatalf("deadlock: the listener's State waits (%s) for the lock its own caller holds", reason)
	}
	require.Equal(t, core.Open, seen, "the state the listener saw")
}

// Section 9: a permit of generation 0, recorded after 65,536 transitions,
// must not count. Fix the comparison in record.
func TestExercise9_WholeGeneration(t *testing.T) {
	w := &wideBreaker{}
	p := core.Permit{Generation: w.gen}
	for range 1 << 16 {
		w.transition()
	}
	w.record(p)
	require.Zero(t, w.failures, "a failure of generation 0 counted in generation %d", w.gen)
}

// Section 10: the trip is parked right after its clock reading, the clock
// steps 500 ms, a call looks, the trip goes on, a last call looks; the
// history must be linearizable. Fix Record: claim the word first (state
// 7), read the clock, then commit (Allow below already helps a claim).
func TestExercise10_ClaimReadCommit(t *testing.T) {
	s := newSchedule(t, "test")
	clk := &schedClock{ManualClock: core.NewManualClock(0), s: s}
	b := &tripBreaker{hooks: traced(s), clock: clk, open: time.Second}
	h := newHistorian(b, clk.ManualClock, fullCounts, 4)
	p := h.do(0, linIn{kind: linAllow}).p
	trip := s.spawn("trip", 1, func() { h.do(1, linIn{kind: linDone, p: p, err: 1}) })
	s.settle()
	require.True(t, s.isParked(trip), "the trip reads the clock")
	h.do(2, linIn{kind: linAdvance, d: 500 * time.Millisecond})
	s.spawn("call", 0, func() { laneAllow(s, h, 3) })
	s.settle()
	s.release(trip)
	s.finish()
	h.do(0, linIn{kind: linAllow})
	var n atomic.Int64
	cfg := oneProbe
	cfg.Classifier = classify
	if res := linearizable(t, linModel(cfg, 0, fullCounts, &n), h.history(), ""); res != porcupine.Ok {
		t.Fatalf("the history is %s:\n%s", res, describeHistory(h.history()))
	}
}

// The parts of tripBreaker the exercise does not change.

func (r *tripBreaker) Allow() (core.Permit, error) {
	for {
		w := r.w.Load()
		switch st, dl := core.State(w&0xff), time.Duration(w>>8); st {
		case core.Closed:
			return core.Permit{}, nil
		case 7: // a claim: help
			now := r.clock.Now()
			r.w.CompareAndSwap(w, uint64(now+r.open)<<8|uint64(core.Open))
		default:
			if now := r.clock.Now(); now < dl {
				return core.Permit{RetryAfter: dl - now}, core.ErrOpen
			}
			return core.Permit{}, core.ErrHalfOpenFull // not reached
		}
	}
}

func (r *tripBreaker) Done(p core.Permit, err error)             { r.Record(p, core.DefaultClassifier(err)) }
func (r *tripBreaker) RecordHint(p core.Permit, _ time.Duration) { r.Record(p, core.Failure) }
func (r *tripBreaker) State() core.State                         { return core.State(r.w.Load() & 0xff) }
func (r *tripBreaker) Counts() core.Counts                       { return core.Counts{State: r.State()} }
