package buckets

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

const sec = time.Second

func mustNew(t testing.TB, seconds int) *Window {
	t.Helper()
	w, err := New(seconds)
	require.NoError(t, err)
	return w
}

func TestNew_RejectsSizeOutsideRange(t *testing.T) {
	for _, c := range []struct {
		n     int
		width time.Duration
	}{
		{0, sec}, {-1, sec}, {MaxSeconds + 1, sec}, {math.MinInt, sec}, {math.MaxInt, sec},
		{0, MinWidth}, {MaxBuckets/10 + 1, MinWidth}, {MaxSeconds, MinWidth},
		{MaxBuckets/8 + 1, 125 * time.Millisecond}, {MaxBuckets/2 + 1, 500 * time.Millisecond},
	} {
		w, err := NewWidth(c.n, c.width)
		require.Error(t, err, "size %d at %v", c.n, c.width)
		assert.Nil(t, w)
		assert.True(t, errors.Is(err, ErrSize), "size %d at %v: %v", c.n, c.width, err)
		assert.Contains(t, err.Error(), strconv.Itoa(c.n))
		if c.width == sec {
			w, err = New(c.n)
			assert.Nil(t, w)
			assert.ErrorIs(t, err, ErrSize)
		}
	}
}

// A width is a whole number of milliseconds from 100 ms to 1 s that
// divides 1 s; anything else is ErrWidth, naming it, whatever the size.
func TestNewWidth_RejectsWidthsThatAreNotWholeDivisorsOfASecond(t *testing.T) {
	for _, width := range []time.Duration{0, -sec, math.MinInt64, math.MaxInt64, MinWidth - time.Millisecond,
		sec + time.Millisecond, 2 * sec, 150 * time.Millisecond, 300 * time.Millisecond,
		MinWidth + time.Nanosecond, 125*time.Millisecond + time.Microsecond, 999 * time.Millisecond} {
		require.False(t, ValidWidth(width), "%v", width)
		for _, n := range []int{1, 0} {
			w, err := NewWidth(n, width)
			assert.Nil(t, w)
			require.ErrorIs(t, err, ErrWidth, "%v", width)
			assert.Contains(t, err.Error(), width.String())
		}
	}
	for _, width := range widths {
		require.True(t, ValidWidth(width), "%v", width)
	}
}

func TestNew_AcceptsSizeInRange(t *testing.T) {
	for _, n := range []int{1, 2, 600, MaxSeconds} {
		w, err := New(n)
		require.NoError(t, err)
		assert.Equal(t, n, w.Seconds())
		assert.Equal(t, sec, w.Width())
		assert.Equal(t, window.Counts{}, w.Snapshot(0, 0))
	}
	for _, width := range widths {
		perSec := int(sec / width)
		for _, n := range []int{1, 2, MaxBuckets / perSec} {
			w, err := NewWidth(n, width)
			require.NoError(t, err)
			assert.Equal(t, n, w.Seconds())
			assert.Equal(t, width, w.Width())
			assert.Len(t, w.ids, n*perSec, "%d s at %v", n, width)
			assert.Equal(t, window.Counts{}, w.Snapshot(0, 0))
		}
	}
}

func TestZeroWindow_HoldsNothing(t *testing.T) {
	var w Window
	assert.Equal(t, 0, w.Seconds())
	assert.False(t, w.Record(0, sec, true, true))
	for _, now := range []time.Duration{-sec, 0, sec} {
		for _, fast := range []bool{true, false} {
			recorded, trips := w.RecordSuccess(0, now, &judgeRules[0])
			if !fast {
				recorded, trips = w.RecordFailure(0, now, &judgeRules[0])
			}
			assert.False(t, recorded || trips)
		}
	}
	assert.Equal(t, window.Counts{}, w.Snapshot(0, sec))
	assert.Equal(t, Sealed{}, w.Seal(0, sec), "nothing to seal")
	w.Seed(1, Sealed{}, sec)
	assert.Equal(t, window.Counts{}, w.Snapshot(1, sec))
}

// The layout the doc comments promise: packed fields round-trip, a bucket
// is four aligned words beside its id, head sits alone on a cache line at the start of
// Window (where the allocator 64-bit aligns it, also on 386), and seq has
// the next line to itself.
func TestLayout(t *testing.T) {
	assert.Equal(t, uintptr(32), unsafe.Sizeof(counters{}))
	assert.Equal(t, uintptr(cacheLine), unsafe.Sizeof(paddedSeq{}))
	assert.Equal(t, uintptr(cacheLine), unsafe.Sizeof(paddedHead{}))
	assert.Equal(t, uintptr(0), unsafe.Offsetof(Window{}.head))
	assert.Equal(t, uintptr(0), unsafe.Offsetof(paddedHead{}.second))
	assert.Equal(t, uintptr(cacheLine), unsafe.Offsetof(Window{}.seq))
	// A whole number of lines, so every Window New returns starts on one
	// and head's line is its own.
	assert.Zero(t, unsafe.Sizeof(Window{})%cacheLine)
	// On 32-bit platforms the allocator gives no such placement; lines are
	// a 64-bit platform's concern (as for atomicring.Ring).
	var keep []*Window
	for i := range 64 * int(unsafe.Sizeof(uintptr(0))/8) {
		w := mustNew(t, 1+i)
		keep = append(keep, w)
		require.Zero(t, uintptr(unsafe.Pointer(&w.head))%cacheLine, "Window %d: head is off a line", i)
	}
	runtime.KeepAlive(keep) // every object stays allocated, so none is placed where another was
	assert.Equal(t, uintptr(8), unsafe.Offsetof(paddedHead{}.lastUnclean))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(paddedHead{}.swept))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(paddedHead{}.slot))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(paddedHead{}.full))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(paddedHead{}.others))
	assert.Equal(t, uintptr(48), unsafe.Offsetof(paddedHead{}.sealed))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(paddedSeq{}.cache), "the cache fills seq's line")

	for _, c := range []struct {
		gen uint32
		inc uint8
		sec uint64
	}{{0, 0, 0}, {genMask, 255, maxSec}, {1, 2, 3}, {genMask, 0, 0}, {0, 255, 0}, {0, 0, maxSec}} {
		g, i, s := unpackID(packID(c.gen, c.inc, c.sec))
		assert.Equal(t, c.gen, g)
		assert.Equal(t, c.inc, i)
		assert.Equal(t, c.sec, s)
	}
	for _, c := range []struct {
		tag   uint8
		count uint64
	}{{0, 0}, {255, countMask}, {7, 12345}} {
		tag, count := unpackCount(packCount(c.tag, c.count))
		assert.Equal(t, c.tag, tag)
		assert.Equal(t, c.count, count)
	}
}

func TestNewerGen_WrapsAround(t *testing.T) {
	assert.True(t, newerGen(1, 0))
	assert.False(t, newerGen(0, 1))
	assert.False(t, newerGen(5, 5))
	assert.True(t, newerGen(0, genMask), "0 follows 2^24-1")
	assert.True(t, newerGen(3, genMask-2))
	assert.True(t, newerGen(1<<23-1, 0), "the horizon: 2^23-1 ahead")
	assert.False(t, newerGen(1<<23, 0), "2^23 ahead is read as behind")
	assert.False(t, newerGen(0, 1<<23-1))
}

func TestOlderInc_HorizonIs127Recycles(t *testing.T) {
	for _, base := range []uint8{0, 1, 128, 200, 255} {
		assert.False(t, olderInc(base, base))
		assert.True(t, olderInc(base, base+1))
		assert.True(t, olderInc(base, base+127))
		assert.False(t, olderInc(base, base+128))
		assert.False(t, olderInc(base+1, base), "newer is not older")
	}
}

func TestTick_NegativeAndHugeReadings(t *testing.T) {
	for _, width := range widths {
		w, err := NewWidth(10, width)
		require.NoError(t, err)
		assert.Equal(t, uint64(0), w.tick(-1))
		assert.Equal(t, uint64(0), w.tick(math.MinInt64))
		assert.Equal(t, uint64(0), w.tick(width-1))
		assert.Equal(t, uint64(1), w.tick(width))
		assert.Equal(t, uint64(maxSec), w.tick(math.MaxInt64))
		assert.Equal(t, uint64(maxSec), w.tick(time.Duration(maxSec)*width+width-1), "%v: the last reading of the last second", width)
		assert.Equal(t, uint64(maxSec-1), w.tick(time.Duration(maxSec)*width-1))

		span := 10 * sec
		require.True(t, w.Record(1, -5*sec, false, false), "%v: a negative reading is second 0", width)
		assert.Equal(t, uint64(1), w.Snapshot(1, span-width).Calls)
		assert.Equal(t, uint64(0), w.Snapshot(1, span).Calls)
		require.True(t, w.Record(1, math.MaxInt64, true, false))
		assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(1, math.MaxInt64))
	}
	var zero Window
	assert.Equal(t, uint64(0), zero.tick(math.MaxInt64))
}

// NewFrom counts seconds from an origin a whole second at least 2^30
// widths before its reading (0 when the reading is nearer 0), so a window
// whose clock reads far past 2^32 widths (a base at the Unix epoch, 56
// years back, at 100 ms) slides as one made by NewWidth does near 0: an
// outcome counts until the end of its bucket's window, to the nanosecond,
// and buckets start at multiples of the width of the clock itself. A
// reading at or below the origin is in the origin's second.
func TestNewFrom_CountsFromAnOrigin(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, width := range widths {
		back := time.Duration(originBack) * width
		for _, from := range []time.Duration{math.MinInt64, -1, 0, back, back + sec - 1, back + sec, 56 * year, 1 << 61, math.MaxInt64 - 11*year} {
			w, err := NewFrom(10, width, from)
			require.NoError(t, err)
			o := w.origin
			require.Zero(t, o%sec, "%v from %v: origin %v is no whole second", width, from, o)
			if from <= back {
				require.Zero(t, o, "%v from %v", width, from)
			} else {
				require.LessOrEqual(t, o, from-back, "%v from %v", width, from)
				require.Greater(t, o, from-back-sec, "%v from %v", width, from)
			}
			require.Equal(t, uint64(0), w.tick(o), "%v from %v", width, from)
			require.Equal(t, uint64(0), w.tick(math.MinInt64))
			require.Equal(t, uint64(1), w.tick(o+width))
			if o > 0 {
				require.Equal(t, uint64(0), w.tick(o-sec), "%v from %v: below the origin", width, from)
			}
			if span := time.Duration(maxSec) * width; o <= math.MaxInt64-span {
				require.Equal(t, uint64(maxSec-1), w.tick(o+span-1), "%v from %v", width, from)
				require.Equal(t, uint64(maxSec), w.tick(o+span), "%v from %v: saturated", width, from)
			}
			if from > 0 && from < math.MaxInt64-11*year {
				// Ten years after from: still exact at every width.
				for _, t0 := range []time.Duration{from, from + 7*width/3, from + 10*year} {
					w, err := NewFrom(10, width, from)
					require.NoError(t, err)
					require.True(t, w.Record(1, t0, true, false))
					end := t0/width*width + 10*sec // t0's bucket's window ends
					require.Equal(t, uint64(1), w.Snapshot(1, end-1).Failures, "%v from %v, at %v", width, from, t0)
					require.Equal(t, uint64(0), w.Snapshot(1, end).Failures, "%v from %v, at %v", width, from, t0)
				}
			}
		}
	}
}

// tick is floor(now / width), the division Go computes, for every width
// and every reading a Duration can hold: around each multiple of the
// width, at random, and at the top of the range where the multiplier's
// rounding error is largest.
func TestTick_IsTheQuotient(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 5))
	for _, width := range widths {
		m, shift := divisor(uint64(width))
		quot := func(now time.Duration) uint64 {
			hi, _ := bits.Mul64(uint64(now), m)
			return hi >> shift
		}
		check := func(now time.Duration) {
			t.Helper()
			if now < 0 {
				return
			}
			require.Equal(t, uint64(now/width), quot(now), "%v / %v", now, width)
		}
		for _, k := range []int64{0, 1, 2, 9, 10, 1 << 20, 1 << 32, math.MaxInt64 / int64(width)} {
			for _, d := range []time.Duration{-1, 0, 1} {
				check(time.Duration(k)*width + d)
			}
		}
		for range 100_000 {
			check(time.Duration(r.Int64()))
			check(time.Duration(r.Int64N(1<<40)) * width)
			check(time.Duration(r.Int64N(1<<40))*width - 1)
			check(math.MaxInt64 - time.Duration(r.Int64N(1<<40)))
		}
		check(math.MaxInt64)
	}
}

// S2 (scenarios.md): a 10-minute window, failures at minutes 0, 6 and 12:
// at minute 12 the minute-0 failure is 12 minutes old and gone.
func TestScenarioS2_WindowSlides(t *testing.T) {
	const minute = 60 * sec
	w := mustNew(t, 600)
	for _, m := range []time.Duration{0, 6, 12} {
		require.True(t, w.Record(1, m*minute, true, false))
	}
	assert.Equal(t, window.Counts{Calls: 2, Failures: 2}, w.Snapshot(1, 12*minute))

	w = mustNew(t, 600)
	for _, m := range []time.Duration{0, 1, 2} {
		require.True(t, w.Record(1, m*minute, true, false))
	}
	assert.Equal(t, uint64(3), w.Snapshot(1, 2*minute).Failures)

	w = mustNew(t, 600)
	require.True(t, w.Record(1, 0, true, false))
	assert.Equal(t, uint64(1), w.Snapshot(1, 10*minute-time.Nanosecond).Failures)
	assert.Equal(t, uint64(0), w.Snapshot(1, 10*minute).Failures, "now - t = window: out")
}

// R2 in buckets of the width: an outcome at t belongs to bucket
// floor(t/width), which is in the window while floor(now/width) -
// floor(t/width) < B, the window's seconds x (1 s / width).
func TestBoundary_CountedWhileSecondInWindow(t *testing.T) {
	for _, width := range []time.Duration{sec, MinWidth, 250 * time.Millisecond} {
		for _, b := range []int{1, 2, 10, 300} {
			for _, t0 := range []time.Duration{0, 5 * sec, 5*sec + 700*time.Millisecond, 5*sec + 730*time.Millisecond, 1e6 * sec} {
				t.Run(fmt.Sprintf("width=%v/B=%d/t=%v", width, b, t0), func(t *testing.T) {
					w, err := NewWidth(b, width)
					require.NoError(t, err)
					require.True(t, w.Record(1, t0, true, true))
					last := t0.Truncate(width) + time.Duration(b)*sec - time.Nanosecond
					one := window.Counts{Calls: 1, Failures: 1, SlowCalls: 1, SlowFailures: 1}
					assert.Equal(t, one, w.Snapshot(1, t0))
					assert.Equal(t, one, w.Snapshot(1, last))
					assert.Equal(t, window.Counts{}, w.Snapshot(1, last+time.Nanosecond))
				})
			}
		}
	}
}

// The idle-gap bug class: after an idle gap longer than the window, the
// old buckets must not come back, including when the jump lands on the
// same bucket index (a multiple of B) where only the second tells old from
// new.
func TestIdleGap_NothingResurrected(t *testing.T) {
	for _, b := range []int{1, 3, 10} {
		for _, jump := range []int{5 * b, 5*b + 1, b, b + 1, 2 * b} {
			t.Run(fmt.Sprintf("B=%d/jump=%d", b, jump), func(t *testing.T) {
				w := mustNew(t, b)
				for s := range b {
					for range 3 {
						require.True(t, w.Record(1, time.Duration(s)*sec, true, true))
					}
				}
				require.Equal(t, uint64(3*b), w.Snapshot(1, time.Duration(b-1)*sec).Calls)

				at := time.Duration(b-1+jump) * sec
				assert.Equal(t, window.Counts{}, w.Snapshot(1, at))
				require.True(t, w.Record(1, at, false, true))
				for s := range b {
					assert.Equal(t, window.Counts{Calls: 1, SlowCalls: 1}, w.Snapshot(1, at+time.Duration(s)*sec), "%d s later", s)
				}
				assert.Equal(t, window.Counts{}, w.Snapshot(1, at+time.Duration(b)*sec))
			})
		}
	}
}

// R14: an outcome reported with an earlier time than the window has seen
// counts in the newest second seen, and reading at an earlier time reads
// the window at that newest second; nothing evicted comes back.
func TestClockBackwards_CountsAtHead(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 45*sec, true, false)) // evicted by second 100
	require.True(t, w.Record(1, 100*sec, false, false))
	require.True(t, w.Record(1, 50*sec, true, true))
	want := window.Counts{Calls: 2, Failures: 1, SlowCalls: 1, SlowFailures: 1}
	assert.Equal(t, want, w.Snapshot(1, 100*sec))
	assert.Equal(t, want, w.Snapshot(1, 50*sec))
	assert.Equal(t, want, w.Snapshot(1, 0))
	assert.Equal(t, want, w.Snapshot(1, 109*sec), "the second-50 outcome lives in second 100")
	assert.Equal(t, window.Counts{}, w.Snapshot(1, 110*sec))
}

func TestGenerations_NewerStartsEmptyOlderIsDropped(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 0, true, false))
	require.True(t, w.Record(1, 1*sec, true, false))
	assert.Equal(t, uint64(2), w.Snapshot(1, 1*sec).Calls)

	assert.Equal(t, window.Counts{}, w.Snapshot(2, 1*sec), "a newer generation starts empty")
	require.True(t, w.Record(2, 1*sec, false, false))
	assert.Equal(t, window.Counts{Calls: 1}, w.Snapshot(2, 1*sec))

	assert.False(t, w.Record(1, 1*sec, true, false), "gen 1 is older than the bucket's gen 2")
	assert.Equal(t, window.Counts{Calls: 1}, w.Snapshot(2, 1*sec))
	assert.Equal(t, uint64(1), w.Snapshot(1, 1*sec).Calls, "gen 2 took over second 1's bucket")
}

// The 24-bit generation wraps: across 2^24-1 -> 0 the order still holds,
// and only the low 24 bits of gen matter. B=1 puts every step in the same
// bucket, so each generation is compared with its predecessor (see
// TestGenerations_HorizonIs2To23 for a bucket left behind).
func TestGenerations_WrapAround(t *testing.T) {
	w := mustNew(t, 1)
	at := time.Duration(0)
	gens := []uint32{0, 1 << 22, 1 << 23, 3 << 22, genMask, 0, 2}
	for i, g := range gens {
		at += sec
		require.True(t, w.Record(g, at, true, false), "gen %#x", g)
		assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(g, at), "gen %#x", g)
		if i > 0 {
			assert.False(t, w.Record(gens[i-1], at, false, false), "gen %#x is older than %#x", gens[i-1], g)
		}
	}
	assert.True(t, w.Record(2|1<<24, at, false, false), "bits above 24 are ignored")
	assert.Equal(t, uint64(2), w.Snapshot(2|3<<30, at).Calls)
}

// The documented bound of the 24-bit generation: a bucket nobody wrote to
// while the generation advanced by 2^23 holds a generation that now looks
// newer, and drops its second's outcomes until the wrapping generation
// reaches it again. Buckets written in between keep working.
func TestGenerations_HorizonIs2To23(t *testing.T) {
	w := mustNew(t, 2)
	require.True(t, w.Record(0, 0, false, false))         // bucket 0: gen 0
	require.True(t, w.Record(1<<22, 1*sec, false, false)) // bucket 1: gen 2^22
	require.True(t, w.Record(1<<23, 3*sec, false, false), "bucket 1 was written 2^22 generations ago")
	assert.False(t, w.Record(1<<23, 4*sec, false, false), "bucket 0's gen 0 is 2^23 back: looks newer")
	assert.False(t, w.Record(genMask, 6*sec, false, false), "and still does one generation before the wrap")
	assert.True(t, w.Record(1<<24, 8*sec, false, false), "gen 2^24 is gen 0 again")
}

// Without Advance, a bucket left 2^24 generations behind reads as the
// current generation's: its outcomes count again. With every generation
// reported to Advance, the sweeps have retired it long before, and a bucket
// 2^23 behind never needs RecordCurrent either.
func TestAdvance_NoBucketAliasesAcross2To24(t *testing.T) {
	const g0 = 5
	for _, advance := range []bool{false, true} {
		w := mustNew(t, 3)
		require.True(t, w.Record(g0, 0, true, false))    // bucket 0: a failure of g0
		require.True(t, w.Record(g0, sec, false, false)) // bucket 1: a success of g0
		if advance {
			for g := uint32(g0 + 1); g <= g0+1<<24; g++ {
				w.Advance(g)
			}
		}
		later := uint32(g0 + 1<<24) // equal to g0 in 24 bits
		if !advance {
			assert.Equal(t, window.Counts{Calls: 2, Failures: 1}, w.Snapshot(later, sec), "the documented alias without Advance")
			continue
		}
		assert.Equal(t, window.Counts{}, w.Snapshot(later, sec), "a bucket of 2^24 generations ago counted as current")
		require.True(t, w.Record(later, sec, false, false))
		assert.Equal(t, window.Counts{Calls: 1}, w.Snapshot(later, sec))
	}
	// 2^23 behind: with Advance, Record of the current generation lands
	// without RecordCurrent.
	w := mustNew(t, 2)
	require.True(t, w.Record(0, 0, false, false))
	for g := uint32(1); g <= 1<<23; g++ {
		w.Advance(g)
	}
	assert.True(t, w.Record(1<<23, 2*sec, false, false), "bucket 0's gen 0, 2^23 back, was retired")
}

// Advance sweeps at the first generation 2^22 past the last sweep, not
// before, and not for a late call of an older generation; it retires a
// bucket 2^21 behind and leaves one 2^21-1 behind as it is. A sweep that
// comes 2^21-1 generations late still retires every bucket.
func TestAdvance_SweepBoundaries(t *testing.T) {
	w := mustNew(t, 3)
	require.True(t, w.Record(sweepEvery-retireAfter, 0, true, false))     // bucket 0: 2^21 behind the first sweep
	require.True(t, w.Record(sweepEvery-retireAfter+1, sec, true, false)) // bucket 1: 2^21-1 behind it
	w.Advance(sweepEvery - 1)
	assert.Zero(t, w.head.swept.Load(), "no sweep before 2^22")
	w.Advance(sweepEvery)
	assert.Equal(t, uint64(sweepEvery), w.head.swept.Load())
	g, _, _ := unpackID(w.ids[0].Load())
	assert.Equal(t, uint32(sweepEvery-1), g, "bucket 0 retired to the generation before the sweep's")
	assert.Equal(t, window.Counts{}, w.Snapshot(sweepEvery-retireAfter, sec))
	assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(sweepEvery-retireAfter+1, sec), "bucket 1 is not 2^21 behind")
	w.Advance(2)                // a late report of a generation long passed
	w.Advance(2*sweepEvery - 1) // not 2^22 past the last sweep
	assert.Equal(t, uint64(sweepEvery), w.head.swept.Load())
	// The next sweep, as late as the margin allows: bucket 1 is then
	// 2^23-2 behind, bucket 0's retired generation 2^22+2^21-1.
	late := uint32(2*sweepEvery + retireAfter - 1)
	w.Advance(late)
	for i := range 2 {
		g, _, _ := unpackID(w.ids[i].Load())
		assert.Equal(t, late-1, g, "bucket %d", i)
	}
	assert.Equal(t, window.Counts{}, w.Snapshot(sweepEvery-retireAfter+1, sec))
	// The zero window sweeps nothing and does not panic.
	var z Window
	z.Advance(sweepEvery)
}

// The interleaving cep21/circuit's lock-free roll lost, played step by
// step: a recycler wins the id CAS for a new second but has not reset the
// counters yet when a writer of that second arrives. The writer moves the
// counters itself; the late reset must not wipe its outcome. A writer that
// validated the old incarnation lands nowhere once the counters moved on.
func TestRecycle_WriterAheadOfResetIsKept(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, true, true))
	b := w.bucket(3)
	oldID := b.id.Load()
	_, oldInc, _ := unpackID(oldID)

	// The recycler's CAS for second 13, paused before its reset.
	newID := packID(1, oldInc+1, 13)
	require.True(t, b.id.CompareAndSwap(oldID, newID))

	// A writer that validated the old incarnation before the recycle: the
	// counters still carry its tag, so it lands there, where nobody reads.
	assert.True(t, b.add(oldID, true, false))

	// A writer of second 13 overtakes the recycler.
	require.True(t, w.Record(1, 13*sec, true, false))
	assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(1, 13*sec))

	b.reset(newID) // the recycler resumes
	assert.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(1, 13*sec), "the late reset kept the write")

	assert.False(t, b.add(oldID, true, false), "the old incarnation is gone")
	require.True(t, w.Record(1, 13*sec, false, true))
	assert.Equal(t, window.Counts{Calls: 2, Failures: 1, SlowCalls: 1}, w.Snapshot(1, 13*sec))
}

// A writer that validated its bucket and then slept through 200 recycles
// of it finds n tagged 201, which mod 256 reads as older than its own
// incarnation 1. Without the id re-check it would "catch n up" to
// incarnation 1, which the live incarnation 201 then reads as newer: every
// later outcome of that bucket would be dropped
// (TestStress_GenerationChangesUnderLoad reaches it under load). With it,
// the sleeper drops its own outcome and touches nothing.
func TestStaleWriter_CannotWedgeBucket(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, false, false))
	b := w.bucket(3)
	stale := b.id.Load()
	for k := 1; k <= 200; k++ {
		require.True(t, w.Record(1, time.Duration(3+10*k)*sec, false, false))
	}
	now := 2003 * sec
	_, live, _ := unpackID(b.id.Load())
	_, inc, _ := unpackID(stale)
	require.True(t, olderInc(live, inc), "the setup needs a live tag that looks older")

	assert.False(t, b.add(stale, true, true))
	require.True(t, w.Record(1, now, true, false))
	assert.Equal(t, window.Counts{Calls: 2, Failures: 1}, w.Snapshot(1, now))
}

// The same hazard for a recycler: it won the id CAS for second 13 and was
// paused before its reset while the bucket was recycled 200 more times.
// Resuming, it must not move counters of the live incarnation back to its
// own.
func TestPausedRecycler_ResetStopsOnceRecycledAgain(t *testing.T) {
	w := mustNew(t, 10)
	require.True(t, w.Record(1, 3*sec, false, false))
	b := w.bucket(3)
	_, inc, _ := unpackID(b.id.Load())
	paused := packID(1, inc+1, 13)
	require.True(t, b.id.CompareAndSwap(b.id.Load(), paused))
	for k := 2; k <= 201; k++ {
		require.True(t, w.Record(1, time.Duration(3+10*k)*sec, true, true))
	}
	now := 2013 * sec
	one := window.Counts{Calls: 1, Failures: 1, SlowCalls: 1, SlowFailures: 1}
	require.Equal(t, one, w.Snapshot(1, now))

	b.reset(paused)
	assert.Equal(t, one, w.Snapshot(1, now))
	require.True(t, w.Record(1, now, false, false))
	assert.Equal(t, window.Counts{Calls: 2, Failures: 1, SlowCalls: 1, SlowFailures: 1}, w.Snapshot(1, now))
}

// A writer that finds its class counter already in a newer incarnation
// reports the outcome dropped: its bucket was recycled under it. Each
// outcome lands in one counter, so nothing of it stays behind, and the
// counts are sums of the classes.
func TestAdd_OneCounterPerOutcome(t *testing.T) {
	var id atomic.Uint64
	b := bucket{id: &id, counters: new(counters)}
	b.ff.Store(packCount(1, 0))
	assert.False(t, b.add(0, true, false))
	assert.Equal(t, window.Counts{}, b.read(0), "a dropped outcome leaves nothing")
	assert.True(t, b.add(0, false, true))
	assert.True(t, b.add(0, true, true))
	assert.True(t, b.add(0, true, true))
	assert.Equal(t, window.Counts{Calls: 3, Failures: 2, SlowCalls: 3, SlowFailures: 2}, b.read(0))
	assert.Equal(t, window.Counts{}, b.read(1))
}

// oracle is the naive model of the window: the list of every outcome kept,
// filtered at read time per R2, with the max-seen-second rule of R14.
type oracle struct {
	b     uint64 // buckets
	width time.Duration
	head  uint64
	kept  []oracleOutcome
	// unclean lists the second of every failure or slow call offered, kept or
	// not: what Clean answers for.
	unclean []uint64
	// empty is the generation every slot starts with, at second 0: 0 in a
	// new window, gen-1 in one Seed made for gen.
	empty uint32
}

type oracleOutcome struct {
	gen          uint32
	sec          uint64
	failure, slw bool
}

func (o *oracle) current(now time.Duration) uint64 {
	s := uint64(0)
	if now > 0 {
		s = uint64(now.Truncate(o.width) / o.width)
	}
	o.head = max(o.head, s)
	return o.head
}

// genAfter: a is newer than b in 24-bit serial arithmetic, written
// independently of newerGen: shifting the difference into the top of an
// int32 makes "newer" its sign.
func genAfter(a, b uint32) bool { return int32((a-b)<<8) > 0 }

// record keeps the outcome unless its slot (second mod B) already holds a
// newer (generation, second): one kept earlier, or the (empty, 0) every
// slot of a fresh window starts with.
func (o *oracle) record(gen uint32, now time.Duration, failure, slow bool) bool {
	s := o.current(now)
	if failure || slow {
		o.unclean = append(o.unclean, s)
	}
	newer := func(g uint32, gs uint64) bool { return genAfter(g, gen) || (g == gen && gs > s) }
	if newer(o.empty, 0) {
		return false
	}
	for _, k := range o.kept {
		if k.sec%o.b == s%o.b && newer(k.gen, k.sec) {
			return false
		}
	}
	o.kept = append(o.kept, oracleOutcome{gen & (1<<24 - 1), s, failure, slow})
	return true
}

// clean: no failure or slow call offered in a second the window covers.
func (o *oracle) clean() bool {
	for _, b := range o.unclean {
		if b+o.b > o.head {
			return false
		}
	}
	return true
}

func (o *oracle) snapshot(gen uint32, now time.Duration) window.Counts {
	s := o.current(now)
	var c window.Counts
	for _, k := range o.kept {
		if k.gen != gen || k.sec+o.b <= s {
			continue
		}
		c.Calls++
		if k.failure {
			c.Failures++
		}
		if k.slw {
			c.SlowCalls++
		}
		if k.failure && k.slw {
			c.SlowFailures++
		}
	}
	return c
}

// The window matches the naive oracle on random operation sequences: small
// forward steps, idle gaps of B, B+1, 2B and 10^6 seconds, zero and
// backward steps, newer generations and late outcomes of older ones. The
// snapshot under the newest generation is compared after every operation.
// Every width runs, each with its share of the sizes and rules.
func TestRandomOps_MatchOracle(t *testing.T) {
	ops := 3000
	if testing.Short() {
		ops = 600
	}
	// Clocks that start at 0, at the Unix epoch's distance and at 2^61 ns
	// (73 years): past 2^32 widths, where only NewFrom's origin keeps the
	// narrow widths sliding.
	starts := []time.Duration{0, 56 * 365 * 24 * time.Hour, 1 << 61}
	n := 0
	for _, b := range []int{1, 2, 3, 7, 60} {
		for ri := range judgeRules {
			width, from := widths[n%len(widths)], starts[n%len(starts)]
			n++
			t.Run(fmt.Sprintf("B=%d/rule=%d/width=%v/from=%v", b, ri, width, from), func(t *testing.T) {
				randomOps(t, b, width, from, &judgeRules[ri], ops, false)
			})
			if ri%3 == n%3 {
				t.Run(fmt.Sprintf("sealed/B=%d/rule=%d/width=%v/from=%v", b, ri, width, from), func(t *testing.T) {
					randomOps(t, b, width, from, &judgeRules[ri], ops, true)
				})
			}
		}
	}
}

// widths are the bucket widths NewWidth accepts.
var widths = []time.Duration{sec, 100 * time.Millisecond, 125 * time.Millisecond, 200 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond}

// randomOps is one run of TestRandomOps_MatchOracle: a window of b seconds
// in buckets of width, made by NewFrom at the clock's first reading from,
// whose outcomes are judged with rule (a window is judged with one rule
// for its whole life, as a breaker does). The oracle buckets readings by
// width from 0. With seal, about one op in 40 seals the window, checks
// what Seal took against the oracle's seconds, and goes on with a new
// window that Seed made from it: of 1, b or 2b seconds, mostly of the same
// width, made at that reading (another origin), under the same generation
// or the next; the oracle keeps what the new window's span holds.
func randomOps(t *testing.T, b int, width, from time.Duration, rule *trip.Rule, ops int, seal bool) {
	{
		{
			r := rand.New(rand.NewPCG(uint64(b), 2026))
			w, err := NewFrom(b, width, from)
			require.NoError(t, err)
			o := &oracle{b: uint64(len(w.ids)), width: width}
			gen := uint32(1)
			now := from
			for i := range ops {
				var desc string
				if seal && r.IntN(40) == 0 {
					w, o, gen, width = sealAndSeed(t, r, w, o, gen, now)
					desc = "seal"
				}
				switch p := r.IntN(100); {
				case p < 45:
					// Up to one and a half buckets.
					now += time.Duration(r.Int64N(int64(width + width/2)))
					desc = "step"
				case p < 55:
					desc = "same time"
				case p < 62:
					gaps := []time.Duration{time.Duration(b), time.Duration(b + 1), time.Duration(2 * b), 1e6}
					now += gaps[r.IntN(len(gaps))]*sec + time.Duration(r.Int64N(int64(sec)))
					desc = "idle gap"
				case p < 75:
					now -= time.Duration(r.Int64N(int64(3 * time.Duration(b) * sec)))
					desc = "backwards"
				case p < 80:
					gen++
					desc = "newer gen"
				default:
					old := gen - 1 - uint32(r.IntN(3))
					f, s := r.IntN(2) == 0, r.IntN(2) == 0
					require.Equal(t, o.record(old, now, f, s), w.Record(old, now, f, s), "op %d: stale gen %d at %v", i, old, now)
					desc = "stale gen"
				}
				// A burst of outcomes in one second, mostly successes, so that
				// judgements have slack to hand out; Trips must then agree
				// with the rule on the oracle's window after every record.
				burst, failPct := 1, 33
				if r.IntN(4) == 0 {
					burst, failPct = 1+r.IntN(40), r.IntN(60)
				}
				for k := 0; k < burst && r.IntN(4) != 0; k++ {
					f, s := r.IntN(100) < failPct, r.IntN(100) < failPct/2
					ok := o.record(gen, now, f, s)
					got, trips := recordVia(w, r.IntN(2) == 0, gen, now, f, s, rule)
					require.Equal(t, ok, got, "op %d (%s) at %v", i, desc, now)
					require.Equal(t, ok && rule.Trips(o.snapshot(gen, now)), trips,
						"op %d (%s) at %v: RecordTrip's judgement, rule %+v, window %+v", i, desc, now, *rule, o.snapshot(gen, now))
				}
				require.Equal(t, o.snapshot(gen, now), w.Snapshot(gen, now), "op %d (%s) at %v", i, desc, now)
				clean := w.Clean(now)
				require.Equal(t, o.clean(), clean, "op %d (%s) at %v: Clean", i, desc, now)
				if clean {
					c := w.Snapshot(gen, now)
					require.Zero(t, c.Failures|c.SlowCalls, "op %d: a clean window holds a failure or a slow call", i)
				}
			}
		}
	}
}

// recordVia is RecordTrip, or with fast set, for a fast success or a plain
// failure, RecordSuccess or RecordFailure, the breaker's paths for them:
// each must leave the same window and give the same judgement.
func recordVia(w *Window, fast bool, gen uint32, now time.Duration, failure, slow bool, rule *trip.Rule) (recorded, trips bool) {
	switch {
	case fast && !failure && !slow:
		return w.RecordSuccess(gen, now, rule)
	case fast && failure && !slow:
		return w.RecordFailure(gen, now, rule)
	}
	return w.RecordTrip(gen, now, failure, slow, rule)
}

// judgeRules are the trip rules TestRandomOps_MatchOracle judges with:
// each threshold kind alone and mixed, minimums below, at and above what a
// burst brings, and the count threshold with and without the minimum.
var judgeRules = []trip.Rule{
	{FailureRateThreshold: 50, MinimumNumberOfCalls: 5},
	{FailureRateThreshold: 20, MinimumNumberOfCalls: 1},
	{FailureRateThreshold: 90, MinimumNumberOfCalls: 30},
	{FailureCountThreshold: 4},
	{FailureCountThreshold: 6, MinimumNumberOfCalls: 10, MinimumAppliesToCount: true},
	{SlowCallRateThreshold: 30, MinimumNumberOfCalls: 3},
	{FailureRateThreshold: 40, SlowCallRateThreshold: 60, FailureCountThreshold: 12, MinimumNumberOfCalls: 8},
	{FailureRateThreshold: 100, MinimumNumberOfCalls: 2},
}

func TestHotPath_DoesNotAllocate(t *testing.T) {
	w := mustNew(t, 10)
	var now time.Duration
	allocs := testing.AllocsPerRun(1000, func() {
		now += 7 * time.Millisecond
		w.Record(1, now, true, true)
	})
	assert.Zero(t, allocs, "Record")
	allocs = testing.AllocsPerRun(1000, func() {
		now += 7 * time.Millisecond
		_ = w.Snapshot(1, now)
	})
	assert.Zero(t, allocs, "Snapshot")
	allocs = testing.AllocsPerRun(1000, func() { _ = w.Clean(now) })
	assert.Zero(t, allocs, "Clean")
	allocs = testing.AllocsPerRun(1000, func() {
		now += 7 * time.Millisecond
		_, _ = w.RecordTrip(1, now, true, false, &judgeRules[0])
	})
	assert.Zero(t, allocs, "RecordTrip")
	allocs = testing.AllocsPerRun(1000, func() {
		now += 7 * time.Millisecond
		_, _ = w.RecordSuccess(1, now, &judgeRules[0])
		_, _ = w.RecordFailure(1, now, &judgeRules[0])
	})
	assert.Zero(t, allocs, "RecordSuccess and RecordFailure")
}

// Clean, step by step: a success leaves the window clean, a failure or a
// slow call makes it unclean until its second leaves the window, whatever
// the generation, a dropped one included, and Clean itself never moves the
// window's current second.
func TestClean_UntilTheBadSecondLeaves(t *testing.T) {
	w := mustNew(t, 3)
	assert.True(t, w.Clean(0), "a new window")
	require.True(t, w.Record(1, 500*time.Millisecond, false, false))
	assert.True(t, w.Clean(time.Second), "successes only")

	require.True(t, w.Record(1, 10*sec+time.Millisecond, false, true)) // slow success, second 10
	for _, now := range []time.Duration{10 * sec, 11 * sec, 12*sec + 999*time.Millisecond} {
		assert.False(t, w.Clean(now), "second 10 is in the window at %v", now)
	}
	assert.True(t, w.Clean(13*sec), "second 10 left the window")
	assert.False(t, w.Clean(11*sec), "Clean(13 s) left head at 10, so second 10 is back in the window")
	require.True(t, w.Record(1, 13*sec, false, false))
	assert.True(t, w.Clean(5*sec), "the clock went back: the current second is head, 13")

	require.True(t, w.Record(2, 20*sec, true, false))
	assert.False(t, w.Record(1, 20*sec, true, false), "stale: dropped")
	assert.False(t, w.Clean(22*sec), "a failure of any generation")
	assert.True(t, w.Clean(23*sec))
}

// slot is sec mod B for every B New accepts and every second a window can
// hold, the extremes included.
func TestSlot_IsTheRemainder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, b := range []int{1, 2, 3, 7, 60, 1000, 3599, MaxBuckets} {
		w := mustNew(t, b)
		for _, sec := range []uint64{0, 1, uint64(b - 1), uint64(b), uint64(b + 1), maxSec - 1, maxSec} {
			require.Equal(t, sec%uint64(b), w.slot(sec), "B=%d sec=%d", b, sec)
		}
		for range 10_000 {
			sec := r.Uint64N(maxSec + 1)
			require.Equal(t, sec%uint64(b), w.slot(sec), "B=%d sec=%d", b, sec)
		}
	}
}

// SnapshotOwed says whether the state holds an outcome of its current
// second: true once one is recorded there (in second 0 too, where every
// bucket New made names second 0), false after the window moved on to a
// second with none, where eviction alone may have raised a rate.
func TestSnapshotOwed_OnlyWithAnOutcomeOfTheCurrentSecond(t *testing.T) {
	w := mustNew(t, 3)
	_, owed := w.SnapshotOwed(1, 0)
	assert.False(t, owed, "a new window")
	require.True(t, w.Record(0, 0, true, false))
	c, owed := w.SnapshotOwed(0, 0)
	assert.True(t, owed, "second 0, one failure: %+v", c)
	_, owed = w.SnapshotOwed(0, sec)
	assert.False(t, owed, "second 1 holds nothing yet")
	require.True(t, w.Record(0, sec, false, false))
	_, owed = w.SnapshotOwed(0, sec)
	assert.True(t, owed, "a success in second 1")
	c, owed = w.SnapshotOwed(0, 3*sec)
	assert.False(t, owed, "second 3: second 0's failure evicted, nothing new")
	assert.Equal(t, window.Counts{Calls: 1}, c)
}
