package race_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// The naive breakers of the teaching pairs (teaching_test.go, docs/learn.md):
// each is the tempting wrong version of one mechanism, small, and wrong in
// exactly one place. That place is a field whose zero value removes the
// mistake, so every pair also runs the same breaker with the mistake
// removed, through the same forced interleaving, and sees the verdict flip:
// the naive version fails for its one mistake and for nothing else.
// Outside that place each answers as the reference model (the mutex
// baseline) does for the operations its pair drives: the same permits,
// generations, rejection kinds and waits, so a linearizability check
// rejects its history only for the mistake.
//
// Their hooks (note, hold) write each step into the lane of the goroutine
// that takes it (schedule_test.go); hold is also a place the schedule can
// park that goroutine.

// hooks are a naive breaker's ways to show its steps: note writes a step
// into the calling goroutine's lane, hold does too and may park it there.
// Either may be nil.
type hooks struct {
	noteFn, holdFn func(string)
}

func (h hooks) note(format string, args ...any) {
	if h.noteFn != nil {
		h.noteFn(fmt.Sprintf(format, args...))
	}
}

func (h hooks) hold(format string, args ...any) {
	if h.holdFn != nil {
		h.holdFn(fmt.Sprintf(format, args...))
	}
}

// traced makes hooks that write into s's lanes.
func traced(s *schedule) hooks { return hooks{noteFn: s.note, holdFn: s.point} }

// naiveBreaker keeps its state, probes in flight and generation in one
// atomic word, as the real core does, with one failure to trip, an open
// duration, and permitted probes in half-open. Its mistakes, each of one
// pair:
//
//   - checkThenMark (section 4): half-open admission checks the probe count
//     and then marks a probe taken, two atomic steps:
//
//     if inFlight >= permitted { reject }   // check
//     word.Add(one probe)                   // mark
//
//     Each step is atomic, so the race detector is satisfied, yet two
//     callers can both pass the check before either marks. Removed: the
//     mark is a CAS from the word the check read, retried on failure.
//
//   - wrap (sections 5 and 9): the generation is kept mod wrap: 1 keeps
//     none at all (every permit names generation 0, so every outcome
//     counts), 256 keeps 8 bits (a permit from 256 generations ago names the
//     current one). Removed (0): the whole generation.
//
// Only what the pairs drive is implemented: no window, no notifications.
// Its trip stores the deadline after the CAS that opens it (sections 6 and
// 10's mistakes), which no pair that drives it can see: its trips never
// overlap another call.
type naiveBreaker struct {
	noExtras
	hooks
	clock         core.Clock
	open          time.Duration
	permitted     uint64
	checkThenMark bool
	wrap          uint64

	w        atomic.Uint64 // generation<<16 | probes in flight<<8 | state
	deadline atomic.Int64  // open: the first instant a call may probe
}

var _ breakers.Breaker = (*naiveBreaker)(nil)

const naiveProbe = 1 << 8 // one probe in flight, in naiveBreaker's word

func unpackNaive(w uint64) (st core.State, inFlight, gen uint64) {
	return core.State(w & 0xff), w >> 8 & 0xff, w >> 16
}

// word packs a naive word, the generation kept mod wrap.
func (n *naiveBreaker) word(st core.State, inFlight, gen uint64) uint64 {
	// learn:code 5-word (quoted in docs/learn.md)
	if n.wrap != 0 {
		gen %= n.wrap
	}
	// learn:code end
	return gen<<16 | inFlight<<8 | uint64(st)
}

// fullWait is the model's wait for a half-open refusal: a tenth of the open
// duration (Config.HalfOpenFullWait's default).
func (n *naiveBreaker) fullWait() time.Duration { return n.open / 10 }

func (n *naiveBreaker) Allow() (core.Permit, error) {
	for {
		w := n.w.Load()
		st, inFlight, gen := unpackNaive(w)
		switch st {
		case core.Closed:
			return core.Permit{Generation: gen}, nil
		case core.Open:
			now := max(n.clock.Now(), 0)
			if dl := time.Duration(n.deadline.Load()); now < dl {
				return core.Permit{RetryAfter: dl - now}, core.ErrOpen
			}
			if n.w.CompareAndSwap(w, n.word(core.HalfOpen, 0, gen+1)) {
				n.note("flips open -> half-open")
			}
			continue // admitted, if at all, as a half-open caller
		}
		// learn:code 4 (quoted in docs/learn.md)
		if inFlight >= n.permitted {
			return core.Permit{RetryAfter: n.fullWait()}, core.ErrHalfOpenFull
		}
		n.hold("checks: %d in flight", inFlight)
		if n.checkThenMark {
			w = n.w.Add(naiveProbe) // ... then marks: the mistake
			n.note("marks: %d in flight", w>>8&0xff)
			return core.Permit{Generation: gen, Probe: true}, nil
		}
		if n.w.CompareAndSwap(w, w+naiveProbe) {
			n.note("CAS: %d in flight", inFlight+1)
			return core.Permit{Generation: gen, Probe: true}, nil
		}
		n.note("CAS fails: the word moved")
		// learn:code end
	}
}

func (n *naiveBreaker) Done(p core.Permit, err error) {
	n.Record(p, core.DefaultClassifier(err))
}

func (n *naiveBreaker) Record(p core.Permit, o core.Outcome) {
	w := n.w.Load()
	st, inFlight, gen := unpackNaive(w)
	// learn:code 5-check (quoted in docs/learn.md)
	if gen != p.Generation || o == core.Ignored {
		return
	}
	// learn:code end
	switch {
	case o == core.Failure && (st == core.Closed || st == core.HalfOpen):
		if n.w.CompareAndSwap(w, n.word(core.Open, 0, gen+1)) {
			n.deadline.Store(int64(max(n.clock.Now(), 0) + n.open))
		}
	case o == core.Success && st == core.HalfOpen:
		n.w.CompareAndSwap(w, n.word(core.Closed, 0, gen+1))
	case st == core.HalfOpen && inFlight > 0: // a ignored probe frees its slot
		n.w.CompareAndSwap(w, w-naiveProbe)
	}
}

// RecordHint has no hints to honour: the naive breaker only counts the failure.
func (n *naiveBreaker) RecordHint(p core.Permit, _ time.Duration) { n.Record(p, core.Failure) }

func (n *naiveBreaker) State() core.State {
	st, _, _ := unpackNaive(n.w.Load())
	if st == core.Open && max(n.clock.Now(), 0) >= time.Duration(n.deadline.Load()) {
		return core.HalfOpen
	}
	return st
}

func (n *naiveBreaker) Counts() core.Counts {
	st, inFlight, gen := unpackNaive(n.w.Load())
	return core.Counts{State: st, Generation: gen, ProbesInFlight: int(inFlight)}
}

// noExtras completes breakers.Breaker for the naive teaching breakers:
// they keep no metrics, and the manual controls, RetryAfter and snapshots
// are outside what the teaching tests show, so calling one is a mistake in
// a test.
type noExtras struct{}

func (noExtras) Metrics() core.Metrics         { return core.Metrics{} }
func (noExtras) RetryAfter() time.Duration     { panic("naive breaker: no RetryAfter") }
func (noExtras) ForceOpen(time.Duration) error { panic("naive breaker: no manual controls") }
func (noExtras) Disable()                      { panic("naive breaker: no manual controls") }
func (noExtras) MetricsOnly()                  { panic("naive breaker: no manual controls") }
func (noExtras) HalfOpen()                     { panic("naive breaker: no manual controls") }
func (noExtras) Reset()                        { panic("naive breaker: no manual controls") }
func (noExtras) Snapshot(time.Time, bool) (core.Snapshot, error) {
	panic("naive breaker: no snapshots")
}

// runBreaker trips after trip consecutive failures, its state and its run
// of failures in one atomic word (run<<8 | state). Its mistake (section 1),
// loadThenStore: a failure loads the word, then stores the run plus one, two
// atomic steps, so a failure recorded between them is overwritten. Removed:
// the store is a CAS from the word loaded, retried when it fails (sections 2
// and 3).
type runBreaker struct {
	noExtras
	hooks
	trip          uint64
	loadThenStore bool

	w atomic.Uint64
}

var _ breakers.Breaker = (*runBreaker)(nil)

func (r *runBreaker) Allow() (core.Permit, error) {
	if r.State() == core.Open {
		return core.Permit{}, core.ErrOpen
	}
	return core.Permit{}, nil
}

func (r *runBreaker) Done(p core.Permit, err error) { r.Record(p, core.DefaultClassifier(err)) }

func (r *runBreaker) Record(_ core.Permit, o core.Outcome) {
	for {
		w := r.w.Load()
		if core.State(w&0xff) != core.Closed || o == core.Ignored {
			return
		}
		run := w >> 8
		r.hold("loads run %d", run)
		next := uint64(core.Closed) // a success ends the run
		if o == core.Failure {
			next = (run+1)<<8 | uint64(core.Closed)
			if run+1 >= r.trip {
				next = uint64(core.Open)
			}
		}
		// learn:code 1 (quoted in docs/learn.md)
		if r.loadThenStore {
			r.w.Store(next) // the mistake: what happened since the load is overwritten
			r.note("stores %s", runText(next))
			return
		}
		if r.w.CompareAndSwap(w, next) {
			r.note("CAS: %s", runText(next))
			return
		}
		r.note("CAS fails: the word moved")
		// learn:code end
	}
}

// runText names a runBreaker word for the drawings: "run N", or "open".
func runText(w uint64) string {
	if core.State(w&0xff) == core.Open {
		return "open"
	}
	return fmt.Sprintf("run %d", w>>8)
}

func (r *runBreaker) RecordHint(p core.Permit, _ time.Duration) { r.Record(p, core.Failure) }

func (r *runBreaker) State() core.State { return core.State(r.w.Load() & 0xff) }

func (r *runBreaker) Counts() core.Counts {
	w := r.w.Load()
	return core.Counts{State: core.State(w & 0xff), ConsecutiveFailures: w >> 8}
}

// splitBreaker keeps its state and the time it last opened in one word,
// with one failure to trip, a one-probe half-open and no generations. Its
// mistake (section 6), apart, is Netflix Hystrix's (status and
// circuitOpened): a trip writes the state, and then, in a second write,
// the time. A call that comes between the two writes sees open with the
// opened-at time of an earlier trip. Removed: the trip reads the clock and
// writes both in one CAS.
//
// Without the mistake its trip still reads the clock before its CAS
// (section 10's mistake), which shows only if the clock moves during the
// trip; section 6's pair keeps the clock still.
type splitBreaker struct {
	noExtras
	hooks
	clock core.Clock
	open  time.Duration
	apart bool

	w atomic.Uint64 // opened-at in ns<<8 | state
}

var _ breakers.Breaker = (*splitBreaker)(nil)

func packSplit(st core.State, openedAt time.Duration) uint64 {
	return uint64(openedAt)<<8 | uint64(st)
}

func unpackSplit(w uint64) (core.State, time.Duration) {
	return core.State(w & 0xff), time.Duration(w >> 8)
}

func (s *splitBreaker) Allow() (core.Permit, error) {
	w := s.w.Load()
	switch st, openedAt := unpackSplit(w); st {
	case core.Closed:
		return core.Permit{}, nil
	case core.Open:
		now := s.clock.Now()
		s.note("sees open since %v", openedAt)
		if dl := openedAt + s.open; now < dl {
			return core.Permit{RetryAfter: dl - now}, core.ErrOpen
		}
		if s.w.CompareAndSwap(w, packSplit(core.HalfOpen, openedAt)) {
			return core.Permit{Probe: true}, nil
		}
	}
	return core.Permit{RetryAfter: s.open / 10}, core.ErrHalfOpenFull
}

func (s *splitBreaker) Done(p core.Permit, err error) { s.Record(p, core.DefaultClassifier(err)) }

func (s *splitBreaker) Record(p core.Permit, o core.Outcome) {
	w := s.w.Load()
	st, openedAt := unpackSplit(w)
	switch {
	case o == core.Failure && (st == core.Closed || st == core.HalfOpen && p.Probe):
		// learn:code 6 (quoted in docs/learn.md)
		if s.apart {
			if !s.w.CompareAndSwap(w, packSplit(core.Open, openedAt)) {
				return
			}
			s.hold("writes state: open")
			now := s.clock.Now()
			s.w.Store(packSplit(core.Open, now)) // the second write: the mistake
			s.note("writes opened-at: %v", now)
			return
		}
		now := s.clock.Now()
		s.hold("reads clock: %v", now)
		if s.w.CompareAndSwap(w, packSplit(core.Open, now)) {
			s.note("CAS: open since %v", now)
		}
		// learn:code end
	case o == core.Success && p.Probe && st == core.HalfOpen:
		s.w.CompareAndSwap(w, packSplit(core.Closed, openedAt))
	}
}

func (s *splitBreaker) RecordHint(p core.Permit, _ time.Duration) { s.Record(p, core.Failure) }

func (s *splitBreaker) State() core.State {
	st, _ := unpackSplit(s.w.Load())
	return st
}

func (s *splitBreaker) Counts() core.Counts { return core.Counts{State: s.State()} }

// lockedBreaker is a plain mutex breaker in which one failure trips and
// nothing reopens it. Its mistake (section 8), underLock, is
// sony/gobreaker's before #37: it calls its listener while it still holds
// its lock, so a listener that calls back into the breaker, even only
// State, waits for a lock its own caller holds, and Go's mutex is not
// reentrant: that call never returns. Removed: the listener is called after
// the unlock.
type lockedBreaker struct {
	hooks
	underLock bool
	onChange  func(core.Transition)

	mu    sync.Mutex
	state core.State
}

func (l *lockedBreaker) Record(o core.Outcome) {
	l.mu.Lock()
	if o != core.Failure || l.state != core.Closed {
		l.mu.Unlock()
		return
	}
	l.state = core.Open
	tr := core.Transition{From: core.Closed, To: core.Open, Generation: 1}
	// learn:code 8 (quoted in docs/learn.md)
	if l.underLock {
		l.note("calls the listener, lock held")
		l.onChange(tr) // under mu: the mistake
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.note("unlocks, calls the listener")
	l.onChange(tr)
	// learn:code end
}

func (l *lockedBreaker) State() core.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// readFirstBreaker packs its state, generation and open deadline in one
// word, as section 6 asks, with one failure to trip, one probe and a
// deadline of the trip's clock reading plus the open duration. Its mistake
// (section 10), readFirst, is the one casbreaker's own core once had: a trip
// reads the clock and then swaps the word, so the reading and the commit
// are two instants, and a call between them still sees closed while the
// deadline comes from the reading before it. Removed: the trip first claims
// the word (a CAS to a claimed word that decides the transition), then
// reads the clock, then commits; a call that finds the word claimed helps:
// it reads the clock itself and tries the same commit, the first commit
// wins.
type readFirstBreaker struct {
	noExtras
	hooks
	clock     core.Clock
	open      time.Duration
	readFirst bool

	w atomic.Uint64 // deadline in ns<<24 | generation<<8 | state
}

var _ breakers.Breaker = (*readFirstBreaker)(nil)

// claimed is readFirstBreaker's state while a trip is claimed: the new
// generation is in the word, the deadline is not yet.
const claimed core.State = 7

func packReadFirst(st core.State, gen uint64, deadline time.Duration) uint64 {
	return uint64(deadline)<<24 | gen<<8 | uint64(st)
}

func unpackReadFirst(w uint64) (core.State, uint64, time.Duration) {
	return core.State(w & 0xff), w >> 8 & 0xffff, time.Duration(w >> 24)
}

func (r *readFirstBreaker) Allow() (core.Permit, error) {
	for {
		w := r.w.Load()
		st, gen, dl := unpackReadFirst(w)
		switch st {
		case core.Closed:
			return core.Permit{Generation: gen}, nil
		// learn:code 10-help (quoted in docs/learn.md)
		case claimed:
			r.note("finds the trip claimed: helps")
			r.commit(w, gen)
			continue
		// learn:code end
		case core.Open:
			now := r.clock.Now()
			if now < dl {
				return core.Permit{RetryAfter: dl - now}, core.ErrOpen
			}
			if r.w.CompareAndSwap(w, packReadFirst(core.HalfOpen, gen+1, 0)) {
				return core.Permit{Generation: gen + 1, Probe: true}, nil
			}
			continue
		}
		return core.Permit{RetryAfter: r.open / 10}, core.ErrHalfOpenFull
	}
}

func (r *readFirstBreaker) Done(p core.Permit, err error) { r.Record(p, core.DefaultClassifier(err)) }

func (r *readFirstBreaker) Record(p core.Permit, o core.Outcome) {
	w := r.w.Load()
	st, gen, _ := unpackReadFirst(w)
	if o != core.Failure || st != core.Closed || p.Generation != gen {
		return
	}
	// learn:code 10 (quoted in docs/learn.md)
	if r.readFirst {
		now := r.clock.Now()                                                    // reads first ...
		if r.w.CompareAndSwap(w, packReadFirst(core.Open, gen+1, now+r.open)) { // ... swaps after: the mistake
			r.note("CAS: open until %v", now+r.open)
		}
		return
	}
	claim := packReadFirst(claimed, gen+1, 0)
	if r.w.CompareAndSwap(w, claim) {
		r.note("CAS: claims the trip")
		r.commit(claim, gen+1)
	}
	// learn:code end
}

// commit completes the claimed trip in claim, of generation gen, with a
// clock reading taken now, after the claim.
func (r *readFirstBreaker) commit(claim, gen uint64) {
	// learn:code 10-commit (quoted in docs/learn.md)
	now := r.clock.Now()
	if r.w.CompareAndSwap(claim, packReadFirst(core.Open, gen, now+r.open)) {
		r.note("CAS: open until %v", now+r.open)
	}
	// learn:code end
}

func (r *readFirstBreaker) RecordHint(p core.Permit, _ time.Duration) { r.Record(p, core.Failure) }

func (r *readFirstBreaker) State() core.State {
	st, _, _ := unpackReadFirst(r.w.Load())
	return st
}

func (r *readFirstBreaker) Counts() core.Counts {
	st, gen, _ := unpackReadFirst(r.w.Load())
	return core.Counts{State: st, Generation: gen}
}

// recycleBreaker counts failures in a time-based sliding window of one
// bucket per second, as cep21/circuit's rolling buckets did: the bucket of
// second s is bucket s mod 10, one word holding its second and its
// failures, and it trips at threshold failures in the window. Its mistake
// (section 7), clearApart: a bucket is recycled for a new second in two
// writes, a relabel (a CAS to the new second, the old count kept) and then
// a clear; a writer that sees the new label between them adds to a count
// the recycler then clears. Removed: relabel and clear are one CAS, from the
// word of the old second to the new second with no failures (the real
// window does the same per counter, each tagged with its bucket's
// incarnation).
type recycleBreaker struct {
	hooks
	clock      core.Clock
	threshold  uint64
	clearApart bool

	bucket [10]atomic.Uint64 // second<<32 | failures
	open   atomic.Bool
}

func (r *recycleBreaker) Allow() (core.Permit, error) {
	if r.open.Load() {
		return core.Permit{}, core.ErrOpen
	}
	return core.Permit{}, nil
}

func (r *recycleBreaker) Record(_ core.Permit, o core.Outcome) {
	now := uint64(r.clock.Now() / time.Second)
	b := &r.bucket[now%uint64(len(r.bucket))]
	// learn:code 7 (quoted in docs/learn.md)
	for w := b.Load(); w>>32 != now; w = b.Load() {
		if r.clearApart {
			if b.CompareAndSwap(w, now<<32|w&0xffffffff) {
				r.hold("relabels bucket %d: second %d", now%10, now)
				b.Store(now << 32) // relabelled first, cleared after: the mistake
				r.note("clears bucket %d", now%10)
				break
			}
			continue
		}
		if b.CompareAndSwap(w, now<<32) {
			r.hold("CAS: bucket %d holds second %d, cleared", now%10, now)
			break
		}
	}
	// learn:code end
	if o != core.Failure {
		return
	}
	n := b.Add(1) & 0xffffffff
	r.note("adds a failure: %d in bucket %d", n, now%10)
	if r.inWindow(now) >= r.threshold {
		r.open.Store(true)
	}
}

// inWindow is the failures of the last 10 seconds up to second now.
func (r *recycleBreaker) inWindow(now uint64) (n uint64) {
	for i := range r.bucket {
		w := r.bucket[i].Load()
		if s := w >> 32; s <= now && now-s < uint64(len(r.bucket)) {
			n += w & 0xffffffff
		}
	}
	return n
}

func (r *recycleBreaker) State() core.State {
	if r.open.Load() {
		return core.Open
	}
	return core.Closed
}
