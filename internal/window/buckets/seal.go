package buckets

import (
	"cmp"
	"math"
	"slices"
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// Moving a live window's outcomes into another (a breaker reconfigured).
//
// The breaker cannot stop its writers: each loads its state word and
// writes a bucket counter a few instructions later. So the window is
// sealed from inside, with the CASes every writer already depends on. And
// the breaker cannot make one goroutine the sealer without making others
// wait for it: any call that finds a reconfiguration half done completes
// it, so several may seal one window at once, and each must come away
// with the same outcomes. Every step is therefore idempotent: it moves a
// word to a value that says it was moved, and a sealer that finds it moved
// reads it instead.
//
//   - sealed, in Seal: head.sealed -> 1. From then on no recycle,
//     takeover (RecordCurrent) or retire moves an id: each loads it
//     after the id it would move, so a writer that loads an id Seal has
//     already moved also finds the window sealed. A judge loads it after
//     its sum (judge.go, sumAndJudge).
//   - seal, in Seal: id (g, i, s) -> (H, i, s) if g is the sealed
//     generation gen, (H+1, i, s) if another; H = gen + 2^22. A bucket
//     holds a generation in (gen - 2^23, gen], so H and H+1 are held by no
//     bucket and no writer: a sealer that finds either knows the bucket is
//     sealed, and whether it held gen. The swap fails the one recycle or
//     retire per bucket that may still be pending from a writer that
//     checked head.sealed before it was set (its CAS expects the old id),
//     and a catch-up's re-check of id.
//   - take, in Seal: each counter of the bucket (i, k) -> (i+1, k), and
//     (t, k) -> (i+1, 0) for a tag t older than i (leftovers: zero in i).
//     A counter tagged i+1 is taken: no other step tags a counter past its
//     bucket's id. An increment (i, k) -> (i, k+1) or a catch-up
//     (t, k) -> (i, 1) that lands before the take is in k; one after it
//     finds tag i+1, which reads as newer than its i, and than every
//     incarnation up to 127 recycles before i, and reports the outcome
//     dropped (an older one reads it as older and re-checks id, which has
//     moved). A catch-up whose re-check of id came before the seal CAS
//     and whose CAS comes after the take fails, as its expected word has
//     changed. So every outcome reported recorded is in one counter's
//     taken k, and every taken k is outcomes reported recorded.
//
// The swaps need no order among themselves: an outcome is one counter.

// sealAhead is how far ahead of the sealed generation a sealed id's
// generation is: outside the 2^23 generations up to it that a bucket or a
// writer may hold, with room for the two values seal uses.
const sealAhead = 1 << (genBits - 2)

// Sealed is what Seal took out of a window: the outcomes of one
// generation, second by second, with the clock they were counted on. It is
// a value: it holds no reference to the window. The zero Sealed holds
// nothing.
type Sealed struct {
	// width and origin are the sealed window's: second s began at origin
	// + s*width on the breaker's clock.
	width, origin time.Duration
	// head is the window's current second when Seal read it, after the
	// last id was sealed: no sealed second is newer.
	head uint64
	// secs are the seconds of the generation inside the window at head
	// that hold an outcome, oldest first, each with its counts by class.
	secs []sealedSecond
	// fresh: second head holds an outcome the window had not been seeded
	// with, so the window is as an outcome left it (SnapshotOwed's owed).
	fresh bool
	// owes: Judge found the trip rule holding on it, fresh (see Judge).
	owes bool
}

// Judge records whether rule trips on s with an outcome in its head second
// that its window owed a judgement (one recorded since the window was
// seeded): then a trip is owed, decided by a recorder that has not
// committed it yet, or by a judge that summed while Seal ran. Seed keeps
// that second owed (SnapshotOwed), so that the window's next reader, a
// breaker's Counts, commits the trip if the successor's rule trips too,
// rather than showing a closed breaker with a window that trips.
func (s *Sealed) Judge(rule *trip.Rule) {
	s.owes = s.fresh && rule.Trips(s.Counts())
}

// sealedSecond is one bucket's counts by class, as Seal took them.
type sealedSecond struct {
	sec              uint64
	ff, ss, sf, fast uint64
}

func (s sealedSecond) counts() window.Counts {
	return window.Counts{Calls: s.ff + s.ss + s.sf + s.fast, Failures: s.ff + s.sf, SlowCalls: s.ss + s.sf, SlowFailures: s.sf}
}

// Counts returns the sum of the sealed seconds: the window Seal's
// generation had at Seal's reading, every outcome whose Record reported
// recorded counted once.
func (s Sealed) Counts() window.Counts {
	var c window.Counts
	for _, x := range s.secs {
		c = plus(c, x.counts())
	}
	return c
}

// Seal ends the window's life and returns the outcomes of generation gen
// (low 24 bits) that it holds, per second, at now: the seconds inside the
// window at max(floor(now), head), head read once no recycle can move a
// bucket to a newer second.
//
// It is exact, for every second inside the window at that reading: an
// outcome of gen in it that Record, RecordCurrent, RecordTrip,
// RecordSuccess or RecordFailure reports recorded (before Seal or while
// it runs; none is after) is counted once, in that second of the result,
// and every outcome it counts was reported recorded. Outcomes of other generations, and of seconds that left the
// window, are not returned; they may have been reported recorded, as
// evicted ones are. Generations compare as for Record, so gen is meant to
// be the newest generation the window has seen.
//
// Once Seal has begun, a write that has not yet landed may still land and
// be counted; once it has returned, every Record of any generation, on
// every path, records nothing and reports recorded false (and trips
// false), and so does every write still in flight: a caller tells that
// from a stale generation by its own state and records the outcome
// elsewhere. A write that lands while Seal runs and is covered by a
// judgement made before Seal is judged by it (no trip); a judge that sums
// a window Seal has begun reports a trip, undecided, since the sum may
// have lost part of the window to Seal: the outcome is in what Seal
// returns, and the caller judges it again on the window it seeds with
// that (core's finishTrip does, on the successor). Snapshot of a sealed window returns what Seal has not yet
// taken, the zero Counts once it has returned. Advance does nothing to it.
//
// It may run concurrently with every method but Seed, itself included:
// every Seal of gen takes the same outcomes (each keeps those inside the
// window at its own reading), so any of the goroutines completing one
// reconfiguration may seal. On the zero Window it returns the zero Sealed.
// It allocates the result and reads and writes every bucket, O(B*S) (S
// success stripes), once.
func (w *Window) Seal(gen uint32, now time.Duration) Sealed {
	if len(w.ids) == 0 {
		return Sealed{}
	}
	w.head.sealed.Store(1)
	gen &= genMask
	held := (gen + sealAhead) & genMask
	var secs []sealedSecond
	for i := range uint64(len(w.ids)) {
		b := w.bucket(i)
		g, inc, s := unpackID(b.seal(gen, held))
		x := b.take(inc)
		if g == held && x.ff|x.ss|x.sf|x.fast != 0 {
			x.sec = s
			secs = append(secs, x)
		}
	}
	// After every seal: no bucket can be recycled for a second newer than
	// head from now on, and each recycler raised head before its recycle.
	head := w.current(now)
	secs = slices.DeleteFunc(secs, func(x sealedSecond) bool { return head-x.sec >= uint64(len(w.ids)) })
	slices.SortFunc(secs, func(a, b sealedSecond) int { return cmp.Compare(a.sec, b.sec) })
	n := len(secs)
	fresh := n > 0 && secs[n-1].sec == head && w.owes(head, secs[n-1].counts().Calls)
	return Sealed{width: w.width, origin: w.origin, head: head, secs: secs, fresh: fresh}
}

// seal moves the bucket's id to its sealed form, (held, i, s) if it holds
// generation gen, (held+1, i, s) if another, and returns the sealed id;
// one already sealed it returns as it is. head.sealed is already set, so
// the loop runs at most once more per recycle or retire that was past its
// check of head.sealed.
func (b bucket) seal(gen, held uint32) uint64 {
	other := (held + 1) & genMask
	for {
		id := b.id.Load()
		g, inc, s := unpackID(id)
		if g == held || g == other {
			return id
		}
		to := other
		if g == gen {
			to = held
		}
		n := packID(to, inc, s)
		if b.id.CompareAndSwap(id, n) {
			return n
		}
	}
}

// take moves every counter of the bucket past incarnation inc, the one
// its sealed id names, keeping inc's count, and returns inc's counts. A
// counter already moved (tag inc+1) is read, so every sealer gets the
// same counts.
func (b bucket) take(inc uint8) sealedSecond {
	x := sealedSecond{ff: takeCount(&b.ff, inc), ss: takeCount(&b.ss, inc), sf: takeCount(&b.sf, inc)}
	for k := range b.stripes() {
		x.fast += takeCount(b.cell(k), inc)
	}
	return x
}

// takeCount moves counter c past incarnation inc and returns its count in
// inc: (inc, k) -> (inc+1, k), k; (inc+1, k): already taken, k; any older
// tag -> (inc+1, 0), 0. A swap, not a load and a store: an increment
// between the two would be reported recorded and lost.
func takeCount(c *atomic.Uint64, inc uint8) uint64 {
	for {
		v := c.Load()
		t, k := unpackCount(v)
		switch t {
		case inc + 1:
			return k
		case inc:
		default:
			k = 0
		}
		if c.CompareAndSwap(v, packCount(inc+1, k)) {
			return k
		}
	}
}

// Seed makes w hold generation gen (low 24 bits) with the outcomes of s
// that fit it, and nothing else: the window a reconfigured breaker goes
// on with. w must be one that no other goroutine uses yet (fresh from
// New, NewWidth or NewFrom); whatever it held is discarded.
//
// Only a window of the same bucket width keeps outcomes, the zero Sealed
// none. It keeps the seconds of s inside its own span at max(floor(now),
// head), head being at least s's, so a smaller window keeps the newest
// seconds and a larger one all of them, each at the same instants of the
// clock whatever the two windows' origins (NewFrom); a second that falls
// before w's origin is not kept. Snapshot(gen, now) then returns their
// sum, later outcomes of gen add to them, and Clean is false while a kept
// second holds a failure or a slow call. Every bucket not kept holds
// generation gen-1, which gen's first outcome takes over, and Advance
// counts its sweeps from gen, so gen may be anywhere in the 24-bit range.
// It never allocates and never panics; on the zero Window it does
// nothing.
func (w *Window) Seed(gen uint32, s Sealed, now time.Duration) {
	if len(w.ids) == 0 {
		return
	}
	gen &= genMask
	b := uint64(len(w.ids))
	head := max(w.tick(now), w.head.second.Load())
	if s.width != 0 {
		head = max(head, w.tick(s.at(s.head)))
	}
	for i := range b {
		k := w.bucket(i)
		_, inc, _ := unpackID(k.id.Load())
		k.fill(packID((gen-1)&genMask, inc+1, 0), sealedSecond{})
	}
	w.seededSec, w.seededCalls = head, 0
	if s.width == w.width {
		// Both origins are whole seconds and width divides one, so the
		// offset is whole seconds of the width.
		off := int64((s.origin - w.origin) / w.width)
		for _, x := range s.secs {
			sec := int64(x.sec) + off
			if sec < 0 || uint64(sec) > head || head-uint64(sec) >= b {
				continue
			}
			k := w.bucket(w.slot(uint64(sec)))
			_, inc, _ := unpackID(k.id.Load())
			k.fill(packID(gen, inc, uint64(sec)), x)
			if uint64(sec) == head && !s.owes {
				w.seededCalls = x.counts().Calls
			}
			if x.ff|x.ss|x.sf != 0 {
				raise(&w.head.lastUnclean, uint64(sec)+1)
			}
		}
	}
	raise(&w.head.second, head)
	raise(&w.head.slot, head<<slotShift|w.slot(head))
	w.head.swept.Store(uint64(gen))
	w.head.full.Store(0)
	w.head.others.Inc() // no cached sum of the other buckets outlives them
	w.head.sealed.Store(0)
}

// fill makes the bucket hold x under id: every counter in id's
// incarnation, the fast successes in stripe 0's cell (a reader sums the
// stripes), no judgement. Seed's alone: nobody else holds the window.
func (b bucket) fill(id uint64, x sealedSecond) {
	_, inc, _ := unpackID(id)
	b.id.Store(id)
	b.ff.Store(packCount(inc, x.ff))
	b.ss.Store(packCount(inc, x.ss))
	b.sf.Store(packCount(inc, x.sf))
	b.judge.Store(packCount(inc, 0))
	for k := range b.stripes() {
		n := uint64(0)
		if k == 0 {
			n = x.fast
		}
		b.cell(k).Store(packCount(inc, n))
	}
}

// at is the clock reading at which second sec of the sealed window began,
// saturated at the largest reading.
func (s Sealed) at(sec uint64) time.Duration {
	d := time.Duration(sec) * s.width // at most 2^32 s: no overflow
	if s.origin > math.MaxInt64-d {
		return math.MaxInt64
	}
	return s.origin + d
}
