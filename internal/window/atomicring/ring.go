// Package atomicring is a lock-free, allocation-free count-based sliding
// window: the aggregate of the last W counted outcomes (calls), W in
// 1..255, exact sums that are never negative (the window membership rule of
// https://github.com/casbreaker/casbreaker/blob/main/docs/semantics.md).
//
// The whole aggregate, the write cursor and the generation live in one
// 64-bit word advanced by compare-and-swap, so every value a Ring returns is
// one committed state: never torn, never negative, always within the
// invariants of window.Counts. The word's layout and the protocol that keeps
// it exact are in docs/design.md (The count window) in the repository.
//
// Besides recording and snapshots, which window/atomicring offers on their
// own, it holds the breaker's side of the window: the trip decided in the
// step that records (RecordTrip, Claim), the fast success of core's Done,
// and the generation advances of core's transitions.
package atomicring

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/internal/cacheline"
	"github.com/casbreaker/casbreaker/internal/trip"
	"github.com/casbreaker/casbreaker/window"
)

// MaxSize is the largest window size, in calls: four counts and the cursor
// of the aggregate word need bits.Len(W) bits each, and 255 is the largest W
// that still leaves room for a lap counter beside them (docs/design.md, The
// count window, has the word's layout).
const MaxSize = 255

// ErrSize is returned, wrapped with the rejected size, by New for a window
// size outside 1..MaxSize. Test for it with errors.Is.
var ErrSize = errors.New("atomicring: window size must be between 1 and 255 calls")

// Ring is a count-based sliding window over the last W calls. Outcomes are
// tagged with a breaker generation: a ring holds one generation at a time,
// an outcome of a newer generation starts an empty window (the breaker's
// new state starts fresh), and an outcome of an older one is stale and
// dropped.
//
// Only the low 16 bits of a generation are kept. Newer and older are decided
// by serial-number arithmetic on them: a generation 1..2^15-1 ahead of the
// ring's is newer, one 2^15..2^16-1 ahead is older, and one 2^16 apart is the
// same. A caller whose generation can run 2^15 or more ahead of the last one
// it recorded must expect its outcomes to be reported stale, and calls Reset
// when it knows better (the breaker does, from its state word).
//
// A Ring made by New holds generation 0 with an empty window. The zero Ring
// is not usable: use New (recording on it panics with a message that says
// so; its snapshots are empty). All methods of a Ring made by New are safe for
// concurrent use with each other, allocate nothing, never block (lock-free:
// a call retries only after another call's commit) and never panic.
type Ring struct {
	// hot is first so that its 64-bit word is the first word of the
	// allocation, which Go aligns to 8 bytes even on 32-bit platforms, where
	// a misaligned 64-bit atomic panics.
	hot hot
	geometry
	// The padding makes a Ring a whole number of cache lines, so that its
	// allocation, in a size class of such multiples, starts on a line and
	// hot has its line to itself (at 224 bytes, about half of all Rings
	// shared A's line with a neighbour).
	// (Never zero bytes: a zero-size last field would be padded itself.)
	_ [cacheLine - unsafe.Sizeof(geometry{})%cacheLine]byte
}

// cacheLine is the padding's line size (cacheline.Size has the reason).
const cacheLine = cacheline.Size

// geometry is what a Ring reads but never writes after New.
type geometry struct {
	// slots holds the outcome of each position; make aligns the first
	// element to 8 bytes and every element is 8 bytes, so all are aligned.
	slots []atomic.Uint64

	// The geometry of the packed words for this W.
	size        uint64 // W
	field       uint64 // mask of one k-bit count field, k = bits.Len(W)
	sShift      uint
	fShift      uint
	nShift      uint
	posShift    uint
	lapShift    uint   // 3 + 5k
	lapMask     uint64 // 2^L - 1, L = 44 - 5k
	uncleanMask uint64 // A's failure and slow counts: zero in a clean window (no failure, no slow call)
	// delta[out] is what an outcome with bits out adds to A's counts: one
	// addition counts it in, one subtraction counts it out.
	delta [8]uint64
}

// hot is the aggregate word on a cache line of its own: 32 bytes of words
// and 32 of padding make 64, so the read-only fields after it, which every
// claim reads, never share the line that every successful CAS invalidates.
// The two read-only words beside A are the ones RecordFastSuccess needs, so
// a healthy window's success touches this one line, which nothing writes
// while the window stays healthy. sealed, written once in a ring's life,
// is read only by Reset.
type hot struct {
	a atomic.Uint64
	// healthyMask and the complement of notHealthy recognise, in one AND
	// and one compare, a word whose window is full of fast successes of one
	// generation and not closed (see RecordFastSuccess); the gen bits of
	// ^notHealthy are zero. It is kept complemented so that the zero Ring,
	// whose fields are all zero, matches no word: its first record takes
	// the slow path, which panics naming New, instead of passing for a
	// healthy window of generation 0.
	healthyMask uint64
	notHealthy  uint64
	// sealed is 1 once Seal has begun: a sealed ring holds generation
	// gen+sealAhead, which a ring also reaches by plain records, so only
	// this says that Reset must leave it alone.
	sealed atomic.Uint64 // 8 bytes on every platform, so the padding is too
	_      [32]byte
}

// New returns an empty ring of size calls that holds generation 0. It
// returns an error wrapping ErrSize when size is outside 1..MaxSize; it
// never panics.
func New(size int) (*Ring, error) {
	if size < 1 || size > MaxSize {
		return nil, fmt.Errorf("%w: got %d", ErrSize, size)
	}
	k := uint(bits.Len(uint(size)))
	l := 44 - 5*k
	r := &Ring{geometry: geometry{
		slots:       make([]atomic.Uint64, size),
		size:        uint64(size),
		field:       1<<k - 1,
		sShift:      3 + k,
		fShift:      3 + 2*k,
		nShift:      3 + 3*k,
		posShift:    3 + 4*k,
		lapShift:    3 + 5*k,
		lapMask:     1<<l - 1,
		uncleanMask: (1<<k-1)<<(3+k) | (1<<k-1)<<(3+2*k),
	}}
	r.hot.healthyMask = genMask | closedBit | r.uncleanMask | r.field<<r.nShift
	r.hot.notHealthy = ^(uint64(size) << r.nShift)
	for out := range r.delta {
		f, s := uint64(out)>>1&1, uint64(out)>>2&1
		r.delta[out] = f<<r.fShift | s<<r.sShift | f&s<<sfShift
	}
	return r, nil
}

// Size returns the window size W, in calls.
func (r *Ring) Size() int { return int(r.size) }

// Record adds one counted outcome (a failure or a success, either of which
// may be slow) recorded under breaker generation gen, of which only the low
// 16 bits are used.
//
// It returns the window's aggregate right after this outcome entered it and
// ok = true: the value committed by the same compare-and-swap that added the
// outcome, so it is a linearizable snapshot that includes this call. When gen
// is older than the generation the ring holds, or the ring's window of gen
// is closed by a trip (RecordTrip), the outcome is stale: nothing changes
// and Record returns the zero Counts and ok = false. A gen newer than the
// ring's first empties the window, then counts the outcome there. Record may
// run concurrently with every other call on r.
func (r *Ring) Record(gen uint32, failure, slow bool) (c window.Counts, ok bool) {
	c, v := r.RecordTrip(gen, failure, slow, nil)
	return c, v == Recorded
}

// RecordFastSuccess records a success that was not slow, under generation
// gen (low 16 bits), when that changes nothing: the ring holds gen, its
// window is not closed and holds W calls, none of them a failure or slow.
// Then the last W calls are W fast successes before and after, whichever
// position the next claim takes, so the outcome is counted by one load and
// no write (the window's Counts are exactly as they were). It reports
// whether it did; false means nothing was recorded and the caller records
// the success with RecordTrip. It may run concurrently with every other
// call on r, and it is small enough to inline.
func (r *Ring) RecordFastSuccess(gen uint32) bool {
	return r.hot.a.Load()&r.hot.healthyMask == uint64(uint16(gen))<<genShift|^r.hot.notHealthy
}

// Verdict is what RecordTrip did with an outcome.
type Verdict uint8

const (
	// Recorded: the outcome is in the window and the rule does not trip.
	Recorded Verdict = iota
	// Tripped: the outcome is in the window, the rule trips on the result,
	// and the same swap closed the window of this generation: no later
	// outcome of the generation enters it. The caller commits the trip.
	Tripped
	// AfterTrip: the window of this generation was already closed by a trip
	// (another caller's Tripped), so the outcome was not counted. The trip
	// may not be committed yet; the caller may commit it for the other.
	AfterTrip
	// Stale: the generation is older than the ring's; nothing changed.
	Stale
)

// RecordTrip is Record with the trip rule, which a closed breaker judges
// after every counted outcome, decided in the same compare-and-swap that
// adds the outcome: when rule trips on the window with this outcome in it,
// the window of gen is closed at once, so the outcome that warranted the
// trip is the last one it holds and every snapshot shows it closed. That
// is what lets a breaker make a record and its trip one linearizable step.
// A nil rule never trips, as in Record. The returned Counts are the window with the outcome in it (Recorded,
// Tripped) or zero (AfterTrip, Stale). It may run concurrently with every
// other call on r.
func (r *Ring) RecordTrip(gen uint32, failure, slow bool, rule *trip.Rule) (window.Counts, Verdict) {
	out := outBits(failure, slow)
	if out == present && r.RecordFastSuccess(gen) {
		return r.counts(^r.hot.notHealthy), Recorded
	}
	a, v := r.claim(uint16(gen), out, rule)
	if v > Tripped {
		return window.Counts{}, v
	}
	return r.counts(a), v
}

// RecordOutcome is RecordTrip without the counts: it returns only the
// verdict, which is all a breaker needs, so nothing is unpacked for a
// caller that drops it. A success (not failed, not slow) in a window full
// of fast successes is counted by one load, as in RecordFastSuccess. It
// may run concurrently with every other call on r; on the zero Ring it
// panics naming New, as RecordTrip does.
func (r *Ring) RecordOutcome(gen uint32, failure, slow bool, rule *trip.Rule) Verdict {
	if !failure && !slow && r.RecordFastSuccess(gen) {
		return Recorded
	}
	return r.Claim(gen, failure, slow, rule)
}

// Claim is RecordOutcome for a caller that has already tried
// RecordFastSuccess (or knows the outcome is not a fast success): it
// always claims a position, one compare-and-swap (more only after losing
// one to another claim), with the same verdict RecordTrip would give. It
// may run concurrently with every other call on r; on the zero Ring it
// panics naming New.
func (r *Ring) Claim(gen uint32, failure, slow bool, rule *trip.Rule) Verdict {
	_, v := r.claim(uint16(gen), outBits(failure, slow), rule)
	return v
}

// claim adds the outcome out to the window of generation g by one claim
// (the protocol below), judging rule in the same swap, and returns A as
// the swap left it with the verdict (A is meaningless for AfterTrip and
// Stale).
func (r *Ring) claim(g uint16, out uint64, rule *trip.Rule) (uint64, Verdict) {
	r.mustBeNew()
	// The claim works on A itself, never on an unpacked copy: a struct of
	// more than four fields lives in memory, and its copies cost more than
	// both atomics together.
	in := r.delta[out]
	backoff := uint32(backoffFirst)
	for {
		a := r.hot.a.Load()
		if uint16(a>>genShift) != g {
			if g-uint16(a>>genShift) >= 1<<15 {
				return 0, Stale
			}
			// Losing this swap means someone else moved A; either way the
			// next load decides again.
			r.hot.a.CompareAndSwap(a, uint64(g)<<genShift)
			continue
		}
		if a&closedBit != 0 {
			return 0, AfterTrip
		}
		if a&present != 0 && !r.flush(a) {
			continue
		}
		next := a&^pendMask | out
		pos := a >> r.posShift & r.field
		if a>>r.nShift&r.field == r.size {
			next -= r.delta[r.slots[pos].Load()&pendMask]
		} else {
			next += 1 << r.nShift
		}
		next = r.advancePos(next+in, pos)
		// A window with no failure and no slow call trips no rule (every
		// threshold needs one): a clean window skips the rule's arithmetic.
		tripped := rule != nil && next&r.uncleanMask != 0 && rule.Trips(r.counts(next))
		if tripped {
			next |= closedBit
		}
		if r.hot.a.CompareAndSwap(a, next) {
			if tripped {
				return next, Tripped
			}
			return next, Recorded
		}
		// Lost to another claim: back off before the next load (see
		// backoffFirst).
		procyield(backoff)
		backoff = min(2*backoff, backoffMax)
	}
}

// mustBeNew panics, naming New, on the zero Ring (a Ring made by New has a
// healthyMask), which would otherwise fail on an index into its missing
// slots.
func (r *Ring) mustBeNew() {
	if r.hot.healthyMask == 0 {
		panic("atomicring: Ring used without New: the zero Ring has no slots")
	}
}

// outBits is the out bits of one counted outcome: present, and failBit
// and slowBit as flagged.
func outBits(failure, slow bool) uint64 {
	out := uint64(present)
	if failure {
		out |= failBit
	}
	if slow {
		out |= slowBit
	}
	return out
}

// advancePos is next with pos moved on from pos, the position its claim
// takes: to pos+1, or to 0 with one more lap when pos is the last.
func (r *Ring) advancePos(next, pos uint64) uint64 {
	if pos+1 < r.size {
		return next + 1<<r.posShift
	}
	// lap counts the wrap mod 2^L: the carry out of lap must not reach the
	// closed bit above it.
	lap := r.lapMask << r.lapShift
	return next&^(r.field<<r.posShift|lap) | (next+1<<r.lapShift)&lap
}

// backoffFirst and backoffMax bound the PAUSE instructions a claim spins
// after a lost swap, before its next load. Every claim must be ordered
// against every other, so two cores on one ring take turns on A's cache
// line; retrying at once makes each load and swap a transfer of that
// line, and the loser's retry steals it back mid-claim. A short spin,
// doubled on every loss up to a cap, lets the winner run a few claims on a
// hot line (docs/benchmarks.md, What a call costs, and what stops it scaling), and one goroutine
// never loses, so it costs nothing there. The cap bounds what one record can
// spin: 512 PAUSEs, tens of microseconds on CPUs whose PAUSE is slow,
// reached after five losses in a row.
const (
	backoffFirst = 16
	backoffMax   = 512
)

// procyield spins for cycles PAUSE instructions, as the runtime's own
// spinning does; the runtime keeps it reachable by linkname.
//
//go:linkname procyield runtime.procyield
func procyield(cycles uint32)

// Reset makes the ring hold generation gen (low 16 bits) with an empty
// window, unless it already holds gen or Seal has sealed it (for any
// generation: a sealed ring serves no one, and a Reset racing the seal
// either lands first, and is sealed with it, or changes nothing). It is for a caller that knows gen is
// current although Record reported it stale: a ring that saw no outcome while
// the generation advanced 2^15 or more reads the current generation as
// older, and only a caller with an authority on the generation (the
// breaker's state word) can tell. It may run concurrently with every other
// call on r; a Record of another generation racing with it may reset the
// ring again. A Reset that brings back a generation the ring held before,
// while a Record of that generation's earlier stay is still between its
// read of the leaving outcome and its swap, is the one way to shorten the
// bound on such a paused Record (docs/design.md, The count window).
func (r *Ring) Reset(gen uint32) {
	g := uint16(gen)
	for {
		a := r.hot.a.Load()
		// A sealed ring keeps its sealed window for good: a record that
		// found the generation current a moment before the seal must not
		// undo it (the breaker forwards the record instead). The flag is
		// set before Seal's swap, so a Reset whose swap would follow that
		// swap finds it, on the load after its swap failed. It is not read
		// from A: a ring that holds gen+sealAhead from records alone
		// (2^14 trips on) is not sealed, and Reset must take it back.
		if uint16(a>>genShift) == g || r.hot.sealed.Load() != 0 || r.hot.a.CompareAndSwap(a, uint64(g)<<genShift) {
			return
		}
	}
}

// Advance makes the ring hold generation gen (low 16 bits) with an empty
// window if it holds an older one (serial arithmetic, as in Record), and
// otherwise changes nothing. A caller that advances the ring on every
// generation it commits keeps the ring's 16 bits within a few generations
// of its own, so a window left untouched for 2^16 generations can never
// pass for a current one; a late Advance of a generation already passed is
// harmless. It may run concurrently with every other call on r.
func (r *Ring) Advance(gen uint32) { r.moveTo(uint16(gen), true) }

// moveTo makes the ring hold generation g with an empty window, unless it
// holds g already or, with onlyForward, a generation newer than g.
func (r *Ring) moveTo(g uint16, onlyForward bool) {
	for {
		a := r.hot.a.Load()
		d := g - uint16(a>>genShift)
		// Success transfers: the ring to generation g, empty, as the
		// newer-generation swap in Record does.
		if d == 0 || onlyForward && d >= 1<<15 || r.hot.a.CompareAndSwap(a, uint64(g)<<genShift) {
			return
		}
	}
}

// Snapshot returns the window's aggregate if the ring holds generation gen
// (low 16 bits), else the zero Counts: a newer generation's window starts
// empty and an older one's is gone. It is one atomic load, so it is never
// torn, and it may run concurrently with every other call on r.
func (r *Ring) Snapshot(gen uint32) window.Counts {
	c, _ := r.SnapshotClosed(gen)
	return c
}

// SnapshotClosed is Snapshot, and from the same load whether a RecordTrip
// closed the window of gen (its trip may not be committed yet).
func (r *Ring) SnapshotClosed(gen uint32) (c window.Counts, closed bool) {
	a := r.hot.a.Load()
	if uint16(a>>genShift) != uint16(gen) {
		return window.Counts{}, false
	}
	return r.counts(a), a&closedBit != 0
}

// The ring's whole state is one packed word, A, and W slots. A holds the
// aggregate and the cursor together, so one compare-and-swap both claims a
// position and changes the counts: no reader can see one without the other,
// and Snapshot is a single load. With k = bits.Len(W) (1 for W = 1, 7 for
// W = 100, 8 for W = 255), every count 0..W fits in k bits, and
// L = 44 - 5k is what is left for the lap (39 for W = 1, 9 for W = 100, 4
// for W = 255):
//
//	A:
//	bits          width  field  meaning
//	 0..2           3    pend   outcome of the last claim, which its slot may
//	                            not hold yet: bit 0 valid, 1 failure, 2 slow
//	 3..            k    sf     slow failures in the window
//	 3+k..          k    s      slow calls in the window
//	 3+2k..         k    f      failures in the window
//	 3+3k..         k    n      calls in the window, 0..W
//	 3+4k..         k    pos    position the next claim takes, 0..W-1
//	 3+5k..46       L    lap    times pos wrapped to 0, mod 2^L
//	47              1    closed the window of gen is closed by a trip
//	48..63         16    gen    low 16 bits of the breaker generation
//
//	slot:
//	 0..2           3    out    bit 0 present, 1 failure, 2 slow
//	 3..46         44    ver    +1 on every write to this slot, mod 2^44
//	47              1    -      zero
//	48..63         16    gen    generation of the claim whose outcome it is
//
// A zero slot has never been written; out carries pend's bits unchanged,
// present included, so a zero slot never looks like a written one. gen and
// out sit where A has them, so one mask compares a slot with A's pend.
//
// A claim (one iteration of Record's loop) loads A, makes sure pend is in
// the slot before pos (the flush: written only while A is still the value
// it loaded, and only if the slot does not hold it already), reads the
// leaving outcome from slot pos when the window is full, and swaps A for
// the new counts with its own outcome as pend. A lost swap means another
// claim committed, so the ring is lock-free. Why this is exact under any
// interleaving, what each swap transfers, why a stalled flush cannot land,
// and the one bound (A returning to a value it held while a claim is
// descheduled) are in docs/design.md, The count window; model_test.go
// checks both sides of that bound.
const (
	present = 1 << 0
	failBit = 1 << 1
	slowBit = 1 << 2

	pendMask  = 1<<3 - 1
	sfShift   = 3
	closedBit = 1 << 47
	genShift  = 48
	genMask   = (1<<16 - 1) << genShift

	verOne  = 1 << 3               // ver's unit in a slot
	verMask = 1<<47 - 1 - pendMask // ver's bits in a slot
)

// counts reads the aggregate out of A.
func (r *Ring) counts(a uint64) window.Counts {
	return window.Counts{
		Calls:        a >> r.nShift & r.field,
		Failures:     a >> r.fShift & r.field,
		SlowCalls:    a >> r.sShift & r.field,
		SlowFailures: a >> sfShift & r.field,
	}
}

// flush makes sure the outcome pending in A, loaded as a, is in its slot.
// It reports false when A has moved on, so the caller must load A again.
// Past its first lap, a generation leaves a slot that already holds the
// outcome of that generation as it is: in a healthy stream, a success
// replacing a success writes nothing. In lap 0 every flush writes, so that
// each slot's ver moves once the ring (re)starts a generation.
func (r *Ring) flush(a uint64) bool {
	q, lap := r.pendSlot(a)
	want := a & (genMask | pendMask)
	slot := &r.slots[q]
	for {
		s := slot.Load()
		if lap != 0 && s&(genMask|pendMask) == want {
			return true
		}
		if r.hot.a.Load() != a {
			return false
		}
		if slot.CompareAndSwap(s, want|(s+verOne)&verMask) {
			return true
		}
	}
}

// pendSlot is where the outcome pending in A, loaded as a, belongs: q, the
// position before pos, and the lap in which its claim took q.
func (r *Ring) pendSlot(a uint64) (q, lap uint64) {
	q, lap = a>>r.posShift&r.field, a>>r.lapShift&r.lapMask
	if q == 0 {
		q, lap = r.size, lap-1
	}
	return q - 1, lap
}

// Calls copies the outcomes in the window of generation gen (low 16 bits)
// into calls, oldest first, one per call as bit 0 failure and bit 1 slow,
// and returns how many there are (0 when the ring holds another
// generation) and whether a RecordTrip closed that window. calls must hold
// Size elements. The outcomes are one committed state of the window, the
// one Snapshot would have summed at the same instant: it reads A, the
// slots of the outcomes before the newest (which A's pend holds), and A
// again, and reads again when a claim committed in between. It allocates
// nothing and may run concurrently with every other call on r; it retries
// only after another call's commit, so a stream of records that never
// pauses for the length of one read can keep it retrying.
func (r *Ring) Calls(gen uint32, calls []uint8) (n int, closed bool) {
	g := uint16(gen)
	for {
		a := r.hot.a.Load()
		if uint16(a>>genShift) != g {
			return 0, false
		}
		if n, ok := r.read(a, g, calls); ok && r.hot.a.Load() == a {
			return n, a&closedBit != 0
		}
	}
}

// read copies the outcomes of the window that A, loaded as a, sums into
// calls, oldest first, and returns how many there are, with ok false if a
// slot no longer holds an outcome of generation g (a claim committed since
// a was loaded, and the caller reads again).
func (r *Ring) read(a uint64, g uint16, calls []uint8) (n int, ok bool) {
	n, ok = int(a>>r.nShift&r.field), true
	if n == 0 {
		return 0, true
	}
	calls[n-1] = uint8(a&pendMask) >> 1
	// The claim of the newest outcome flushed each earlier one into its
	// slot before it committed: slot pos-1-k holds the k-th before the
	// newest.
	pos := a >> r.posShift & r.field
	for k := 1; k < n && ok; k++ {
		s := r.slots[(pos+2*r.size-1-uint64(k))%r.size].Load()
		calls[n-1-k] = uint8(s&pendMask) >> 1
		ok = uint16(s>>genShift) == g && s&present != 0
	}
	return n, ok
}

// sealAhead is how far ahead of the sealed generation Seal moves A's: far
// enough that the generation and the 2^14-1 before it read as older than
// the ring's, so their claims are Stale and their Advances change nothing,
// and near enough that the sealed generation reads as older than every
// generation a claim of those could carry.
const sealAhead = 1 << 14

// Seal ends the ring's service to a breaker whose state moves to another
// ring (core's Reconfigure) and copies the window of generation gen (low
// 16 bits) into calls, as Calls does: it moves A's generation sealAhead
// ahead of gen in one swap that keeps the rest of A, so every claim of gen,
// or of a generation up to 2^14-1 before it, that has not committed by then
// never will (it reports Stale), and the window it copies is final. A ring
// holding another generation is sealed empty. calls must hold Size
// elements. It may run concurrently with every other call on r, itself
// included: every Seal of gen copies the same outcomes. A Reset after it
// changes nothing; a claim of a generation that reads as newer (2^14 or
// more ahead of gen) undoes the seal, as it would any window, and the
// breaker makes none on a ring it sealed.
func (r *Ring) Seal(gen uint32, calls []uint8) (n int, closed bool) {
	g := uint16(gen)
	sealed := g + sealAhead
	r.hot.sealed.Store(1) // before the swap: see Reset
	for {
		a := r.hot.a.Load()
		switch uint16(a >> genShift) {
		case sealed:
			// No claim of g can move A or a slot of the window now.
			n, _ = r.read(a, g, calls)
			return n, a&closedBit != 0
		case g:
			r.hot.a.CompareAndSwap(a, a&^genMask|uint64(sealed)<<genShift)
		default:
			r.hot.a.CompareAndSwap(a, uint64(sealed)<<genShift)
		}
	}
}
