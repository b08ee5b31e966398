package atomicring

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// The model replays RecordTrip, flush and moveTo step by step, one shared
// access (a load or a compare-and-swap of A or of a slot) per step, on a
// real Ring's words, so that a test can choose the interleaving that the Go
// scheduler only rarely picks: a call stalled between any two of its
// accesses while others run. It mirrors ring.go line by line and must be
// updated with RecordTrip, flush and moveTo; TestModel_AloneMatchesRing
// catches a model that has drifted from them in what a call does alone.
//
// The oracle is the naive window, driven by the model's commits in the
// order they happen: a successful swap of A is the linearization point of
// the call that made it, so after each one the ring must hold exactly the
// oracle's window.

// mpc is where a modelled call resumes: each names the shared access that
// its next step performs.
type mpc uint8

const (
	pcLoad       mpc = iota // RecordTrip or moveTo: a := r.hot.a.Load()
	pcMoveCAS               // RecordTrip's newer-generation swap, or moveTo's
	pcFlushLoad             // flush: s := slot.Load()
	pcFlushCheck            // flush: r.hot.a.Load() != a
	pcFlushCAS              // flush: slot.CompareAndSwap(s, ...)
	pcLeaving               // RecordTrip: the leaving outcome, when full
	pcClaimCAS              // RecordTrip: r.hot.a.CompareAndSwap(a, next)
	pcFast                  // RecordFastSuccess: the one load of A
)

type mop uint8

const (
	opRecord mop = iota
	opAdvance
	opReset
)

// mcall is one call in flight, with the locals that ring.go keeps between
// its shared accesses.
type mcall struct {
	op   mop
	g    uint16
	out  uint64 // opRecord: present, failure, slow
	rule *trip.Rule

	pc        mpc
	fastTried bool   // a fast success has had its RecordFastSuccess load
	a         uint64 // A as this loop iteration loaded it
	at        int    // model.commits when a was loaded

	q, lap, want, s uint64 // flush's locals

	spans bool // the flush's check of A passed, but A had moved and come back

	next    uint64
	tripped bool
	full    bool
	left    uint64 // outcome read from the leaving slot, when full
	leftBy  writer // what last changed that slot

	done    bool
	verdict Verdict
}

// modelStats counts, over one or more runs, the mismatches by cause and the
// rare events that the hazards need.
type modelStats struct {
	runs, commits int
	// fastReads are successes RecordFastSuccess counted without a write.
	fastReads int
	// Flush swaps that landed after A had moved since the flusher loaded
	// it: lateRewrites left the slot's outcome and generation as they were
	// (a lap-0 flush that found its outcome there); lateChanges changed
	// them, lateChangesSameGen while A held the flusher's generation. A
	// change is harmless as long as no claim reads it as a leaving outcome;
	// in its own generation ring.go's proof says the swap cannot land, and
	// only a backward Reset brings the generation back for it to land in.
	lateRewrites, lateChanges, lateChangesSameGen int
	// aRepeats are claim swaps that succeeded although A had changed since
	// the claim loaded it: A came back to the same value, the bound that
	// ring.go documents beside the layout of A. flushSpans are flush checks
	// of A that passed across such a repeat.
	aRepeats, flushSpans int

	// Mismatches with the oracle, by cause: a claim read a leaving outcome
	// that a late flush wrote (flush); a claim committed across an A repeat
	// (repeat); anything else, including a call that never returns (other).
	flush, repeat, other int
	// The first mismatch of each class, for the failure message.
	firstFlush, firstRepeat, firstOther string
}

func (s *modelStats) add(o modelStats) {
	s.runs += o.runs
	s.commits += o.commits
	s.fastReads += o.fastReads
	s.lateRewrites += o.lateRewrites
	s.lateChanges += o.lateChanges
	s.lateChangesSameGen += o.lateChangesSameGen
	s.aRepeats += o.aRepeats
	s.flushSpans += o.flushSpans
	s.flush += o.flush
	s.repeat += o.repeat
	s.other += o.other
	s.firstFlush = cmp.Or(s.firstFlush, o.firstFlush)
	s.firstRepeat = cmp.Or(s.firstRepeat, o.firstRepeat)
	s.firstOther = cmp.Or(s.firstOther, o.firstOther)
}

// writer is what last changed a slot's outcome or generation.
type writer uint8

const (
	byFlush  writer = iota // a flush whose A had not moved: the protocol
	byLate                 // a flush that landed after A moved on for good
	byRepeat               // a flush whose check of A passed across an A repeat
)

type model struct {
	r       *Ring
	o       oracle
	closed  bool // the oracle's window of o.gen is closed by a trip
	commits int
	by      []writer // per slot
	// repeated: a claim or a flush check has passed across an A repeat, so
	// a slot may lack the outcome pending for it, and later evictions in the
	// run may read the wrong one.
	repeated bool
	stats    modelStats
	broken   bool // a mismatch was found: the ring no longer tracks the oracle
}

func newModel(t testing.TB, size int) *model {
	return &model{r: mustNew(t, size), o: oracle{size: size}, by: make([]writer, size)}
}

func (m *model) mismatch(class *int, first *string, format string, args ...any) {
	*class++
	m.broken = true
	if *first == "" {
		*first = fmt.Sprintf(format, args...)
	}
}

// moved records a successful swap of A to the empty window of g.
func (m *model) moved(g uint16) {
	m.commits++
	m.o.gen, m.o.outs, m.closed = g, nil, false
}

// claimed records c's successful claim swap and checks it against the
// oracle: the leaving outcome it read, the counts it committed and whether
// it tripped.
func (m *model) claimed(c *mcall) {
	m.commits++
	m.stats.commits++
	repeat := m.commits-1 != c.at
	if repeat {
		m.stats.aRepeats++
		m.repeated = true
	}
	if m.broken {
		return
	}
	if m.o.gen != c.g || m.closed {
		m.mismatch(&m.stats.other, &m.stats.firstOther, "claim of gen %d committed while the oracle holds gen %d (closed %v)", c.g, m.o.gen, m.closed)
		return
	}
	var leaving uint64
	if len(m.o.outs) == m.o.size {
		x := m.o.outs[0]
		leaving = present | b2u(x.fail)<<1 | b2u(x.slow)<<2
	}
	want, _ := m.o.record(uint32(c.g), c.out&failBit != 0, c.out&slowBit != 0)
	got := m.r.counts(c.next)
	trips := c.rule != nil && c.rule.Trips(want)
	m.closed = trips
	if c.full == (leaving != 0) && c.left == leaving && got == want && c.tripped == trips {
		return
	}
	msg := fmt.Sprintf("W=%d gen %d: claim read leaving %03b (want %03b), got %+v tripped %v, want %+v tripped %v",
		m.o.size, c.g, c.left, leaving, got, c.tripped, want, trips)
	// Once A has repeated, a claim may have committed without flushing its
	// predecessor's outcome in the current stay of the generation, and a
	// late flush of any generation may land in that hole: every later
	// mismatch of the run is the repeat's.
	switch {
	case m.repeated:
		m.mismatch(&m.stats.repeat, &m.stats.firstRepeat, "after an A repeat (this claim's: %v): %s", repeat, msg)
	case c.left != leaving && c.leftBy == byLate:
		m.mismatch(&m.stats.flush, &m.stats.firstFlush, "late flush: %s", msg)
	default:
		m.mismatch(&m.stats.other, &m.stats.firstOther, "%s", msg)
	}
}

// fastRecorded checks a success that RecordFastSuccess counted with one load
// of A, its linearization point: the oracle's window must then hold W fast
// successes of c's generation and not be closed, so that adding one more
// leaves its last W outcomes, and the counts A shows, as they were.
func (m *model) fastRecorded(c *mcall) {
	m.stats.fastReads++
	if m.broken {
		return
	}
	before := m.o.counts()
	healthy := m.o.gen == c.g && !m.closed && before == window.Counts{Calls: uint64(m.o.size)}
	after, _ := m.o.record(uint32(c.g), false, false)
	if !healthy || after != before || m.r.counts(m.r.hot.a.Load()) != after {
		m.mismatch(&m.stats.other, &m.stats.firstOther,
			"W=%d gen %d: a fast success was read as unchanging while the oracle held %+v of gen %d (closed %v)",
			m.o.size, c.g, before, m.o.gen, m.closed)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// step performs c's next shared access and the local work after it, as
// ring.go does.
func (m *model) step(c *mcall) {
	r := m.r
	if c.op != opRecord {
		m.stepMove(c)
		return
	}
	if c.pc == pcLoad && c.out == present && !c.fastTried {
		c.pc, c.fastTried = pcFast, true
	}
	switch c.pc {
	case pcFast:
		if r.RecordFastSuccess(uint32(c.g)) {
			m.fastRecorded(c)
			c.done, c.verdict = true, Recorded
			return
		}
		c.pc = pcLoad
	case pcLoad:
		m.stepLoad(c)
	case pcMoveCAS:
		if r.hot.a.CompareAndSwap(c.a, uint64(c.g)<<genShift) {
			m.moved(c.g)
		}
		c.pc = pcLoad
	case pcFlushLoad, pcFlushCheck, pcFlushCAS:
		m.stepFlush(c)
	case pcLeaving:
		m.stepLeaving(c)
	case pcClaimCAS:
		if !r.hot.a.CompareAndSwap(c.a, c.next) {
			c.pc = pcLoad
			return
		}
		m.claimed(c)
		c.done, c.verdict = true, Recorded
		if c.tripped {
			c.verdict = Tripped
		}
	}
}

// stepLoad is RecordTrip's load of A and what it decides from it: stale,
// a newer generation to move to, closed, a pend to flush, or the claim.
func (m *model) stepLoad(c *mcall) {
	r := m.r
	c.a, c.at, c.spans = r.hot.a.Load(), m.commits, false
	a, g := c.a, c.g
	if uint16(a>>genShift) != g {
		if g-uint16(a>>genShift) >= 1<<15 {
			c.done, c.verdict = true, Stale
			return
		}
		c.pc = pcMoveCAS
		return
	}
	if a&closedBit != 0 {
		c.done, c.verdict = true, AfterTrip
		return
	}
	if a&present != 0 {
		// flush's locals, computed before its first access.
		c.q, c.lap = r.pendSlot(a)
		c.want = a & (genMask | pendMask)
		c.pc = pcFlushLoad
		return
	}
	c.pc = pcLeaving
}

// stepFlush is one access of flush: the slot's load, the check of A, or
// the slot's swap, which also notes who wrote the slot.
func (m *model) stepFlush(c *mcall) {
	r := m.r
	switch c.pc {
	case pcFlushLoad:
		c.s = r.slots[c.q].Load()
		if c.lap != 0 && c.s&(genMask|pendMask) == c.want {
			c.pc = pcLeaving
			return
		}
		c.pc = pcFlushCheck
	case pcFlushCheck:
		if r.hot.a.Load() != c.a {
			c.pc = pcLoad
			return
		}
		if m.commits != c.at {
			c.spans, m.repeated = true, true
			m.stats.flushSpans++
		}
		c.pc = pcFlushCAS
	case pcFlushCAS:
		if !r.slots[c.q].CompareAndSwap(c.s, c.want|(c.s+verOne)&verMask) {
			c.pc = pcFlushLoad
			return
		}
		// A flush lands late when A has moved since the flusher loaded it.
		// In lap 0 that may rewrite the outcome the slot already holds (a
		// flush there writes even when it finds its outcome): the value
		// stays, so only a late landing that changes it is of interest.
		switch {
		case m.commits == c.at:
			m.by[c.q] = byFlush
		case c.s&(genMask|pendMask) == c.want:
			m.stats.lateRewrites++
		case c.spans:
			m.by[c.q] = byRepeat
		default:
			m.by[c.q] = byLate
			m.stats.lateChanges++
			if uint16(r.hot.a.Load()>>genShift) == c.g {
				m.stats.lateChangesSameGen++
			}
		}
		c.pc = pcLeaving
	}
}

// stepLeaving is the claim's read of the leaving outcome, when the window
// is full, and the word it will swap in.
func (m *model) stepLeaving(c *mcall) {
	r := m.r
	a := c.a
	next := a&^pendMask | c.out
	pos := a >> r.posShift & r.field
	c.full, c.left, c.leftBy = a>>r.nShift&r.field == r.size, 0, byFlush
	if c.full {
		c.left, c.leftBy = r.slots[pos].Load()&pendMask, m.by[pos]
		next -= r.delta[c.left]
	} else {
		next += 1 << r.nShift
	}
	next = r.advancePos(next+r.delta[c.out], pos)
	c.tripped = c.rule != nil && next&r.uncleanMask != 0 && c.rule.Trips(r.counts(next))
	if c.tripped {
		next |= closedBit
	}
	c.next = next
	c.pc = pcClaimCAS
}

// stepMove is moveTo: Advance (onlyForward) or Reset.
func (m *model) stepMove(c *mcall) {
	r := m.r
	switch c.pc {
	case pcLoad:
		c.a, c.at = r.hot.a.Load(), m.commits
		d := c.g - uint16(c.a>>genShift)
		if d == 0 || c.op == opAdvance && d >= 1<<15 {
			c.done = true
			return
		}
		c.pc = pcMoveCAS
	case pcMoveCAS:
		if r.hot.a.CompareAndSwap(c.a, uint64(c.g)<<genShift) {
			m.moved(c.g)
			c.done = true
			return
		}
		c.pc = pcLoad
	}
}

// drain runs the calls still in flight to their end in a random order. Each
// retry of a call follows another call's commit, so with no new calls they
// all end within a bounded number of steps; one that does not is a
// mismatch.
func (m *model) drain(rng *rand.Rand, calls []*mcall) {
	for n := 0; len(calls) > 0; n++ {
		if n == 1000 {
			m.mismatch(&m.stats.other, &m.stats.firstOther, "W=%d: %d calls still running 1000 steps into the drain", m.o.size, len(calls))
			return
		}
		i := rng.IntN(len(calls))
		m.step(calls[i])
		if calls[i].done {
			calls = append(calls[:i], calls[i+1:]...)
		}
	}
}

// randomRun drives a ring of W = 1..4 with up to four calls in flight for
// steps scheduling steps, each step starting a call or advancing a random
// one by one shared access, then drains. Generations only move forward
// (newer Records and Advance) unless back, which adds Resets to the current
// generation or up to two back, and Records of the generation before the
// current one, so that a generation's stays recur with calls of the earlier
// stay still in flight.
func randomRun(t testing.TB, seed uint64, back bool, steps int) modelStats {
	rng := rand.New(rand.NewPCG(seed, b2u(back)))
	size := 1 + rng.IntN(4)
	m := newModel(t, size)
	rule := &trip.Rule{FailureCountThreshold: uint64(size), MinimumNumberOfCalls: uint64(size), MinimumAppliesToCount: true}
	var cur uint16
	var calls []*mcall
	for i := 0; i < steps && !m.broken; i++ {
		if len(calls) < 4 && rng.IntN(3) == 0 {
			calls = append(calls, randomCall(rng, &cur, back, rule))
			continue
		}
		if len(calls) == 0 {
			continue
		}
		j := rng.IntN(len(calls))
		// A flush about to swap its slot is where a stall does harm (the
		// lap-0 rule exists for it), so it is run at an eighth of the rate.
		if calls[j].pc == pcFlushCAS && rng.IntN(8) != 0 {
			continue
		}
		m.step(calls[j])
		if calls[j].done {
			calls = append(calls[:j], calls[j+1:]...)
		}
	}
	if !m.broken {
		m.drain(rng, calls)
	}
	m.stats.runs = 1
	return m.stats
}

// randomCall is randomRun's next call: a Record of the current generation
// cur, or an Advance, a Reset or a Record of another generation (which may
// move cur on), as randomRun describes.
func randomCall(rng *rand.Rand, cur *uint16, back bool, rule *trip.Rule) *mcall {
	// Mostly successes and failures: a flush skips, or a stalled one
	// changes a slot, only when outcomes repeat or differ.
	c := &mcall{op: opRecord, g: *cur, out: present | rng.Uint64N(2)<<1}
	if rng.IntN(8) == 0 {
		c.out |= rng.Uint64N(2) << 2
	}
	if rng.IntN(8) == 0 {
		c.rule = rule
	}
	switch x := rng.IntN(24); {
	case x == 0:
		*cur++
		c.op, c.g = opAdvance, *cur
	case x == 1:
		*cur++
		c.g = *cur
	case x == 2: // a late Advance, of a generation already passed
		c.op, c.g = opAdvance, *cur-uint16(rng.IntN(3))
	case x <= 6 && back:
		c.op, c.g = opReset, *cur-uint16(rng.IntN(3))
	case x <= 4: // stale in forward mode, a revisit's in back mode
		c.g = *cur - 1 - uint16(rng.IntN(2))
	case x <= 12 && back:
		c.g = *cur - 1
	}
	return c
}

func modelRuns(t testing.TB, back bool, runs int) modelStats {
	var total modelStats
	for seed := range uint64(runs) {
		total.add(randomRun(t, seed, back, 300))
	}
	return total
}

func modelRunCount(short, long int) int {
	if testing.Short() {
		return short
	}
	return long
}

// With generations only moving forward, every interleaving of Records,
// RecordTrips and Advances keeps the ring exactly on the oracle, and A never
// comes back to a value a claim loaded (laps of W = 1..4 do not wrap).
func TestModel_ForwardInterleavingsMatchOracle(t *testing.T) {
	s := modelRuns(t, false, modelRunCount(10_000, 60_000))
	t.Logf("%+v", s)
	require.Zero(t, s.flush+s.repeat+s.other, "first mismatches: %q", []string{s.firstFlush, s.firstRepeat, s.firstOther})
	require.Zero(t, s.aRepeats+s.flushSpans, "a claim or a flush passed across an A repeat")
	require.Zero(t, s.lateChangesSameGen, "a flush stalled after its check of A landed in its own generation")
	require.NotZero(t, s.lateChanges, "the runs must land stalled flushes in a newer generation")
	require.NotZero(t, s.fastReads, "the runs must count successes in a window full of them without a write")
}

// A Reset that brings back a generation the ring held before is the one
// way, short of 2^16 generations or W*2^L claims, for A to repeat a value; a
// claim stalled across it may subtract the wrong outcome, as documented.
// Nothing else may go wrong: in particular a flush stalled in the earlier
// stay must never land where the new stay reads it, which the lap-0 rule of
// flush guarantees (without it, this test finds late-flush mismatches).
func TestModel_BackwardResetOnlyRepeatsA(t *testing.T) {
	s := modelRuns(t, true, modelRunCount(10_000, 60_000))
	t.Logf("%+v", s)
	assert.Zero(t, s.flush, "a late flush was read as a leaving outcome: %s", s.firstFlush)
	assert.Zero(t, s.other, "a mismatch with no documented cause: %s", s.firstOther)
	require.NotZero(t, s.lateChangesSameGen, "the runs must land stalled flushes in a revisited generation")
}

// Run alone, one whole call after another, the model must leave A and every
// slot exactly as ring.go does: a cheap check that it has not drifted from
// RecordTrip, flush and moveTo (the ver a flush writes or skips included).
func TestModel_AloneMatchesRing(t *testing.T) {
	for _, size := range []int{1, 2, 3, 4, 7, 128} {
		rng := rand.New(rand.NewPCG(uint64(size), 3))
		m := newModel(t, size)
		r := mustNew(t, size)
		rule := &trip.Rule{FailureCountThreshold: 3}
		var cur uint16
		for i := range 3000 {
			c := &mcall{op: opRecord, g: cur, out: present | rng.Uint64N(4)<<1}
			if rng.IntN(4) == 0 {
				c.rule = rule
			}
			switch x := rng.IntN(40); {
			case x == 0:
				cur++
				c.op, c.g = opAdvance, cur
			case x == 1:
				c.op, c.g = opReset, cur-uint16(rng.IntN(3))
				cur = c.g
			case x == 2:
				cur++
				c.g = cur
			case x == 3:
				c.g = cur - 1
			}
			for n := 0; !c.done; n++ {
				require.Less(t, n, 100, "W=%d call %d does not end alone", size, i)
				m.step(c)
			}
			var v Verdict
			switch c.op {
			case opAdvance:
				r.Advance(uint32(c.g))
			case opReset:
				r.Reset(uint32(c.g))
			default:
				_, v = r.RecordTrip(uint32(c.g), c.out&failBit != 0, c.out&slowBit != 0, c.rule)
			}
			require.Equal(t, v, c.verdict, "W=%d call %d", size, i)
			require.Equal(t, r.hot.a.Load(), m.r.hot.a.Load(), "W=%d call %d: A", size, i)
			for q := range r.slots {
				require.Equal(t, r.slots[q].Load(), m.r.slots[q].Load(), "W=%d call %d: slot %d", size, i, q)
			}
		}
		require.Zero(t, m.stats.flush+m.stats.repeat+m.stats.other, "W=%d: %q", size, []string{m.stats.firstFlush, m.stats.firstRepeat, m.stats.firstOther})
	}
}
