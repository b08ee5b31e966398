// Package buckets is the time-based sliding window of the breaker: B
// buckets of one width each (1 s by default, down to 100 ms), 1 <= B <=
// 3600, that hold the outcomes of the last B widths, lock-free and
// allocation-free.
//
// Throughout the package a "second" is one bucket width of the clock, the
// unit a window counts time in: floor(now / width). At the default width
// it is a whole second; a window of 100 ms buckets counts tenths of one,
// and its B = 10 x its seconds. Every bound below that is stated in
// seconds holds in those units.
//
// At time now the window holds the outcomes whose completion second falls
// in floor(now)-B+1 .. floor(now), however long the window was idle (the
// window membership rule of
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md).
// Every bucket is tagged with the breaker generation of its outcomes, so a newer generation starts an empty window
// without a clear step, and a late outcome of an older generation is stale
// and dropped.
//
// Besides recording and snapshots, which window/buckets offers on their
// own, it holds the breaker's side of the window: the trip judged as each
// outcome is recorded (RecordTrip, judge.go), the steady-state paths of
// core's Done, the generation advances of core's transitions, and the
// hand-over of its outcomes when the breaker is reconfigured (seal.go).
package buckets

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
	"unsafe"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/cacheline"
	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// MaxBuckets is the most buckets a window holds, whatever their width. It
// bounds the memory of a window (40 bytes a bucket, plus 8 per success
// stripe) and the cost of Snapshot, which reads every bucket, so a window
// of narrow buckets spans less time: MaxSeconds at the default width of
// 1 s, 360 s at 100 ms.
const MaxBuckets = 3600

// MaxSeconds is the largest window New accepts, in seconds (one hour): a
// window of MaxBuckets buckets of 1 s.
const MaxSeconds = MaxBuckets

// MinWidth is the narrowest bucket NewWidth accepts. A width is a whole
// number of milliseconds from MinWidth to 1 s that divides 1 s: 100, 125,
// 200, 250, 500 or 1000 ms.
const MinWidth = 100 * time.Millisecond

// ErrSize is returned, wrapped with the rejected value, by New and NewWidth
// when the window size is outside 1..MaxSeconds seconds, or its buckets at
// the width asked for would be more than MaxBuckets. Check it with
// errors.Is.
var ErrSize = errors.New("buckets: window size must be between 1 and 3600 seconds")

// ErrWidth is returned, wrapped with the rejected value, by NewWidth when
// the bucket width is not a whole number of milliseconds from MinWidth to
// 1 s that divides 1 s. Check it with errors.Is.
var ErrWidth = errors.New("buckets: bucket width must be a whole number of milliseconds from 100ms to 1s that divides 1s")

// Window counts outcomes over the last B seconds (of its width, see the
// package doc) in B buckets; second S lives in bucket S mod B.
//
// Create it with New, NewWidth or NewFrom. The zero value is a window of
// zero seconds: it holds nothing, Record drops every outcome, Snapshot
// returns zero Counts and Seal an empty Sealed. A Window must not be
// copied after first use. All methods but Seed are safe for concurrent
// use; all never block and never panic, and all but Seal never allocate.
//
// A window's life may end in Seal (seal.go), which takes its outcomes of
// one generation, exactly, for a window Seed starts from them (a
// reconfigured breaker): from then on it drops every outcome.
//
// Time is an argument: a time.Duration on the breaker's monotonic clock
// (time since an arbitrary base; a negative reading counts as 0, or with
// NewFrom one at or below the origin as the origin). Readings past 2^32-1
// seconds of the width after the origin (136 years at 1 s, 13.6 years at
// 100 ms) count as that second. The window keeps
// the newest second any call has seen (head) and uses max(floor(now), head)
// as the current second, so when the clock goes backwards elapsed time is
// zero and nothing evicted comes back; an outcome reported with an
// older time is counted in the head second.
//
// Cost. In the steady state (the bucket of the current second already holds
// it) Record is one load of head, one load of the bucket's id and one to
// four CAS, one per counter it raises (a failure or a slow call adds a
// CAS-max on the clean mark, at most once a second); Clean is two loads;
// Snapshot is O(B*S) loads (S success stripes). RecordTrip adds, on an
// unclean window, one load of the current second's judgement (what the last
// Snapshot of that second proved: how many more failures or slow calls, its
// slack, the rule can take before it trips) for a fast success and one CAS
// on it for a failure or slow call; a Snapshot only for the first outcome
// of a second and for a failure that finds the judgement's slack spent.
// An outcome that no judgement covers after that in its second (a success
// below the minimum number of calls, a failure that finds the slack spent)
// reads only its own bucket, O(S), and adds the other buckets' sum that
// the second's first Snapshot cached (judge.go).
// Something slower happens once per bucket per second (or per breaker
// generation): the first Record of a new second or generation into
// a bucket recycles it with one CAS on its id and then moves its four
// counters forward, each with an id re-check and a CAS, and the first call
// of a new second advances head with one CAS. Writers never wait for a
// recycle: one that reaches a counter before the recycler does moves it
// along itself.
//
// Ordering rule: a counter is only ever moved forward, to a newer
// incarnation of its bucket, by CAS; there is no clear that could wipe an
// outcome already counted for the bucket's current second. Snapshot reads a
// bucket's counters in the reverse of the order Record writes them and
// re-checks the bucket's id, so every bucket it sums is one consistent
// incarnation.
//
// Loss. None within the bounds below: an outcome is dropped only when its
// generation is older than its bucket's (stale), its second left the
// window while it was being recorded, or the window was sealed before the
// outcome's write landed (Seal takes every one that landed), and Record
// reports all three.
//   - The 8-bit incarnation (docs/design.md, The time window): no loss
//     unless a goroutine stays paused, inside one Record call, while its
//     bucket is recycled 128 times or more: at least 128*B seconds of the
//     width (128 times the window's span, at every width), or 128 breaker transitions each
//     followed by an outcome in that very bucket. Even then the worst case
//     of all but a two-instruction pause is one outcome over-counted.
//   - The 24-bit generation: a bucket nobody wrote to while the generation
//     advanced by 2^23 or more (8,388,608 transitions) would hold a
//     generation that looks newer than the current one, so that Record
//     drops its second's outcomes, and one left 2^24 behind would look
//     like the current one, so that Snapshot counts outcomes of a
//     generation long gone. A caller that reports every generation it
//     commits to Advance (the breaker does) never lets a bucket fall that
//     far behind: Advance retires every bucket 2^22 generations behind,
//     once every 2^22 generations. Without it, or when a sweep comes late, a
//     caller that knows its generation is current uses RecordCurrent, which
//     takes the bucket over (the breaker does not: it relies on Advance).
//
// Memory model: every operation here is a sequentially consistent atomic.
// A Record that returned true is synchronized before every Snapshot that
// begins after it, and that Snapshot includes the outcome if gen is the
// outcome's generation, no newer generation has recorded into its bucket,
// and its second is still in the window. Records running concurrently with
// a Snapshot may or may not be included, bucket by bucket, but every
// Snapshot keeps the invariants of window.Counts.
type Window struct {
	// head is first so that its word is the first of the allocation, which
	// the Go allocator 64-bit aligns on every platform.
	head paddedHead
	// seq counts the failed and slow outcomes recorded while a Snapshot
	// reads (see Snapshot). Written by each of them then, so it has a line
	// of its own: on head's, every failure would evict the word every
	// Record loads first.
	seq paddedSeq
	layout
	// The padding makes a Window a whole number of cache lines, so that its
	// allocation, in a size class of such multiples, starts on a line and
	// head has its line to itself (see atomicring.Ring, where an
	// adversarial review found the same gap).
	// (Never zero bytes: a zero-size last field would be padded itself.)
	_ [cacheLine - unsafe.Sizeof(layout{})%cacheLine]byte
}

// layout is what a Window reads but never changes after New.
type layout struct {
	// ids and counts never change after New: bucket i is ids[i] and
	// counts[i] (see bucket for why they are apart). Their elements are 8
	// and 32 bytes, multiples of 8, so they all stay 64-bit aligned too.
	ids    []atomic.Uint64
	counts []counters
	// succ counts fast successes (neither failed nor slow), the bulk of a
	// healthy stream, in stripes: stripe k is succ[k*B : (k+1)*B], one cell
	// per bucket, and a goroutine adds to the stripe of the P it runs on
	// (pid). Successes from different cores in one second therefore write
	// different cache lines, where a single n would bounce between them.
	// Stripe-major, so a stripe's cells for consecutive seconds sit together
	// and two stripes share a line only at their ends.
	succ       []atomic.Uint64
	stripeMask uint64
	// modM is ceil(2^64 / B), for the bucket index of a second without a
	// division (slot): a 64-bit DIV was a tenth of a fast success.
	modM uint64
	// divM and divShift turn a clock reading into seconds of the width, a
	// multiply and a shift (tick) for every width, as the compiler's
	// division by the constant 1 s was before widths, with no DIV.
	divM, divShift uint64
	// width is the bucket width, 1 s by default (0 for the zero Window).
	width time.Duration
	// origin is the reading the window's second 0 starts at (NewFrom): a
	// whole second, 0 unless NewFrom moved it.
	origin time.Duration
	// wholeSeconds: buckets of 1 s from the clock's 0, the breaker's
	// default, whose readings tick converts by the constant second.
	wholeSeconds bool
	// seededSec and seededCalls are the head second Seed left and the
	// calls it put there (written by Seed, before the window is shared):
	// those outcomes were judged before the window was seeded, so they owe
	// no trip (SnapshotOwed).
	seededSec, seededCalls uint64
}

// bucket returns bucket i.
func (w *Window) bucket(i uint64) bucket {
	return bucket{&w.ids[i], &w.counts[i], w, i}
}

// paddedHead gives head a cache line of its own. head is loaded by every
// Record and Snapshot and stored about once a second; without padding,
// writes to whatever the allocator places next to the Window would evict
// it from every core's cache. 24 bytes of words + 40 of padding = 64, the
// cache line of amd64 and arm64, pinned by a size test.
type paddedHead struct {
	// second is the largest whole second any call has seen; it only grows.
	second atomic.Uint64
	// lastUnclean is 1 + the largest second in which a failure or a slow
	// call was offered to Record (0: never); it only grows. Clean reads it
	// so that a success in a clean window skips Snapshot. It shares head's
	// line: both are read together and each is written at most once a
	// second.
	lastUnclean atomic.Uint64
	// swept is the generation (low 24 bits) of the last sweep (Advance).
	// It is loaded once per breaker transition and stored once per 2^22.
	swept atomic.Uint64
	// slot is the current second with its bucket's index, sec<<slotShift |
	// sec mod B, raised after second: the steady-state paths read the index
	// beside second, with no multiply, so that the loads of the bucket's id
	// and counter do not wait for the clock reading (an index computed from
	// it put two multiplies and those loads between the reading and the
	// CAS). A reader uses it only where its second is the one it wants, so
	// a value that trails second costs a multiply, never a wrong bucket.
	slot atomic.Uint64
	// full is the complement of the id of the last bucket incarnation in
	// which a full judgement was installed (judge.go): the minimum number
	// of calls is met there for the rest of the second, so its fast
	// successes need no judgement. Stored at most once per incarnation,
	// and 0 (none) when a judgement finds the rule holding or a Snapshot
	// retracts the second's judgements (retract). An id comes
	// back only when its bucket holds the same second of a generation 2^24
	// transitions later, all within that one second of the clock (head
	// never goes back).
	full atomic.Uint64
	// others is the stamp of the cached sum of the window's other buckets
	// (paddedSeq, judge.go): a cached sum is good only while others still
	// holds the stamp its publisher gave it. It moves when an outcome lands
	// in a bucket other than the current second's (its writer read head
	// before head moved on: landed), when a Snapshot is shown to a caller,
	// when a judge's sum is published or could not be, and when a sweep
	// retires a bucket: a few times per second of the width, never per
	// outcome in the steady state.
	others atomic.Uint64
	// sealed is 1 once Seal has begun (seal.go). Loaded only where an id
	// is about to be moved (a recycle, a takeover, a retire) and where a
	// judge has summed the window: never on a steady path, which Seal
	// stops through the bucket's own words.
	sealed atomic.Uint64
	_      [cacheLine - 56]byte
}

// slotShift and slotMask split paddedHead.slot: the index below, the second
// above (MaxBuckets < 2^12, and a second is at most 2^32-1).
const (
	slotShift = 12
	slotMask  = 1<<slotShift - 1
)

// cacheLine is the padding's line size (cacheline.Size has the reason).
const cacheLine = cacheline.Size

// paddedSeq is Window.seq on a cache line of its own, with the count of
// Snapshots reading, which a failed or slow outcome loads to know whether
// it must raise n: outside a Snapshot the line is only read. The rest of
// the line is the cached sum of the other buckets (othersCache), which a
// judge reads beside readers, which it raises; it is written once per
// judge's sum, which raises readers too, so the failures' loads of readers
// miss no more often for it. Eight words: a line exactly (TestLayout).
type paddedSeq struct {
	n       atomic.Uint64
	readers atomic.Uint64
	cache   othersCache
}

// moved is what a failed or slow outcome does after its write and before
// it returns: raise seq, if a Snapshot is reading (Snapshot says why that
// is enough).
func (w *Window) moved() {
	if w.seq.readers.Load() != 0 {
		w.seq.n.Inc()
	}
}

// New returns an empty window of seconds seconds in buckets of 1 s: it is
// NewWidth(seconds, time.Second).
func New(seconds int) (*Window, error) {
	return NewWidth(seconds, time.Second)
}

// NewWidth returns an empty window of seconds seconds in buckets of width
// each, seconds x (1 s / width) of them. It returns an error wrapping
// ErrWidth, naming the value, when width is not one of the widths MinWidth
// describes, and one wrapping ErrSize, naming the value, when seconds is
// below 1 or makes more than MaxBuckets buckets (above 3600 s at 1 s,
// above 360 s at 100 ms); it never panics.
func NewWidth(seconds int, width time.Duration) (*Window, error) {
	return NewFrom(seconds, width, 0)
}

// originBack is how many widths before NewFrom's reading the window's
// origin lies: a clock that goes back that far (3.4 years at 100 ms) before
// it first reads past the origin is the only one the origin can misplace.
const originBack = 1 << 30

// NewFrom is NewWidth for a window whose clock may read far from 0: from
// is a reading of that clock taken now. Seconds are 32 bits of widths
// (2^32 widths: 136 years at 1 s, 13.6 at 100 ms), so a window counting
// from 0 stops sliding for good once the clock passes 2^32 widths, which
// a clock whose base is the Unix epoch has done at every width below
// 500 ms. NewFrom counts seconds from an origin instead: the last whole
// second at least 2^30 widths before from, or 0 if from is closer to 0
// than that. Readings from the origin to 2^32 widths after it (at least
// 3 x 2^30 widths after from: 10.2 years at 100 ms) are then exact, and
// the second of a reading at or below the origin is the origin's, as a
// negative reading's is 0 in a window counting from 0. The origin is a
// whole second, so every bucket still starts at a multiple of the width
// of the clock; windows counting from different origins therefore agree
// on every outcome's bucket, and differ only for a clock that reads below
// the origin before it reads anything above it. It returns NewWidth's
// errors and never panics.
func NewFrom(seconds int, width, from time.Duration) (*Window, error) {
	if !ValidWidth(width) {
		return nil, fmt.Errorf("%w: got %v", ErrWidth, width)
	}
	perSec := int(time.Second / width)
	if maxSec := MaxBuckets / perSec; seconds < 1 || seconds > maxSec {
		return nil, fmt.Errorf("%w: got %d, and at most %d in buckets of %v", ErrSize, seconds, maxSec, width)
	}
	b := seconds * perSec
	k := stripesFor()
	m, shift := divisor(uint64(width))
	origin := originOf(from, width)
	return &Window{layout: layout{
		ids:          make([]atomic.Uint64, b),
		counts:       make([]counters, b),
		succ:         make([]atomic.Uint64, k*b),
		stripeMask:   uint64(k - 1),
		modM:         ^uint64(0)/uint64(b) + 1,
		divM:         m,
		divShift:     shift,
		width:        width,
		origin:       origin,
		wholeSeconds: width == time.Second && origin == 0,
	}}, nil
}

// originOf is NewFrom's origin for a reading from at a valid width.
func originOf(from, width time.Duration) time.Duration {
	back := originBack * width
	if from <= back {
		return 0
	}
	return (from - back) / time.Second * time.Second
}

// ValidWidth reports whether NewWidth accepts width: a whole number of
// milliseconds from MinWidth to 1 s that divides 1 s, so that a window of
// whole seconds holds whole buckets and every bucket lies inside one
// second of the clock.
func ValidWidth(width time.Duration) bool {
	return width >= MinWidth && width <= time.Second && width%time.Millisecond == 0 && time.Second%width == 0
}

// divisor returns the multiplier m and shift s with which
// floor(n/d) = floor(n*m / 2^64) >> s for every n below 2^63 (a
// time.Duration that is not negative): with 2^(l-1) < d <= 2^l, m =
// ceil(2^(63+l) / d), which fits 64 bits, and s = l-1 (Granlund and
// Montgomery, "Division by Invariant Integers using Multiplication", 1994,
// Theorem 4.2 with N = 63: m*d - 2^(63+l) < d <= 2^l). d must be at least 2.
func divisor(d uint64) (m, s uint64) {
	l := uint64(bits.Len64(d - 1)) // the least l with d <= 2^l
	q, r := bits.Div64(1<<(l-1), 0, d)
	if r != 0 {
		q++
	}
	return q, l - 1
}

// slot is sec mod B, the index of second sec's bucket, by Lemire's
// multiply-shift remainder: exact for sec and B below 2^32, which second
// and New guarantee (Lemire, Kaser, Kurz, "Faster Remainder by Direct
// Computation", 2019).
func (w *Window) slot(sec uint64) uint64 {
	hi, _ := bits.Mul64(w.modM*sec, uint64(len(w.ids)))
	return hi
}

// Seconds returns the window size in seconds, as given to New or NewWidth
// (0 for the zero Window).
func (w *Window) Seconds() int {
	if w.width == 0 {
		return 0
	}
	return len(w.ids) / int(time.Second/w.width)
}

// Width returns the bucket width (1 s for a window made by New, 0 for the
// zero Window).
func (w *Window) Width() time.Duration {
	return w.width
}

// Record counts one outcome completed at now under breaker generation gen:
// a call, and also a failure and/or a slow call as flagged. Only the low 24
// bits of gen are used; generations compare with wrap-around (a is newer
// than b iff (a-b) mod 2^24 is in (0, 2^23)).
//
// It returns true if the outcome was added to its second's bucket, where
// Snapshot counts it for as long as that second is in the window, and false
// if it was dropped: because gen is older than the generation its bucket
// already holds (stale), because a newer second took over its bucket
// while it was being recorded (its second left the window), or because
// Seal took the window first (sealed: every outcome from then on). An
// outcome recorded under the newest generation is never dropped by a
// sequential caller of a window not sealed, and by concurrent ones only
// when it raced with a clock that moved B seconds on, or with Seal.
func (w *Window) Record(gen uint32, now time.Duration, failure, slow bool) bool {
	_, ok := w.record(gen, now, failure, slow, false)
	return ok
}

// RecordCurrent is Record for a caller that knows gen is the current
// generation although Record reported the outcome dropped: a bucket nobody
// wrote while the generation advanced 2^23 or more (and no Advance retired
// it) holds a generation that serial-number arithmetic reads as newer.
// RecordCurrent takes over a bucket of any other generation. It returns
// false only when the outcome's second left the window while it was being
// recorded (or gen lost a race with another caller's generation). It must
// not be called for a generation that may have been succeeded since the
// caller checked it: it would take the successor's bucket over and drop the
// successor's outcomes of that second. A caller that calls Advance for
// every generation it commits never needs it (the breaker does not use it).
func (w *Window) RecordCurrent(gen uint32, now time.Duration, failure, slow bool) bool {
	_, ok := w.record(gen, now, failure, slow, true)
	return ok
}

// RecordTrip is Record followed by the judgement of rule on the window the
// outcome was recorded in: recorded is Record's result, and trips whether
// rule.Trips holds on the window with the outcome in it (always false when
// the outcome was not recorded, or rule is nil). An outcome is judged in
// O(1) but for the first of a second, which takes a Snapshot, and the
// outcomes that no judgement covers (a failure or slow call that finds the
// second's slack spent, a success below the minimum number of calls),
// which read their own bucket, O(S), beside the other buckets' sum the
// first cached (the judgement and its slack are described under Window
// and in judge.go). In sequential use it equals
// rule.Trips(Snapshot(gen, now)) after the record. An outcome recorded
// while Seal runs whose judgement needed a sum reports trips true,
// whatever the rule: the sum may lack what Seal took, so the judgement is
// the sealer's to make again, on the window it moved the outcomes to. It
// may run concurrently with every other method and allocates nothing.
func (w *Window) RecordTrip(gen uint32, now time.Duration, failure, slow bool, rule *trip.Rule) (recorded, trips bool) {
	sec, ok := w.record(gen, now, failure, slow, false)
	if !ok || rule == nil || w.cleanAt(sec) {
		return ok, false
	}
	return true, w.judge(gen&genMask, now, failure, slow, rule)
}

// RecordSuccess is RecordTrip(gen, now, false, false, rule) for a fast
// success (neither failed nor slow), the bulk of every stream, with the
// same results, on a path of its own for the steady state: now falls in
// the window's current second and that second's bucket already holds gen.
// It then reads the head's line and the bucket's id, raises the bucket's
// success cell by one CAS, and is done once the window is clean or the
// second's minimum number of calls is known met with the rule false
// (judge.go); anything else it leaves to RecordTrip (before the add) or to
// the judgement (after it). On the zero Window it records nothing and
// reports false, false. It may run concurrently with every other method,
// allocates nothing and never panics.
func (w *Window) RecordSuccess(gen uint32, now time.Duration, rule *trip.Rule) (recorded, trips bool) {
	gen &= genMask
	// steady, for the reading rather than its second: now falls in the
	// head's second sec exactly when 0 <= now - origin - sec*width < width,
	// which is tick(now) == sec (below the saturated second, whose later
	// readings take RecordTrip, as every reading outside the head's second
	// does), with one multiply where tick divides. Inline: in a call of
	// its own (too large to inline), it cost more than the division.
	hs := w.head.slot.Load()
	i, sec := hs&slotMask, hs>>slotShift
	width := uint64(w.width)
	if uint64(now-w.origin)-sec*width >= width || sec != w.head.second.Load() || i >= uint64(len(w.ids)) {
		return w.RecordTrip(gen, now, false, false, rule) // i past the end: the zero Window (width 0 fails first)
	}
	id := w.ids[i].Load()
	if !holds(id, gen, sec) {
		return w.RecordTrip(gen, now, false, false, rule)
	}
	inc := uint8(id >> secBits)
	c := &w.succ[i] // stripe 0, all there is with one stripe
	if w.stripeMask != 0 {
		c = &w.succ[(uint64(pid())&w.stripeMask)*uint64(len(w.ids))+i]
	}
	// Read before the add: judge.go, minimumMet. head.full holds the id's
	// complement, so that its zero, none, names the one id that is never
	// taken for one (all ones: the saturated second of generation 2^24-1,
	// 255th incarnation).
	minimumMet := w.head.full.Load() == ^id && id != ^uint64(0)
	if v := c.Load(); uint8(v>>countBits) != inc || !c.CompareAndSwap(v, v+1) {
		return w.RecordTrip(gen, now, false, false, rule)
	}
	if rule == nil {
		w.landed(sec)
		return true, false
	}
	// No landed here: head still names sec after the add, or the window
	// is clean at sec, where no outcome lands after a cached sum was
	// taken (publish).
	if minimumMet && w.head.second.Load() == sec || w.cleanAt(sec) {
		return true, false
	}
	w.landed(sec)
	return true, w.judge(gen, now, false, false, rule)
}

// steady reports whether an outcome of generation gen (masked) at second
// sec is in the steady state of RecordSuccess and RecordFailure: sec is the
// window's current second and its bucket, i, holds that second of gen
// already, under id. The index comes from head.slot, not from sec.
func (w *Window) steady(gen uint32, sec uint64) (i, id uint64, ok bool) {
	hs := w.head.slot.Load()
	i = hs & slotMask
	if hs>>slotShift != sec || sec != w.head.second.Load() || i >= uint64(len(w.ids)) {
		return 0, 0, false // i past the end: the zero Window
	}
	id = w.ids[i].Load()
	return i, id, holds(id, gen, sec)
}

// holds reports whether a bucket's id names second sec of generation gen
// (masked), in any incarnation: packID(gen, 0, sec) spelled out, since with
// that call steady no longer inlined.
func holds(id uint64, gen uint32, sec uint64) bool {
	return id&^incMask == uint64(gen)<<(incBits+secBits)|sec
}

// RecordFailure is RecordTrip(gen, now, true, false, rule) for a failure
// that was not slow, with the same results, on a path of its own for the
// steady state: now falls in the window's current second, which is marked
// unclean already, and that second's bucket holds gen. It then raises the
// bucket's failure counter and seq, and takes one unit of the second's
// judgement, by one CAS each. Anything else goes to RecordTrip with
// nothing recorded yet, or, once the failure is in, to the full judgement.
// On the zero Window it records nothing and reports false, false. It may
// run concurrently with every other method, allocates nothing and never
// panics.
func (w *Window) RecordFailure(gen uint32, now time.Duration, rule *trip.Rule) (recorded, trips bool) {
	gen &= genMask
	sec := w.tick(now)
	// lastUnclean covers sec: record's mark, made before the add, is made.
	if w.head.lastUnclean.Load() <= sec || rule == nil {
		return w.RecordTrip(gen, now, true, false, rule)
	}
	i, id, ok := w.steady(gen, sec)
	if !ok {
		return w.RecordTrip(gen, now, true, false, rule)
	}
	inc := uint8(id >> secBits)
	b := &w.counts[i]
	if v := b.ff.Load(); uint8(v>>countBits) != inc || !b.ff.CompareAndSwap(v, v+1) {
		return w.RecordTrip(gen, now, true, false, rule)
	}
	w.moved() // after the add, as record's
	// judge's first step for a failure, on the bucket just written while
	// it is still the current second's: a unit of its judgement's slack.
	if w.head.second.Load() == sec {
		j := b.judge.Load()
		if uint8(j>>countBits) == inc && j&judgeSafe != 0 && j&judgeSlack != 0 && b.judge.CompareAndSwap(j, j-1) {
			return true, false
		}
	} else {
		w.head.others.Inc() // landed outside the current second's bucket
	}
	return true, w.judge(gen, now, true, false, rule)
}

// record adds the outcome and reports the window's current second as it
// found it, and whether the outcome was added. Two words, returned in
// registers: a six-word struct returned here came back through memory and
// was re-read with 16-byte loads that missed store forwarding.
func (w *Window) record(gen uint32, now time.Duration, failure, slow, current bool) (uint64, bool) {
	size := uint64(len(w.ids))
	if size == 0 {
		return 0, false
	}
	return w.recordAt(gen&genMask, w.advance(now), failure, slow, current)
}

// recordAt is record once it has read the window's current second, sec:
// the rest of the call, with sec as a writer holds it while head may move
// on (where an outcome lands after a cached sum was taken: landed).
func (w *Window) recordAt(gen uint32, sec uint64, failure, slow, current bool) (uint64, bool) {
	if failure || slow {
		// Before the bucket, so that a Snapshot that sees the outcome also
		// sees the window marked unclean.
		w.markUnclean(sec)
	}
	b := w.bucket(w.slot(sec))
	for {
		id := b.id.Load()
		idGen, inc, idSec := unpackID(id)
		switch {
		case idGen == gen && idSec == sec:
			if !failure && !slow {
				// One P, one stripe: no P id to look up.
				k := uint64(0)
				if w.stripeMask != 0 {
					k = uint64(pid()) & w.stripeMask
				}
				if !b.addTagged(b.cell(k), id) {
					return 0, false
				}
				w.landed(sec)
				return sec, true
			}
			if !b.add(id, failure, slow) {
				return 0, false
			}
			// After the add and before returning: a Snapshot that ran
			// across this outcome's add, or across its return and the
			// start of a later call, sees seq move and reads again.
			w.moved()
			w.landed(sec)
			return sec, true
		case recycles(gen, idGen, sec, idSec, current):
			// Recycle: the bucket holds an expired second or a dead
			// generation. Only one CAS wins; it then owes the reset. Losers
			// and the winner alike retry and find the bucket holding
			// (gen, sec), or something newer.
			if w.head.sealed.Load() != 0 {
				// Loaded after id: an id Seal has moved is never
				// recycled, and Seal's own CAS fails a recycle that
				// found the window not yet sealed (seal.go).
				return 0, false
			}
			next := packID(gen, inc+1, sec)
			if b.id.CompareAndSwap(id, next) {
				b.reset(next)
			}
		default:
			// The bucket holds a newer (gen, sec) than ours: our generation
			// is stale, or our second left the window after we read head.
			return 0, false
		}
	}
}

// recycles reports whether a record of second sec of generation gen (with
// current as in RecordCurrent) takes over a bucket that holds second idSec
// of generation idGen: the bucket holds a dead generation (an older one,
// or for current any other), or an expired second of gen.
func recycles(gen, idGen uint32, sec, idSec uint64, current bool) bool {
	return newerGen(gen, idGen) || (current && idGen != gen) || (idGen == gen && sec > idSec)
}

// sweepEvery is how many generations apart Advance sweeps the window (2^22,
// a quarter of the 24-bit range), and retireAfter how far behind the
// sweep's generation a bucket must be to be retired (2^21: so a sweep may
// come up to 2^21 generations late and still find every bucket less than
// 2^23 behind, where serial arithmetic reads it right).
const (
	sweepEvery  = 1 << (genBits - 2)
	retireAfter = 1 << (genBits - 3)
)

// Advance reports that the caller has committed generation gen (low 24
// bits used), so that no bucket is left holding a generation far enough
// behind to be misread: the breaker calls it after every transition, as
// it calls atomicring.Ring.Advance. The first call at least 2^22
// generations past the last sweep's (and less than 2^23: a late call for a
// generation already passed changes nothing) sweeps the window: every
// bucket holding a generation 2^21 to 2^23-1 behind gen is retired (moved,
// as a recycle does, to a new incarnation with empty counters, of
// generation gen-1, which no caller records in any more). After a sweep
// for gen every bucket holds gen-2^21+1 or newer, and the next sweep comes
// 2^22 generations later (up to 2^21 more if the caller that should run it
// is late), so while the caller reports its generations no bucket is ever
// 2^23 behind the current one: none reads as newer (to be taken over with
// RecordCurrent) nor, 2^24 behind, as the current one.
//
// Other calls are one load. A sweep is one load per bucket and, for each
// retired one, a CAS on its id and its reset; it runs once per 2^22
// generations, on the caller's goroutine, and never waits. It may run
// concurrently with every other method: a bucket recycled for a newer
// generation while the sweep looks at it is left alone (its CAS fails),
// and an outcome being added to a retired incarnation is dropped, as in a
// recycle; it was 2^21 generations stale.
func (w *Window) Advance(gen uint32) {
	gen &= genMask
	for {
		s := w.head.swept.Load()
		if d := (gen - uint32(s)) & genMask; d < sweepEvery || d >= 1<<(genBits-1) {
			return
		}
		// Success transfers: the sweep for gen, to this caller alone.
		if w.head.swept.CompareAndSwap(s, uint64(gen)) {
			break
		}
	}
	retired := false
	for i := range uint64(len(w.ids)) {
		retired = w.bucket(i).retire(gen, &w.head.sealed) || retired
	}
	if retired {
		w.head.others.Inc() // a cached sum may hold what the sweep retired
	}
}

// Snapshot returns the sums of the outcomes of generation gen (low 24 bits)
// inside the window at now. It also moves the window's current second
// forward to floor(now) if that is newer, so it never reports an outcome
// that had left the window before now.
//
// The sums are one state of the window: while gen is current, there is an
// order of the outcomes recorded, consistent with real time, such that the
// Snapshot holds exactly those before some point of it. Each outcome is one
// atomic write (bucket); the failed and slow ones, which are rare, also
// raise seq after their write and before they return, if a Snapshot is
// reading (readers). Snapshot raises readers, reads seq, then the failed
// and slow counts of every bucket, then the fast successes of every
// bucket, then seq again, lowers readers, and reads everything again if
// seq, the current second or the set of buckets in the window moved. Why
// that is enough: a failure the Snapshot holds was written before the
// success cells were read, so every success that returned before it
// started is held too; a failure written in between that the Snapshot
// misses, and a success written after it that the Snapshot holds, would
// have moved seq in between: that failure's load of readers came after
// its write, so after the Snapshot raised readers (which came before the
// Snapshot read its bucket), and before the success's write, so before
// the Snapshot lowered readers; it found readers raised. A failure that
// found no reader loaded readers before the Snapshot raised it, so its
// write came before the Snapshot read any count: it is held. (Every
// operation here is sequentially consistent, which this order needs.) Fast successes are alike, so which of them are held does not
// matter, only how many. It retries only when a failed or slow outcome
// was recorded meanwhile, so it is lock-free, not wait-free.
//
// gen is meant to be the breaker's current generation. For an older one the
// result may miss outcomes whose buckets a newer generation has since taken
// over.
func (w *Window) Snapshot(gen uint32, now time.Duration) window.Counts {
	c, _ := w.SnapshotOwed(gen, now)
	return c
}

// SnapshotOwed is Snapshot that also reports whether the state it returns
// holds an outcome of its current second (one recorded since Seed, in a
// seeded window). Every outcome is counted in the
// current second, and a second evicts nothing once it is current, so then
// the state is the window as its newest outcome left it: if it trips the
// rule, the trip rule, judged after every outcome, owes that outcome (or an
// earlier one) a trip. Otherwise eviction may have raised a rate since the
// last outcome, and no trip is owed until the next outcome is judged. It
// writes two words: it retracts the current second's judgement, so that an
// outcome in flight that this snapshot showed is judged on a full sum
// rather than on slack the snapshot has already counted, and it moves
// head.others, so that no judge after it adds its bucket to a cached sum
// of the others that lacks such an outcome (judge.go).
func (w *Window) SnapshotOwed(gen uint32, now time.Duration) (c window.Counts, owed bool) {
	s, _ := w.sum(gen, now, nil)
	// Shown to our caller: an outcome it holds that landed outside the
	// current second's bucket and has not yet said so (landed) must not be
	// missing from a cached sum a judge uses after we return.
	w.head.others.Inc()
	w.retract(gen&genMask, now)
	return s.all, w.owes(s.sec, s.head.Calls)
}

// owes reports whether calls outcomes in current second sec hold one
// recorded since Seed: the calls Seed put in its head second were judged
// before the window was seeded, and owe no trip.
func (w *Window) owes(sec, calls uint64) bool {
	if sec == w.seededSec {
		return calls > w.seededCalls
	}
	return calls > 0
}

// retract moves the judge word of the current second's bucket to a new
// version with safe clear, if the bucket holds that second of generation
// gen (low 24 bits). A caller whose Snapshot showed its state to someone
// calls it before returning: the Snapshot may hold a failure still on its
// way to judge, whose unit of slack a later failure could otherwise take,
// and be judged not to trip on a window holding every failure the Snapshot
// showed and its own. After the retraction no judgement made before it
// covers an outcome after it (each such outcome sums, or takes slack from
// a judgement summed since), and no install from a word loaded before it
// succeeds. Only the current second's needs it: an outcome that starts
// after the retraction judges in that second or a later one, never in an
// older second's bucket.
func (w *Window) retract(gen uint32, now time.Duration) {
	if len(w.ids) == 0 {
		return // the zero Window: no bucket, no judgement
	}
	sec := w.current(now)
	b := w.bucket(w.slot(sec))
	id := b.id.Load()
	idGen, inc, idSec := unpackID(id)
	if idGen != gen || idSec != sec {
		return // no judgement of that second of gen to retract
	}
	for {
		j := b.judge.Load()
		if tag, _ := unpackCount(j); tag != inc || b.id.Load() != id {
			return // none of this incarnation yet, or the bucket moved on
		}
		if b.judge.CompareAndSwap(j, nextJudgement(j, inc, 0)) {
			// head.full is a judgement made before the retraction too.
			// After the move: an install that stores it later finds
			// the move when it checks judge, and takes its store back.
			if w.head.full.Load() == ^id {
				w.head.full.CompareAndSwap(^id, 0)
			}
			return
		}
	}
}

// sum is SnapshotOwed, for a judge (judge.go) that may stop summing once
// another judgement covers its outcome: between two attempts it asks
// covered, if not nil, and returns stopped true (and no counts) if so.
// Without it, a judge summing a long window while another core records
// failures could retry for as long as they come (each one moves seq), and
// the judgement that the other core installs meanwhile is as good as its own.
func (w *Window) sum(gen uint32, now time.Duration, covered *judging) (s sums, stopped bool) {
	gen &= genMask
	sec := w.advance(now)
	w.seq.readers.Inc()
	defer w.seq.readers.Dec()
	for {
		// Before the buckets: see sums.
		others := w.head.others.Load()
		unclean := !w.cleanAt(sec)
		seq := w.seq.n.Load()
		all, members, head := w.collect(gen, sec, true)
		fast, again, headFast := w.collect(gen, sec, false)
		if again == members && w.seq.n.Load() == seq && w.head.second.Load() == sec {
			all.Calls += fast.Calls
			head.Calls += headFast.Calls
			return sums{all: all, head: head, sec: sec, others: others, unclean: unclean}, false
		}
		if covered != nil && covered.now() {
			return sums{sec: sec}, true
		}
		sec = w.advance(now)
	}
}

// sums is what sum read: the window (all) at second sec, the part of it
// in sec's own bucket (head), and, loaded before any bucket was read,
// head.others and whether the window was unclean at sec (what a judge
// needs to publish the sum of the other buckets, judge.go).
type sums struct {
	all, head window.Counts
	sec       uint64
	others    uint64
	unclean   bool
}

// member reports whether a bucket whose id is (idGen, idSec) holds second
// idSec of generation gen inside the window whose current second is sec.
// idSec > sec: a concurrent call moved head past our now and recycled the
// bucket for a later second, which our read does not cover.
func (w *Window) member(gen, idGen uint32, sec, idSec uint64) bool {
	return idGen == gen && idSec <= sec && sec-idSec < uint64(len(w.ids))
}

// collect sums, over the buckets of gen in the window at second sec, their
// failed and slow outcomes (failedOrSlow) or their fast successes (in
// Calls), counts the buckets it read, and returns the part of the sum it
// found in second sec's.
func (w *Window) collect(gen uint32, sec uint64, failedOrSlow bool) (sum window.Counts, members int, head window.Counts) {
	for i := range uint64(len(w.ids)) {
		b := w.bucket(i)
		for {
			id := b.id.Load()
			idGen, inc, idSec := unpackID(id)
			if !w.member(gen, idGen, sec, idSec) {
				break
			}
			var c window.Counts
			if failedOrSlow {
				c = b.readFailedOrSlow(inc)
			} else {
				c.Calls = b.readFast(inc)
			}
			if b.id.Load() != id {
				// Recycled while we read: the counters may mix two
				// incarnations. A recycle always installs a newer
				// (gen, sec), so an id never comes back and an unchanged
				// one proves they did not.
				continue
			}
			members++
			if idSec == sec {
				// += : a bucket New left at id 0 also names second 0
				// of generation 0, empty.
				head = plus(head, c)
			}
			sum = plus(sum, c)
			break
		}
	}
	return sum, members, head
}

// plus is a + b, field by field.
func plus(a, b window.Counts) window.Counts {
	return window.Counts{Calls: a.Calls + b.Calls, Failures: a.Failures + b.Failures,
		SlowCalls: a.SlowCalls + b.SlowCalls, SlowFailures: a.SlowFailures + b.SlowFailures}
}

// Clean reports whether no failure and no slow call was offered to Record,
// under any generation and whether or not it was counted, in a second the
// window covers at now. A window that is clean holds neither, so no rule
// that needs a failure or a slow call (every trip.Rule) can trip on it,
// and a caller may skip Snapshot: that is the time-based window's cheap
// success path, one load beside head's. A failure or a slow call makes the
// window unclean for B seconds, even if it was dropped or its generation
// has passed; that only costs the caller a Snapshot.
//
// It reads and writes nothing else: the current second is max(floor(now),
// head), as for Record, without moving head. It may run concurrently with
// every other method; a Record running concurrently may or may not be seen,
// but one that returned before Clean began is.
func (w *Window) Clean(now time.Duration) bool {
	return w.cleanAt(w.current(now))
}

// current is the window's current second at now, max(floor(now), head),
// read without moving head: the second whose bucket holds the judgement
// every outcome at now consults.
func (w *Window) current(now time.Duration) uint64 {
	return max(w.tick(now), w.head.second.Load())
}

// cleanAt is Clean with the current second sec already known. A sec older
// than the current one can only answer "unclean" where Clean would say
// clean, which costs a judgement, never a trip missed.
func (w *Window) cleanAt(sec uint64) bool {
	last := w.head.lastUnclean.Load()
	return last == 0 || last+uint64(len(w.ids)) <= sec+1
}

// landed is what a writer does after it added an outcome to second sec's
// bucket and before it returns, or judges: if head has moved past sec, the
// outcome may have landed in a bucket whose sum a judge has cached
// (judge.go), after the sum was taken, so it moves head.others and that
// cache is no longer used. Head is never behind sec after the add (record
// raised it to sec, or steady found it there), so head still at sec means
// the add went to the current second's bucket, which no cache holds.
func (w *Window) landed(sec uint64) {
	if w.head.second.Load() != sec {
		w.head.others.Inc()
	}
}

// markUnclean raises lastUnclean to 1 + sec; the CAS runs at most once per second
// that sees a failure or a slow call. Success transfers: the unclean span,
// to sec + B - 1.
func (w *Window) markUnclean(sec uint64) { raise(&w.head.lastUnclean, sec+1) }

// advance returns the current second, max(tick(now), head), and raises
// head to it. The CAS only runs on the first call of a new second. Success
// transfers: the window's current second, from the old head to the new.
func (w *Window) advance(now time.Duration) uint64 {
	sec := raise(&w.head.second, w.tick(now))
	if w.head.slot.Load()>>slotShift < sec {
		raise(&w.head.slot, sec<<slotShift|w.slot(sec))
	}
	return sec
}

// raise makes x at least v with a CAS-max loop and returns the value x then
// holds. x only ever grows.
func raise(x *atomic.Uint64, v uint64) uint64 {
	for {
		old := x.Load()
		if v <= old {
			return old
		}
		if x.CompareAndSwap(old, v) {
			return v
		}
	}
}

// tick converts a clock reading to seconds of the window's width (see the
// package doc) since its origin (NewFrom; 0 from New and NewWidth),
// floor((now - origin) / width), with readings at or below the origin as 0
// and readings past 2^32-1 widths after it (136 years at 1 s, 13.6 at
// 100 ms) saturated to the largest second an id can hold, so that no
// reading can make one bucket's second wrap below another's. The zero
// Window's divM is 0: every reading is its second 0.
//
// Why two paths: for buckets of 1 s from the clock's 0 (wholeSeconds),
// the breaker's default, the compiler's division by the constant second is
// eight instructions fewer
// than the general multiply by divM and shift by divShift (their loads,
// the origin's subtraction and the moves MULQ needs); the compare that
// picks the path costs three (bench/instructions.sh, a time-window
// success when it still called tick: 274 instructions with the general
// path alone, 270 with both, 264 before widths). The narrower widths' path
// stays inline: in a call of its own it made its callers spill their
// arguments on every call. RecordSuccess, the bulk of the calls, needs no
// second at all in its steady state: it tests whether the reading falls
// in the head's second (261 instructions, at every width).
func (w *Window) tick(now time.Duration) uint64 {
	if w.wholeSeconds {
		if now <= 0 {
			return 0
		}
		return min(uint64(now/time.Second), maxSec)
	}
	if now <= w.origin {
		return 0
	}
	hi, _ := bits.Mul64(uint64(now-w.origin), w.divM)
	return min(hi>>(w.divShift&63), maxSec) // the mask spares Go's check of a shift of 64 or more
}
