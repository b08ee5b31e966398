package buckets

import (
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/window"
)

// A bucket holds the outcomes of one second of one breaker generation. It is
// five words and one cell in each success stripe, each changed only by
// compare-and-swap:
//
//	id = | gen (24 bits) | inc (8 bits) | sec (32 bits) |
//	      63          40   39        32   31           0
//
//	ff, ss, sf = | tag (8 bits) | count (56 bits) |
//	              63         56   55             0
//
// id names what the bucket currently holds:
//   - gen: the breaker generation of its outcomes (R8), compared with
//     wrap-around (see newerGen).
//   - inc: the incarnation, +1 (mod 256) at every recycle, i.e. every time
//     the bucket is handed to a newer (gen, sec).
//   - sec: the second it holds, in seconds of the window's width (one
//     bucket width, see the package doc) since the clock base. 32 bits
//     last 136 years at 1 s and 13.6 years at 100 ms; later readings
//     saturate (see Window.tick).
//
// Every outcome is counted in exactly one counter, by its class: ff (failed,
// not slow), ss (slow, not failed), sf (slow and failed), or the bucket's
// cell in its success stripe (fast successes: neither; see Window.succ).
// The window's counts are sums of classes (calls: all four; failures:
// ff + sf; slow calls: ss + sf), so an outcome is one atomic write, a
// Snapshot can never hold part of one, and the invariants of window.Counts
// hold by construction. Each counter carries the tag of the incarnation its
// count belongs to. A counter whose tag is
// older than id's inc holds leftovers of a recycled incarnation and means 0
// in the current one. Counters are never cleared by a plain store: a
// counter only moves forward, to a newer incarnation, by CAS, so an
// increment made for the current incarnation can never be wiped by a late
// clear. That is the write cep21/circuit's lock-free roll lost.
//
// The count sits in the low bits so that an increment is a plain +1 on the
// word; it could carry into the tag only after 2^56 outcomes in one second.
//
// Every CAS, as (before) -> (after), and what a successful swap transfers:
//   - recycle, in Record: id (g0, i, s0) -> (g, i+1, s), where (g, s) is
//     newer than (g0, s0), or (in RecordCurrent) g is the caller's current
//     generation and g0 any other. Transfers the bucket to second s of generation
//     g. Incarnation i is abandoned (its second left the window, or its
//     generation is dead) and the winner, alone, owes the reset.
//   - reset, in advance: counter (t, k) -> (i, 0), t older than i, id
//     still naming i. Transfers the counter to incarnation i; k belonged
//     to an abandoned incarnation and is discarded.
//   - catch-up, in addTagged: counter (t, k) -> (i, 1), t older than i,
//     id still naming i. A writer of i got there before the recycler's
//     reset: transfers the counter to i and counts the writer's outcome in
//     the same swap, so no writer waits for the recycler.
//   - increment, in addTagged: counter (i, k) -> (i, k+1). Adds one
//     outcome to incarnation i; fails, and is retried on the new value, if
//     the counter changed since it was loaded.
//   - head, in Window.advance: h -> s, s > h. Moves the newest second seen
//     forward; it never moves back (R14).
//   - retire, in Window.Advance: id (g0, i, s) -> (g-1, i+1, s), where g0
//     is 2^21 to 2^23-1 generations behind the sweep's g. Like a recycle:
//     incarnation i is abandoned (its generation is long dead) and the
//     winner owes the reset; the bucket then holds no outcome, under a
//     generation every current writer reads as older.
//   - sealed, seal and take, in Window.Seal: the window's sealed word
//     0 -> 1, then id (g, i, s) -> (g+2^23, i, s), then every counter
//     (t, k) -> (i+1, 0), k taken if t == i. A recycle and a retire load
//     the sealed word after id and give up once it is set. seal.go argues
//     why every outcome reported recorded is taken once.
//
// Within the bound below, no CAS moves a tag backwards, and none touches a
// counter that already carries the target incarnation or a newer one: the reset and a writer's
// catch-up may run in either order and the writer's outcome survives.
//
// Bound of the 8-bit incarnation. "Older" is judged mod 256, as
// (i - t) mod 256 in 1..127, so only a goroutine that has fallen 128 or
// more recycles behind the bucket can misjudge a tag. Such a goroutine must
// never move a tag: a tag moved to an incarnation that looks newer than
// the live one makes every later writer of the bucket drop its outcome
// until the bucket is recycled far enough to pass it (without the re-check
// below, TestStress_GenerationChangesUnderLoad, with generations changing
// every microsecond, wedged buckets this way about one run in 40). That is
// why reset and catch-up re-read id just before their CAS and give up when
// it no longer names their incarnation: the recycler stops (a newer one
// owns the reset), the writer reports its outcome dropped. What the 8 bits
// still allow:
//   - A writer paused across 256 or more recycles of its bucket may find a
//     counter whose tag aliases its own incarnation and add its outcome to
//     the live one: an over-count of one outcome, never a wedged bucket.
//   - A goroutine paused between its id re-check and its counter CAS (two
//     adjacent instructions) while the bucket is recycled 129 or more times
//     and no other goroutine moves that counter may wedge the bucket as
//     above.
//
// Each recycle of a bucket needs a newer second for it (B seconds later) or
// a breaker transition followed by an outcome in it, so both need a
// goroutine paused for at least 128*B seconds or 128 such transitions. B
// seconds of the width are the window's span whatever the width (10
// buckets of 100 ms span 1 s, as 1 bucket of 1 s does), so the bound in
// real time does not shrink with the width.
// Within that bound no outcome is lost or miscounted.
//
// Where the words live: the ids of all buckets sit together in one slice
// and the counters in another (Window.ids, Window.counts), not side by
// side. Every Record loads its bucket's id and then raises a counter; were
// they on one cache line, a core's counter CAS would evict the id from
// every other core, so each record would miss twice. An id is
// written once per recycle, so its line stays shared in every core's cache.
type bucket struct {
	id *atomic.Uint64
	*counters
	// w and i name the bucket's cells in the window's success stripes
	// (Window.succ). Four words: a bucket is passed by value on the hot
	// path, and a slice header here took it to seven and cost a fast
	// success more than its striping saved on one core.
	w *Window
	i uint64
}

// cell is the bucket's counter of fast successes in stripe k. It carries
// an incarnation tag like the other counters and follows the same rules.
func (b bucket) cell(k uint64) *atomic.Uint64 { return &b.w.succ[k*uint64(len(b.w.ids))+b.i] }

// stripes is the number of success stripes (zero for a bucket outside a
// window, as some tests build).
func (b bucket) stripes() uint64 {
	if b.w == nil {
		return 0
	}
	return b.w.stripeMask + 1
}

// counters are a bucket's three class counters and its judgement word. All
// are atomic.Uint64 (8 bytes, no padding), so counters is 32 bytes and every
// field of every element of a []counters is 64-bit aligned, which atomic
// 64-bit operations need on 386 and ARM; the same holds for []atomic.Uint64
// of ids.
type counters struct {
	ff atomic.Uint64 // failed, not slow
	ss atomic.Uint64 // slow, not failed
	sf atomic.Uint64 // slow and failed
	// judge is what the last judgement of the trip rule in this
	// incarnation left for the outcomes after it (judge.go). It is tagged
	// like the counters and moved forward by the same reset, so no
	// judgement outlives the second and generation it was made for.
	judge atomic.Uint64
}

const (
	genBits   = 24
	incBits   = 8
	secBits   = 32
	countBits = 64 - incBits

	genMask   = 1<<genBits - 1
	incMask   = (1<<incBits - 1) << secBits // inc's bits in an id
	maxSec    = 1<<secBits - 1
	countMask = 1<<countBits - 1
)

// packID builds an id word. gen must already be masked to 24 bits and sec
// be at most maxSec, so that no field spills into its neighbour.
func packID(gen uint32, inc uint8, sec uint64) uint64 {
	return uint64(gen)<<(incBits+secBits) | uint64(inc)<<secBits | sec
}

func unpackID(id uint64) (gen uint32, inc uint8, sec uint64) {
	return uint32(id >> (incBits + secBits)), uint8(id >> secBits), id & maxSec
}

func packCount(tag uint8, count uint64) uint64 {
	return uint64(tag)<<countBits | count
}

func unpackCount(c uint64) (tag uint8, count uint64) {
	return uint8(c >> countBits), c & countMask
}

// newerGen reports whether generation a is newer than b: serial-number
// arithmetic on 24 bits, a is newer iff (a-b) mod 2^24 is in (0, 2^23). It
// keeps the order right across a 24-bit wrap for any two generations less
// than 2^23 apart, which Advance keeps every bucket within; after a longer
// gap only RecordCurrent can take the bucket over.
func newerGen(a, b uint32) bool {
	d := (a - b) & genMask
	return d != 0 && d < 1<<(genBits-1)
}

// olderInc reports whether counter tag t belongs to an incarnation older
// than inc: (inc - t) mod 256 in 1..127. See bucket for why 127 recycles
// is a safe horizon.
func olderInc(t, inc uint8) bool {
	d := inc - t
	return d != 0 && d < 1<<(incBits-1)
}

// add counts one failed or slow outcome in the incarnation named by id,
// which the caller loaded from b.id: one increment of its class's counter
// (a fast success goes to its stripe instead, Window.record).
//
// It reports false when the bucket was recycled after the caller loaded
// id: its second (or generation) is gone and the outcome no longer counts
// anywhere.
func (b bucket) add(id uint64, failure, slow bool) bool {
	c := &b.ff
	switch {
	case failure && slow:
		c = &b.sf
	case slow:
		c = &b.ss
	}
	return b.addTagged(c, id)
}

// addTagged adds one to counter c in the incarnation named by id; false
// means the bucket has moved on from it.
func (b bucket) addTagged(c *atomic.Uint64, id uint64) bool {
	_, inc, _ := unpackID(id)
	for {
		v := c.Load()
		tag, _ := unpackCount(v)
		var next uint64
		switch {
		case tag == inc:
			next = v + 1
		case olderInc(tag, inc) && b.id.Load() == id:
			// The recycler has not reset c yet: catch it up ourselves,
			// counting our outcome in the same swap; the recycler's later
			// reset sees tag inc and leaves c alone. The id re-check keeps
			// a writer that fell behind from moving a tag it misjudged.
			next = packCount(inc, 1)
		default:
			return false
		}
		if c.CompareAndSwap(v, next) {
			return true
		}
	}
}

// reset moves every counter to the incarnation named by id with count 0,
// unless a writer already moved it there. Only the goroutine whose recycle
// CAS installed id calls it, and it stops as soon as the bucket is
// recycled again: the next recycler owns the reset from then on.
func (b bucket) reset(id uint64) {
	if !b.advance(&b.ff, id) || !b.advance(&b.ss, id) || !b.advance(&b.sf, id) || !b.advance(&b.judge, id) {
		return
	}
	for k := range b.stripes() {
		if !b.advance(b.cell(k), id) {
			return
		}
	}
}

// advance moves counter c to the incarnation named by id, count 0, if its
// tag is older; it reports false, without touching c, once id is no longer
// current.
func (b bucket) advance(c *atomic.Uint64, id uint64) bool {
	_, inc, _ := unpackID(id)
	for {
		v := c.Load()
		if tag, _ := unpackCount(v); !olderInc(tag, inc) {
			return true
		}
		if b.id.Load() != id {
			return false
		}
		if c.CompareAndSwap(v, packCount(inc, 0)) {
			return true
		}
	}
}

// retire moves the bucket to a new, empty incarnation of generation gen-1
// if it holds a generation 2^21 to 2^23-1 behind gen (see Window.Advance),
// and resets its counters as a recycler does; it reports whether it did.
// A bucket recycled in the meantime is judged again on its new id. It
// leaves a sealed window alone, as a recycle does (seal.go): a late sweep,
// for a generation up to 2^23-2^21 older than a bucket's, reads that
// bucket's sealed id (its generation + 2^23) as 2^21 to 2^23 behind, and
// its reset would wipe the counts Seal has not yet taken.
func (b bucket) retire(gen uint32, sealed *atomic.Uint64) bool {
	for {
		id := b.id.Load()
		g, inc, sec := unpackID(id)
		if d := (gen - g) & genMask; d < retireAfter || d >= 1<<(genBits-1) || sealed.Load() != 0 {
			return false
		}
		next := packID((gen-1)&genMask, inc+1, sec)
		if b.id.CompareAndSwap(id, next) {
			b.reset(next)
			return true
		}
	}
}

// readFailedOrSlow returns the failed and slow outcomes of incarnation inc: every
// count but the fast successes, which readFast adds. The caller must check
// that id still names inc afterwards; only then are all three from inc.
func (b bucket) readFailedOrSlow(inc uint8) window.Counts {
	ff, ss, sf := countIn(b.ff.Load(), inc), countIn(b.ss.Load(), inc), countIn(b.sf.Load(), inc)
	return window.Counts{Calls: ff + ss + sf, Failures: ff + sf, SlowCalls: ss + sf, SlowFailures: sf}
}

// readFast returns the fast successes of incarnation inc, summed over the
// stripes, with the same proviso as readFailedOrSlow.
func (b bucket) readFast(inc uint8) uint64 {
	var n uint64
	for k := range b.stripes() {
		n += countIn(b.cell(k).Load(), inc)
	}
	return n
}

// read is readFailedOrSlow and readFast together: the bucket's counts.
func (b bucket) read(inc uint8) window.Counts {
	c := b.readFailedOrSlow(inc)
	c.Calls += b.readFast(inc)
	return c
}

// countIn is the count of counter word v in incarnation inc: a counter not
// yet moved to inc holds only abandoned outcomes, which count as 0.
func countIn(v uint64, inc uint8) uint64 {
	tag, count := unpackCount(v)
	if tag != inc {
		return 0
	}
	return count
}
