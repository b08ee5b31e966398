package buckets

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// bySecond is s second by second, keyed by the clock's second of the
// width counted from 0 (the oracle's), whatever the sealed window's origin.
func bySecond(s Sealed) map[uint64]window.Counts {
	m := map[uint64]window.Counts{}
	for _, x := range s.secs {
		m[x.sec+uint64(s.origin/s.width)] = x.counts()
	}
	return m
}

// seconds is what the oracle holds of gen at now, second by second.
func (o *oracle) seconds(gen uint32, now time.Duration) map[uint64]window.Counts {
	h := o.current(now)
	m := map[uint64]window.Counts{}
	for _, k := range o.kept {
		if k.gen != gen&genMask || k.sec+o.b <= h {
			continue
		}
		c := m[k.sec]
		add(&c, k.failure, k.slw)
		m[k.sec] = c
	}
	return m
}

// recordAny records through one of the window's entry points, chosen by
// k: Record, RecordCurrent (if current, else Record), RecordTrip, or
// RecordSuccess or RecordFailure where the outcome is theirs.
func recordAny(w *Window, k int, gen uint32, current bool, now time.Duration, failure, slow bool, rule *trip.Rule) bool {
	switch k % 4 {
	case 0:
		return w.Record(gen, now, failure, slow)
	case 1:
		if current {
			return w.RecordCurrent(gen, now, failure, slow)
		}
		return w.Record(gen, now, failure, slow)
	default:
		recorded, _ := recordVia(w, k%4 == 3, gen, now, failure, slow, rule)
		return recorded
	}
}

// requireSealedShut checks what a window reports once Seal has returned:
// every entry point drops every outcome, whatever its generation or
// second (one that would recycle a bucket included), and Snapshot holds
// nothing of gen.
func requireSealedShut(t *testing.T, w *Window, gen uint32, now time.Duration) {
	t.Helper()
	rule := &judgeRules[0]
	b := time.Duration(len(w.ids)) * w.width
	for _, at := range []time.Duration{now, now - w.width, now + w.width, now + b, now + 3*b} {
		for _, g := range []uint32{gen, gen - 1, gen + 1, gen + sealAhead, gen + sealAhead + 1} {
			for k := range 8 {
				f, s := k%2 == 0, k%3 == 0
				require.False(t, recordAny(w, k, g, true, at, f, s, rule), "gen %d at %v, path %d", g, at, k)
				recorded, trips := w.RecordSuccess(g, at, rule)
				require.False(t, recorded || trips)
				recorded, trips = w.RecordFailure(g, at, rule)
				require.False(t, recorded || trips)
			}
		}
	}
	require.Equal(t, window.Counts{}, w.Snapshot(gen, now))
}

// sealFixture records into a window of seconds x width made at from:
// generation 1 into its first B seconds (of the width), then generation 2
// into the B/2+1 after them, each second a few outcomes of every class
// through every entry point, and the oracle alongside. Seconds B/2+1 to
// B-1 then hold generation 1 and the window's newest half generation 2;
// the returned now is the last second's.
func sealFixture(t *testing.T, seconds int, width, from time.Duration) (*Window, *oracle, time.Duration) {
	t.Helper()
	w, err := NewFrom(seconds, width, from)
	require.NoError(t, err)
	b := len(w.ids)
	o := &oracle{b: uint64(b), width: width}
	rule := &trip.Rule{FailureCountThreshold: 1 << 40}
	if b > 100 {
		// Each second's first outcome would sum the window, O(B) loads
		// for each of 1.5 B seconds: minutes under -race.
		rule = nil
	}
	base := from.Truncate(width)
	var now time.Duration
	for j := range b + b/2 + 1 {
		gen := uint32(1)
		if j >= b {
			gen = 2
		}
		now = base + time.Duration(j)*width + width/2
		n := 1 + j%4
		if b > 100 && j%16 != 0 {
			n = 1 // the oracle is quadratic
		}
		for i := range n {
			f, s := outcome(j + i)
			require.Equal(t, o.record(gen, now, f, s), recordAny(w, j+i, gen, gen == 2, now, f, s, rule), "second %d", j)
		}
	}
	return w, o, now
}

// Seal takes each second of its generation inside the window, exactly,
// and nothing else: not another generation's buckets, not the seconds
// that left the window at its reading (at the head, and two widths later),
// at each width and at one, ten and the most buckets a window holds.
// After it, every entry point drops every outcome.
func TestSeal_TakesEachSecondOfItsGeneration(t *testing.T) {
	epoch := 56 * 365 * 24 * time.Hour // a clock counting from the Unix epoch: NewFrom moves the origin
	for _, c := range []struct {
		seconds     int
		width, from time.Duration
	}{
		{1, sec, 0}, {10, sec, 0}, {3600, sec, epoch},
		{1, MinWidth, epoch}, {10, MinWidth, 0}, {360, MinWidth, epoch},
	} {
		for _, later := range []time.Duration{0, 2} {
			t.Run(fmt.Sprintf("%ds/%v/from=%v/later=%d", c.seconds, c.width, c.from, later), func(t *testing.T) {
				w, o, now := sealFixture(t, c.seconds, c.width, c.from)
				now += later * c.width
				want := o.seconds(2, now)
				if c.seconds > 1 || c.width < sec {
					require.NotEmpty(t, want, "the fixture leaves seconds of generation 2 in the window")
				}
				s := w.Seal(2, now)
				assert.Equal(t, want, bySecond(s))
				assert.Equal(t, o.snapshot(2, now), s.Counts())
				assert.Equal(t, o.head, s.head+uint64(s.origin/s.width), "the head Seal read")
				for _, x := range s.secs {
					require.Less(t, s.head-x.sec, uint64(len(w.ids)), "a second outside the window")
				}
				assert.Equal(t, s, w.Seal(2, now), "a second Seal takes the same")
				requireSealedShut(t, w, 2, now)
				w.Advance(2 + sweepEvery + retireAfter) // a sweep retires nothing of a sealed window
				requireSealedShut(t, w, 2, now)
			})
		}
	}
}

// Seed keeps what fits: into a window of the same width, smaller or
// larger, made at another reading of the clock (so, below 1 s, from
// another origin), the seconds of the new window's span, each at the same
// instants of the clock; into one of another width, nothing. The window
// then goes on from there: a reading before the sealed head counts at the
// head, later outcomes add to the kept seconds, older ones are evicted as
// the clock moves on, Clean holds the kept failures, and a generation
// anywhere in the 24-bit range records from the first call.
func TestSeed_KeepsTheSecondsInItsSpan(t *testing.T) {
	epoch := 56 * 365 * 24 * time.Hour
	for _, c := range []struct {
		seconds     int
		width, from time.Duration
	}{
		{10, sec, 0}, {10, sec, epoch}, {1, sec, 0}, {10, MinWidth, epoch}, {360, MinWidth, 0},
	} {
		w, _, now := sealFixture(t, c.seconds, c.width, c.from)
		s := w.Seal(2, now)
		head := s.head + uint64(s.origin/s.width) // on the clock, from 0
		perSec := int(sec / c.width)
		other := sec
		if c.width == sec {
			other = 500 * time.Millisecond
		}
		for _, c2 := range []struct {
			seconds     int
			width, from time.Duration
			gen         uint32
		}{
			{c.seconds, c.width, now, 2},
			{1, c.width, now + 3*time.Hour, 3},
			{max(1, c.seconds/5), c.width, now - 5*time.Hour, 2},
			{min(c.seconds*3, MaxBuckets/perSec), c.width, now + time.Hour, 1<<23 + 5},
			{c.seconds, other, now, 2},
		} {
			t.Run(fmt.Sprintf("%ds/%v/from=%v/into/%ds/%v/from=%v/gen=%d", c.seconds, c.width, c.from, c2.seconds, c2.width, c2.from, c2.gen), func(t *testing.T) {
				n, err := NewFrom(c2.seconds, c2.width, c2.from)
				require.NoError(t, err)
				n.Seed(c2.gen, s, now)
				b := uint64(len(n.ids))
				// want is the new window second by second, on the
				// clock from 0, and at the window at a second.
				want := map[uint64]window.Counts{}
				if c2.width == c.width {
					for sec, k := range bySecond(s) {
						if head-sec < b {
							want[sec] = k
						}
					}
					require.NotEmpty(t, want, "the setup keeps a second")
				}
				at := func(h uint64) (c window.Counts, unclean bool) {
					for sec, k := range want {
						if sec <= h && h-sec < b {
							c = plus(c, k)
							unclean = unclean || k.Failures|k.SlowCalls != 0
						}
					}
					return c, unclean
				}
				h := head
				if c2.width != c.width {
					h = uint64(now / c2.width)
				}
				c, unclean := at(h)
				assert.Equal(t, c, n.Snapshot(c2.gen, now))
				assert.Equal(t, !unclean, n.Clean(now))
				assert.Equal(t, window.Counts{}, n.Snapshot(c2.gen-1, now), "the empty buckets' generation holds nothing")

				// A reading a span before counts at the head.
				require.True(t, n.Record(c2.gen, now-time.Duration(b)*c2.width, true, false))
				k := want[h]
				add(&k, true, false)
				want[h] = k
				c, _ = at(h)
				assert.Equal(t, c, n.Snapshot(c2.gen, now))
				recorded, _ := n.RecordSuccess(c2.gen, now, &judgeRules[0])
				require.True(t, recorded)
				k = want[h]
				add(&k, false, false)
				want[h] = k
				assert.False(t, n.Record(c2.gen-1, now, false, false), "an older generation is stale")

				// Seconds that no kept one held, in the empty buckets of
				// generation gen-1, which gen takes over; the kept ones
				// leave the window one by one.
				step := max(1, b/32)
				for j := uint64(0); j < 2*b; j += step {
					h += step
					next := time.Duration(h)*c2.width + c2.width/3
					require.True(t, n.Record(c2.gen, next, false, true), "second %d", h)
					k = want[h]
					add(&k, false, true)
					want[h] = k
					c, unclean = at(h)
					require.Equal(t, c, n.Snapshot(c2.gen, next), "%d seconds on", j+step)
					require.Equal(t, !unclean, n.Clean(next))
				}
				assert.Zero(t, testing.AllocsPerRun(3, func() { n.Seed(c2.gen, s, now) }), "Seed allocates")
			})
		}
	}
}

// The interleavings that Seal's CASes decide, replayed step by step.

// A writer that validated its bucket before Seal: an increment, or a
// catch-up, that lands before Seal's swap of its counter is taken; one
// after it is dropped, and so is a catch-up that re-checks the id after
// Seal moved it.
func TestSeal_AWriteBeforeTheSwapIsTakenOneAfterItDropped(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, true, false))
	b := w.bucket(3)
	id := b.id.Load()
	_, inc, _ := unpackID(id)
	b.ss.Store(packCount(inc-1, 7)) // not yet reset, as by a recycler paused before ss

	// Seal's steps for this bucket: the flag, the id, the counters.
	require.True(t, w.head.sealed.CompareAndSwap(0, 1))
	held := uint32(1+sealAhead) & genMask
	sealedID := b.seal(1, held)
	require.Equal(t, packID(held, inc, 3), sealedID)
	require.Equal(t, sealedID, b.seal(1, held), "a second sealer leaves it as it is")
	assert.True(t, b.add(id, true, false), "the counter still carries the writer's incarnation")
	assert.True(t, b.addTagged(b.cell(0), id))
	assert.False(t, b.add(id, false, true), "a catch-up re-checks the id, which Seal moved")
	x := b.take(inc)
	assert.Equal(t, window.Counts{Calls: 3, Failures: 2}, x.counts(), "both writes before the swap, not the abandoned 7")
	assert.False(t, b.add(id, true, false), "after the swap")
	assert.False(t, b.addTagged(b.cell(0), id))
	assert.False(t, b.add(id, true, true))
	assert.Equal(t, x, b.take(inc), "nothing landed after the swap; a second sealer takes the same")
}

// A recycler for a newer second found the window not yet sealed and is
// paused before its id CAS while Seal runs: its CAS expects the id Seal
// moved, so it fails, and the bucket's outcomes are Seal's. Were it to
// win, its reset would find the counters already past its incarnation
// and its writers would count where Seal never reads. The same holds for
// a sweep's retire.
func TestSeal_APendingRecycleLoses(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, false, false))
	b := w.bucket(3)
	old := b.id.Load()
	g, inc, s := unpackID(old)

	sealed := w.Seal(1, 13*sec)
	assert.Equal(t, map[uint64]window.Counts{}, bySecond(sealed), "second 3 left the window at 13")
	assert.False(t, b.id.CompareAndSwap(old, packID(1, inc+1, 13)), "the recycle's CAS")
	assert.False(t, b.id.CompareAndSwap(old, packID(g-1, inc+1, s)), "a retire's CAS")
	requireSealedShut(t, w, 1, 13*sec)
}

// A recycler that won its id CAS before Seal and was paused before its
// reset: a writer of its second that caught a counter up is taken, the
// resumed reset stops at the sealed id and moves nothing Seal took, and
// a writer of the abandoned incarnation lands nowhere.
func TestSeal_ARecyclerPausedBeforeItsReset(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, true, true))
	b := w.bucket(3)
	old := b.id.Load()
	_, inc, _ := unpackID(old)
	next := packID(1, inc+1, 13)
	w.advance(13 * sec) // a recycler raises head before its CAS
	require.True(t, b.id.CompareAndSwap(old, next))
	require.True(t, b.add(next, true, false), "a writer of second 13 catches ff up")

	sealed := w.Seal(1, 13*sec)
	assert.Equal(t, map[uint64]window.Counts{13: {Calls: 1, Failures: 1}}, bySecond(sealed))
	b.reset(next)
	assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, b.take(inc+1).counts(), "the resumed reset moved nothing Seal took")
	assert.False(t, b.add(old, true, true), "the abandoned incarnation")
	assert.False(t, b.add(next, false, true))
	requireSealedShut(t, w, 1, 13*sec)
}

// A judge whose sum overlaps Seal may hold part of a window Seal has
// taken, so it decides nothing and reports a trip, for the sealer to judge
// again where the outcomes went: here a second failure, judged after Seal
// took both. Reporting no trip lost the trip a count of 2 owed it (the
// breaker's successor was never asked). The outcome itself is Seal's.
func TestSeal_AJudgeAcrossTheSealIsUndecided(t *testing.T) {
	w := mustNew(t, 10)
	rule := &trip.Rule{FailureCountThreshold: 2}
	recorded, trips := w.RecordTrip(1, 3*sec, true, false, rule)
	require.True(t, recorded)
	require.False(t, trips)
	var sealed Sealed
	testHookJudged = func() {
		testHookJudged = nil
		sealed = w.Seal(1, 3*sec)
	}
	defer func() { testHookJudged = nil }()
	recorded, trips = w.RecordTrip(1, 3*sec+time.Millisecond, true, false, rule)
	assert.True(t, recorded, "recorded before the seal")
	assert.True(t, trips, "judged across it: undecided, the sealer's to judge")
	assert.Equal(t, window.Counts{Calls: 2, Failures: 2}, sealed.Counts())
}

// A late sweep, for a generation a little older than a bucket's, reads
// that bucket's sealed id (its generation + 2^23) as 2^21 to 2^23 behind:
// it must leave it alone, or its reset wipes what Seal has not yet taken.
func TestSeal_ALateSweepLeavesASealedBucket(t *testing.T) {
	w := mustNew(t, 10)
	const gen = sweepEvery + 100 // the sweep for sweepEvery comes late
	require.True(t, w.Record(gen, 3*sec, true, false))
	require.True(t, w.Record(gen, 3*sec, false, false))
	b := w.bucket(3)
	id := b.id.Load()
	_, inc, _ := unpackID(id)

	// Seal's steps for this bucket, with the sweep between the id and the
	// counters.
	require.True(t, w.head.sealed.CompareAndSwap(0, 1))
	sealedID := b.seal(1, uint32(1+sealAhead)&genMask)
	w.Advance(sweepEvery)
	assert.Equal(t, sealedID, b.id.Load(), "the sweep retired a sealed bucket")
	assert.Equal(t, window.Counts{Calls: 2, Failures: 1}, b.take(inc).counts())
}

// sealAndSeed is randomOps' seal: it seals w under gen at now, checks what
// Seal took against o, seeds a new window from it, and returns that window
// with its oracle, generation and width.
func sealAndSeed(t *testing.T, r *rand.Rand, w *Window, o *oracle, gen uint32, now time.Duration) (*Window, *oracle, uint32, time.Duration) {
	t.Helper()
	want := o.seconds(gen, now)
	s := w.Seal(gen, now)
	require.Equal(t, want, bySecond(s), "Seal at %v", now)
	require.False(t, w.Record(gen, now, false, false), "a sealed window")

	width := o.width
	if r.IntN(5) == 0 {
		width = widths[r.IntN(len(widths))]
	}
	perSec := int(sec / width)
	seconds := []int{1, w.Seconds(), 2 * w.Seconds()}[r.IntN(3)]
	seconds = min(seconds, MaxBuckets/perSec)
	next := gen + uint32(r.IntN(2))
	n, err := NewFrom(seconds, width, now)
	require.NoError(t, err)
	n.Seed(next, s, now)

	no := &oracle{b: uint64(len(n.ids)), width: width, empty: (next - 1) & genMask}
	if width == o.width {
		no.head = o.head
		for _, k := range o.kept {
			if k.gen == gen&genMask && k.sec+o.b > o.head && k.sec+no.b > o.head {
				no.kept = append(no.kept, oracleOutcome{next & genMask, k.sec, k.failure, k.slw})
				if k.failure || k.slw {
					no.unclean = append(no.unclean, k.sec)
				}
			}
		}
	} else {
		// Seed's head: the sealed head's first instant, in the new width.
		no.head = uint64(time.Duration(o.head) * o.width / width)
	}
	return n, no, next, width
}

// A window sealed with outcomes in its head second that the rule trips on,
// recorded since the window was seeded (a trip decided and not committed),
// seeds a window whose head still owes that trip once Judge has found it,
// so a breaker's Counts commits it there (SnapshotOwed); without Judge, or
// with a rule that does not trip, the seeded outcomes owe nothing. Sealed
// again, the seeded window passes on only what it owed.
func TestSeal_JudgeKeepsAnOwedTripOwed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  *trip.Rule
		owed  bool
		judge bool
	}{
		{"judged, trips", &trip.Rule{FailureCountThreshold: 2}, true, true},
		{"judged, holds not", &trip.Rule{FailureCountThreshold: 3}, false, true},
		{"not judged", &trip.Rule{FailureCountThreshold: 2}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustNew(t, 10)
			require.True(t, w.Record(1, 3*sec, true, false))
			require.True(t, w.Record(1, 3*sec, true, false))
			seed := func(w *Window) *Window {
				s := w.Seal(1, 3*sec)
				if tc.judge {
					s.Judge(tc.rule)
				}
				n := mustNew(t, 10)
				n.Seed(1, s, 3*sec)
				return n
			}
			n := seed(w)
			c, owed := n.SnapshotOwed(1, 3*sec)
			require.Equal(t, window.Counts{Calls: 2, Failures: 2}, c)
			require.Equal(t, tc.owed, owed)
			_, owed = seed(n).SnapshotOwed(1, 3*sec)
			require.Equal(t, tc.owed, owed, "sealed and seeded again")
		})
	}
}
