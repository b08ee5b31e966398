package atomicring

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// oracle is the naive model of a count window: the last W outcomes of the
// generation it holds, summed from scratch on every read. It uses the same
// 16-bit generation rule the Ring documents.
type oracle struct {
	size int
	gen  uint16
	outs []outcome
}

type outcome struct{ fail, slow bool }

func (o *oracle) record(gen uint32, fail, slow bool) (window.Counts, bool) {
	g := uint16(gen)
	if g != o.gen {
		if uint16(g-o.gen) >= 1<<15 {
			return window.Counts{}, false
		}
		o.gen, o.outs = g, nil
	}
	o.outs = append(o.outs, outcome{fail, slow})
	if len(o.outs) > o.size {
		o.outs = o.outs[1:]
	}
	return o.counts(), true
}

func (o *oracle) counts() window.Counts {
	var c window.Counts
	for _, x := range o.outs {
		c.Calls++
		if x.fail {
			c.Failures++
		}
		if x.slow {
			c.SlowCalls++
		}
		if x.fail && x.slow {
			c.SlowFailures++
		}
	}
	return c
}

// calls is the oracle's window as Ring.Calls reports it, oldest first,
// one call per byte (bit 0 failure, bit 1 slow), as a string.
func (o *oracle) calls() string {
	b := make([]byte, len(o.outs))
	for i, x := range o.outs {
		b[i] = byte(outBits(x.fail, x.slow) >> 1)
	}
	return string(b)
}

// callsOf is r.Calls(gen) as a string, failing on a closed window.
func callsOf(r *Ring, gen uint32) string {
	buf := make([]uint8, r.Size())
	n, _ := r.Calls(gen, buf)
	return string(buf[:n])
}

// sumOf is the window of the calls that Ring.Calls reported.
func sumOf(calls []uint8) window.Counts {
	var c window.Counts
	for _, x := range calls {
		f, s := uint64(x&1), uint64(x>>1&1)
		c.Calls++
		c.Failures += f
		c.SlowCalls += s
		c.SlowFailures += f & s
	}
	return c
}

// violation returns what is wrong with c as a window of size w, or "".
func violation(c window.Counts, w int) string {
	switch {
	case c.Calls > uint64(w):
		return fmt.Sprintf("calls above the window size %d: %+v", w, c)
	case c.Failures > c.Calls, c.SlowCalls > c.Calls:
		return fmt.Sprintf("failures or slow above calls: %+v", c)
	case c.SlowFailures > min(c.SlowCalls, c.Failures):
		return fmt.Sprintf("slow failures above min(slow, failures): %+v", c)
	}
	return ""
}

func mustNew(t testing.TB, size int) *Ring {
	t.Helper()
	r, err := New(size)
	require.NoError(t, err)
	return r
}

func TestNew_RejectsSizesOutsideRange(t *testing.T) {
	for _, size := range []int{0, -1, 256, math.MinInt, math.MaxInt} {
		r, err := New(size)
		require.ErrorIs(t, err, ErrSize, "size %d", size)
		assert.Nil(t, r)
		assert.Contains(t, err.Error(), fmt.Sprintf("got %d", size))
	}
	for _, size := range []int{1, 2, 100, MaxSize} {
		r, err := New(size)
		require.NoError(t, err, "size %d", size)
		assert.Equal(t, size, r.Size())
		assert.Zero(t, r.Snapshot(0), "a new ring holds generation 0, empty")
	}
}

// TestLayout_EveryFieldFits checks, for every size, that the fields of A
// tile 64 bits exactly, that a slot's fields fit below its generation, and
// that a state with every field at its largest value survives pack/unpack.
// The zero Ring is not usable: every record on it, a success included,
// panics with a message that names New (not an index out of range deep in
// the slots), and its snapshot is an empty window.
func TestZeroRing_RecordPanicsNamingNew(t *testing.T) {
	for _, c := range []struct {
		name          string
		failure, slow bool
	}{{"success", false, false}, {"failure", true, false}, {"slow", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			var r Ring
			require.PanicsWithValue(t, "atomicring: Ring used without New: the zero Ring has no slots",
				func() { r.Record(0, c.failure, c.slow) })
		})
	}
	var r Ring
	require.False(t, r.RecordFastSuccess(0), "a zero Ring is no healthy window")
	require.Equal(t, window.Counts{}, r.Snapshot(0))
}

func TestLayout_EveryFieldFits(t *testing.T) {
	for size := 1; size <= MaxSize; size++ {
		r := mustNew(t, size)
		k := uint(bits.Len(uint(size)))
		l := uint(bits.Len64(r.lapMask))
		require.Equal(t, uint(64), 3+5*k+l+1+16, "size %d", size)
		require.GreaterOrEqual(t, l, uint(4), "size %d", size)

		m := r.field
		aFields := []state{{pend: pendMask}, {sf: m}, {s: m}, {f: m}, {n: m}, {pos: m}, {lap: r.lapMask}, {closed: true}, {gen: math.MaxUint16}}
		var masks []uint64
		for _, f := range aFields {
			masks = append(masks, r.pack(f))
		}
		requireTiles(t, masks, "A, size %d", size)
		requireTiles(t, []uint64{pendMask, verMask, closedBit, genMask}, "slot, size %d", size)
		require.Equal(t, uint64(math.MaxUint16<<genShift), uint64(genMask), "size %d", size)

		w := uint64(size)
		full := state{pend: pendMask, sf: w, s: w, f: w, n: w, pos: w - 1, lap: r.lapMask, closed: true, gen: math.MaxUint16}
		require.Equal(t, full, r.unpack(r.pack(full)), "size %d", size)

		// The ring's own word arithmetic reads and adds the same fields.
		require.Equal(t, window.Counts{Calls: w, Failures: w, SlowCalls: w, SlowFailures: w}, r.counts(r.pack(full)), "size %d", size)
		require.Equal(t, r.pack(state{f: m})|r.pack(state{s: m}), r.uncleanMask, "size %d", size)
		for out := range uint64(8) {
			f, s := out>>1&1, out>>2&1
			require.Equal(t, r.pack(state{f: f, s: s, sf: f & s}), r.delta[out], "size %d, out %03b", size, out)
		}
	}
}

// requireTiles requires the masks to be disjoint and to cover all 64 bits.
func requireTiles(t *testing.T, masks []uint64, msg string, args ...any) {
	t.Helper()
	var union uint64
	for _, m := range masks {
		require.Zero(t, union&m, append([]any{msg}, args...)...)
		union |= m
	}
	require.Equal(t, uint64(math.MaxUint64), union, append([]any{msg}, args...)...)
}

// TestRecord_MatchesOracle drives rings of several sizes with random
// outcomes and generation changes (newer, older, equal modulo 2^16, and
// across the 16-bit wrap) and compares every result and every snapshot with
// the naive model.
func TestRecord_MatchesOracle(t *testing.T) {
	steps, seeds := 3000, uint64(8)
	if testing.Short() {
		steps, seeds = 800, 3
	}
	for _, size := range []int{1, 2, 3, 7, 100, 255} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("W=%d/seed=%d", size, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(size)))
				r := mustNew(t, size)
				o := &oracle{size: size}
				var cur uint32
				for i := 0; i < steps; i++ {
					gen := cur
					switch p := rng.IntN(100); {
					case p < 3: // a newer generation
						cur += 1 + rng.Uint32N(3)
						gen = cur
					case p < 4: // a big jump forward, still newer
						cur += 1 + rng.Uint32N(1<<15-1)
						gen = cur
					case p < 8: // stale: older by 1..2^15
						gen = cur - 1 - rng.Uint32N(1<<15)
					case p < 9: // the same generation modulo 2^16
						gen = cur + (1<<16)*(1+rng.Uint32N(4))
					}
					fail, slow := rng.IntN(3) == 0, rng.IntN(4) == 0
					want, wantOK := o.record(gen, fail, slow)
					var got window.Counts
					var ok bool
					if rng.IntN(2) == 0 {
						got, ok = r.Record(gen, fail, slow)
					} else {
						// The breaker's way: the verdict alone, the counts
						// read back (alone on the ring, they are the same).
						ok = r.RecordOutcome(gen, fail, slow, nil) == Recorded
						if ok {
							got = r.Snapshot(gen)
						}
					}
					// Plain comparisons: testify's reflection per step would
					// dominate the run time under the race detector.
					if ok != wantOK || got != want {
						t.Fatalf("step %d gen %#x (ring at %#x): got %+v, %v; want %+v, %v", i, gen, cur, got, ok, want, wantOK)
					}
					if v := violation(got, size); v != "" {
						t.Fatalf("step %d: %s", i, v)
					}
					if s, want := r.Snapshot(cur), o.counts(); s != want {
						t.Fatalf("step %d: snapshot %+v, want %+v", i, s, want)
					}
					if r.Snapshot(cur+1) != (window.Counts{}) || r.Snapshot(cur-1) != (window.Counts{}) {
						t.Fatalf("step %d: a newer generation must start empty and an older one be gone", i)
					}
					if got, want := callsOf(r, cur), o.calls(); got != want {
						t.Fatalf("step %d: Calls %q, want %q", i, got, want)
					}
				}
			})
		}
	}
}

// TestRegression_EvictionClearsSlowFailures is resilience4j issue #1335:
// evicting a slow failure must take it out of the slow-failure count too, or
// the count drifts above min(slow, failures).
func TestRegression_EvictionClearsSlowFailures(t *testing.T) {
	pattern := []outcome{{fail: true, slow: true}, {}, {fail: true}, {slow: true}}
	r := mustNew(t, 3)
	o := &oracle{size: 3}
	for i := 0; i < 250*len(pattern); i++ {
		x := pattern[i%len(pattern)]
		want, _ := o.record(1, x.fail, x.slow)
		got, ok := r.Record(1, x.fail, x.slow)
		require.True(t, ok)
		require.Equal(t, want, got, "call %d", i+1)
		require.LessOrEqual(t, got.SlowFailures, min(got.SlowCalls, got.Failures), "call %d", i+1)
		if i == 3 {
			require.Zero(t, got.SlowFailures, "the 4th call evicts the only slow failure")
		}
	}
}

func TestRecord_StaleGenerationChangesNothing(t *testing.T) {
	r := mustNew(t, 5)
	_, ok := r.Record(10, true, true)
	require.True(t, ok)
	before := r.Snapshot(10)
	for _, gen := range []uint32{9, 0, 10 + 1<<15, 10 + 1<<15 + 1, 10 + 1<<16 - 1} {
		c, ok := r.Record(gen, true, true)
		assert.False(t, ok, "gen %d", gen)
		assert.Zero(t, c, "gen %d", gen)
		assert.Equal(t, before, r.Snapshot(10), "gen %d", gen)
	}
	c, ok := r.Record(11, false, false)
	require.True(t, ok)
	assert.Equal(t, window.Counts{Calls: 1}, c, "a newer generation starts empty")
}

// TestRecord_GenerationWrapsAt16Bits: only the low 16 bits count, so
// 0x1_0000 follows 0xFFFF, and a generation 2^16 apart is the same one.
func TestRecord_GenerationWrapsAt16Bits(t *testing.T) {
	r := mustNew(t, 4)
	for gen := uint32(0); gen <= 0xFFFF; gen += 1 << 12 {
		_, ok := r.Record(gen, false, false)
		require.True(t, ok, "gen %#x", gen)
	}
	_, ok := r.Record(0xFFFF, true, false)
	require.True(t, ok)
	c, ok := r.Record(0x1_0000, true, false)
	require.True(t, ok)
	assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, c, "0x10000 is newer than 0xFFFF")
	c, ok = r.Record(0x5_0000, false, true)
	require.True(t, ok)
	assert.Equal(t, window.Counts{Calls: 2, Failures: 1, SlowCalls: 1}, c, "0x50000 is 0x10000 again")
	_, ok = r.Record(0xFFFF, true, true)
	assert.False(t, ok, "0xFFFF is now older")
}

// recordFrom replays outcomes drawn from rng into both r and o, checking
// each result.
func recordFrom(t *testing.T, rng *rand.Rand, r *Ring, o *oracle, gen uint32, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		fail, slow := rng.IntN(2) == 0, rng.IntN(3) == 0
		want, wantOK := o.record(gen, fail, slow)
		got, ok := r.Record(gen, fail, slow)
		require.Equal(t, wantOK, ok, "call %d of gen %d", i, gen)
		require.Equal(t, want, got, "call %d of gen %d", i, gen)
	}
}

// A flush stalled after its check of A, from an earlier stay of the
// generation the ring now holds again (5, then 3 by Reset, then 5 again):
// the new stay's flushes in lap 0 write whatever the slot holds, so the
// stalled swap cannot land on a slot the new stay skipped, and the window
// stays exact. With the skip allowed in lap 0, the swap lands and the
// eviction subtracts a failure the window never held.
func TestFlush_RevisitedGenerationRewritesItsSlots(t *testing.T) {
	r := mustNew(t, 2)
	// The second and fourth outcomes are slow so that no window of two fast
	// successes comes up and every record is a claim (RecordFastSuccess
	// would count a success there without one).
	for i, fail := range []bool{true, false, false, false, true} {
		_, ok := r.Record(5, fail, i%2 == 1) // slot 0 ends as (5, success), pend = failure
		require.True(t, ok)
	}
	stalled := r.hot.a.Load()
	q := (stalled>>r.posShift&r.field + r.size - 1) % r.size
	loaded := r.slots[q].Load()
	require.NotEqual(t, stalled&(genMask|pendMask), loaded&(genMask|pendMask), "the stalled flush needs a write")

	r.Reset(3)
	var got []window.Counts
	record := func() {
		c, ok := r.Record(5, false, false)
		require.True(t, ok)
		got = append(got, c)
	}
	record()
	record() // flushes the first success of the new stay into slot 0
	late := stalled&(genMask|pendMask) | (loaded+verOne)&verMask
	assert.False(t, r.slots[q].CompareAndSwap(loaded, late), "the stalled flush landed")
	record()
	assert.Equal(t, []window.Counts{{Calls: 1}, {Calls: 2}, {Calls: 2}}, got)
}

// TestFlush_DelayedFlusherWritesNothing replays a Record that loaded A and
// then stalled in its flush, while other calls moved the ring on: to a newer
// generation, or thousands of claims on in the same one, with a run of
// successes at the end so that the later flushes of that slot write nothing.
// Stalled before its check of A, the late flush must leave every slot alone
// (it may report success only when the slot already holds its outcome, the
// one case where writing nothing is all it would do). Stalled after the
// check, its swap from the slot value it loaded must fail in its own
// generation, whatever the later flushes skipped, and must not disturb the
// window in a newer one.
func TestFlush_DelayedFlusherWritesNothing(t *testing.T) {
	cases := []struct {
		name  string
		size  int
		then  func(t *testing.T, rng *rand.Rand, r *Ring, o *oracle) uint32
		check int
	}{
		{
			name: "newer generation wrote the slot",
			size: 3,
			then: func(t *testing.T, rng *rand.Rand, r *Ring, o *oracle) uint32 {
				recordFrom(t, rng, r, o, 2, 3) // gen 2 writes slots 0 and 1
				return 2
			},
			check: 20,
		},
		{
			name: "same generation, laps later, then only successes",
			size: 128, // k = 8, L = 5: A's lap wraps every 4096 claims
			then: func(t *testing.T, rng *rand.Rand, r *Ring, o *oracle) uint32 {
				recordFrom(t, rng, r, o, 1, 4000-2)
				for range 3 * 128 {
					want, _ := o.record(1, false, false)
					got, ok := r.Record(1, false, false)
					require.True(t, ok)
					require.Equal(t, want, got)
				}
				return 1
			},
			check: 2 * 128,
		},
	}
	for _, tc := range cases {
		for seed := range uint64(64) {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(tc.size)))
				r := mustNew(t, tc.size)
				o := &oracle{size: tc.size}
				recordFrom(t, rng, r, o, 1, 2+rng.IntN(2*tc.size))
				stalled := r.hot.a.Load()
				require.NotZero(t, stalled&present)
				q := (stalled>>r.posShift&r.field + r.size - 1) % r.size
				loaded := r.slots[q].Load() // what a flusher loads before its check of A
				holds := loaded&(genMask|pendMask) == stalled&(genMask|pendMask)

				gen := tc.then(t, rng, r, o)
				slots := make([]uint64, len(r.slots))
				for i := range r.slots {
					slots[i] = r.slots[i].Load()
				}
				if r.flush(stalled) {
					require.Equal(t, stalled&(genMask|pendMask), slots[q]&(genMask|pendMask),
						"a flush from a superseded A reported success, yet the slot holds another outcome")
				}
				for i := range r.slots {
					require.Equal(t, slots[i], r.slots[i].Load(), "slot %d", i)
				}
				if !holds {
					// The swap a flush stalled after its check of A would
					// make. In its own generation the slot must have been
					// written since; after a reset it may land on a slot the
					// new generation has not flushed yet, which the new
					// generation overwrites before it reads it.
					late := stalled&(genMask|pendMask) | (loaded+verOne)&verMask
					landed := r.slots[q].CompareAndSwap(loaded, late)
					require.False(t, landed && gen == 1, "a flush stalled after its check of A landed in its own generation")
				}
				recordFrom(t, rng, r, o, gen, tc.check) // exact, whether or not it landed
			})
		}
	}
}

// TestRecord_LeftoverSlotsFrom2To16GenerationsBack: slots keep whatever an
// old generation wrote, and 2^16 generations later that leftover carries
// the current generation's tag. A first-lap flush must overwrite it whatever
// it looks like: whether it has the flush's own tag with another outcome,
// or a later lap's tag, which a flusher that trusted the slot alone would
// take for "A has moved on" forever.
func TestRecord_LeftoverSlotsFrom2To16GenerationsBack(t *testing.T) {
	const size = 7
	for _, tc := range []struct {
		name string
		old  int // outcomes of generation 1 before the 2^16 others
	}{
		{"same tag, other outcome", size + 1},
		{"later lap tag", 3*size + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(tc.old)))
			r := mustNew(t, size)
			o := &oracle{size: size}
			for i := 0; i < tc.old; i++ {
				_, ok := r.Record(1, true, true) // every leftover is a slow failure
				require.True(t, ok)
			}
			// One call per generation writes no slot: its outcome stays in
			// pend until the next call, which is of the next generation.
			for gen := uint32(2); gen <= 1<<16; gen++ {
				_, ok := r.Record(gen, false, false)
				require.True(t, ok)
				o.record(gen, false, false)
			}
			// A ring that trusted the leftover would spin in Record, so
			// run the calls where a watchdog can give up on them.
			type result struct{ got, want window.Counts }
			results := make(chan result)
			go func() {
				defer close(results)
				for i := 0; i < 4*size; i++ {
					fail, slow := rng.IntN(2) == 0, i%3 == 0
					want, _ := o.record(1<<16+1, fail, slow)
					got, _ := r.Record(1<<16+1, fail, slow)
					results <- result{got, want}
				}
			}()
			for i := 0; ; i++ {
				select {
				case res, more := <-results:
					if !more {
						return
					}
					require.Equal(t, res.want, res.got, "call %d", i)
				case <-time.After(10 * time.Second):
					t.Fatalf("call %d does not return: a leftover slot stalls the first lap", i)
				}
			}
		})
	}
}

func TestRecordAndSnapshot_DoNotAllocate(t *testing.T) {
	r := mustNew(t, 100)
	var i uint32
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		r.Record(i/300, i%3 == 0, i%5 == 0) // crosses generations and laps
		r.Snapshot(i / 300)
	})
	assert.Zero(t, allocs, "Record, Snapshot")
	rule := trip.Rule{FailureRateThreshold: 30, MinimumNumberOfCalls: 10}
	allocs = testing.AllocsPerRun(1000, func() {
		i++
		r.RecordTrip(i/300, i%3 == 0, i%5 == 0, &rule) // trips, closes and reopens with the generations
	})
	assert.Zero(t, allocs, "RecordTrip with a rule")
}

func BenchmarkRecord(b *testing.B) {
	r := mustNew(b, 100)
	b.ReportAllocs()
	var i int
	for b.Loop() {
		i++
		r.Record(1, i%10 == 0, i%7 == 0)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r := mustNew(b, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var i int
		for pb.Next() {
			i++
			r.Record(1, i%10 == 0, i%7 == 0)
		}
	})
}

func BenchmarkSnapshot(b *testing.B) {
	r := mustNew(b, 100)
	r.Record(1, true, false)
	b.ReportAllocs()
	for b.Loop() {
		r.Snapshot(1)
	}
}

// RecordTrip closes the window of a generation in the swap whose counts
// trip the rule: the tripping outcome is the last the window holds, later
// outcomes of the generation are refused as AfterTrip, and a newer generation
// opens a fresh window.
func TestRecordTrip_ClosesWindow(t *testing.T) {
	r := mustNew(t, 4)
	rule := &trip.Rule{FailureCountThreshold: 2}
	c, v := r.RecordTrip(1, false, false, rule)
	require.Equal(t, Recorded, v)
	require.Equal(t, window.Counts{Calls: 1}, c)
	_, v = r.RecordTrip(1, true, false, rule)
	require.Equal(t, Recorded, v)
	c, v = r.RecordTrip(1, true, true, rule)
	require.Equal(t, Tripped, v)
	require.Equal(t, window.Counts{Calls: 3, Failures: 2, SlowCalls: 1, SlowFailures: 1}, c)

	c, v = r.RecordTrip(1, false, false, rule)
	require.Equal(t, AfterTrip, v, "an outcome after the trip of its generation")
	require.Zero(t, c)
	_, ok := r.Record(1, false, false)
	require.False(t, ok, "Record refuses a closed window too")
	got, closed := r.SnapshotClosed(1)
	require.True(t, closed)
	require.Equal(t, window.Counts{Calls: 3, Failures: 2, SlowCalls: 1, SlowFailures: 1}, got, "the window that tripped, unchanged")
	_, v = r.RecordTrip(0, true, false, rule)
	require.Equal(t, Stale, v, "an older generation is stale, closed or not")

	c, v = r.RecordTrip(2, true, false, rule)
	require.Equal(t, Recorded, v, "a newer generation starts an open, empty window")
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, c)
	_, closed = r.SnapshotClosed(2)
	require.False(t, closed)
}

// A nil rule, or one that does not trip, never closes the window.
func TestRecordTrip_NoRuleNeverCloses(t *testing.T) {
	r := mustNew(t, 3)
	for i := range 50 {
		_, v := r.RecordTrip(7, true, true, nil)
		require.Equal(t, Recorded, v, "call %d", i)
		_, v = r.RecordTrip(7, true, true, &trip.Rule{FailureRateThreshold: 100, MinimumNumberOfCalls: 4})
		require.Equal(t, Recorded, v, "a 3-call window never holds 4 calls (call %d)", i)
	}
}

// Under contention exactly one outcome trips a generation, the counts it
// returns are exactly at the threshold, and nothing enters the window
// after it: G goroutines race failures at a failure count of K.
func TestRecordTrip_ExactlyOneTripUnderContention(t *testing.T) {
	const g, k = 16, 37
	rounds := 2000
	if testing.Short() {
		rounds = 200
	}
	old := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(old)
	r := mustNew(t, MaxSize)
	rule := &trip.Rule{FailureCountThreshold: k}
	for round := range rounds {
		gen := uint32(round + 1)
		var tripped, recorded, closedN atomic.Int64
		var tripCounts atomic.Pointer[window.Counts]
		var start, done sync.WaitGroup
		start.Add(1)
		for range g {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				for range 4 {
					c, v := r.RecordTrip(gen, true, false, rule)
					switch v {
					case Tripped:
						tripped.Add(1)
						tripCounts.Store(&c)
					case Recorded:
						recorded.Add(1)
					case AfterTrip:
						closedN.Add(1)
					}
				}
			}()
		}
		start.Done()
		done.Wait()
		require.Equal(t, int64(1), tripped.Load(), "round %d: trips", round)
		require.Equal(t, int64(k-1), recorded.Load(), "round %d: outcomes counted before the trip", round)
		require.Equal(t, int64(g*4-k), closedN.Load(), "round %d: outcomes refused after it", round)
		require.Equal(t, window.Counts{Calls: k, Failures: k}, *tripCounts.Load(), "round %d", round)
		c, closed := r.SnapshotClosed(gen)
		require.True(t, closed, "round %d", round)
		require.Equal(t, window.Counts{Calls: k, Failures: k}, c, "round %d: nothing entered after the trip", round)
	}
}

// Advance moves the ring only forward: to a newer generation with an empty
// window, never back to an older one (a late Advance is harmless), and not
// at all when it already holds the generation.
func TestAdvance_OnlyForward(t *testing.T) {
	r := mustNew(t, 3)
	r.Record(5, true, false)
	r.Advance(5)
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, r.Snapshot(5), "the same generation keeps its window")
	r.Advance(4)
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, r.Snapshot(5), "an older generation changes nothing")
	r.Advance(6)
	require.Zero(t, r.Snapshot(5))
	require.Zero(t, r.Snapshot(6))
	_, ok := r.Record(5, true, false)
	require.False(t, ok, "after the advance, generation 5 is stale")
	// Advanced on every generation, the ring never holds a window 2^16
	// generations old, so the aliased generation 6 + 2^16 starts empty
	// instead of showing generation 6's outcome.
	r.Record(6, true, false)
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, r.Snapshot(6+1<<16), "without advancing, the alias shows it")
	for g := uint32(7); g <= 6+1<<16; g++ {
		r.Advance(g)
	}
	require.Zero(t, r.Snapshot(6+1<<16))
}
