package race_test

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// naiveBreaker is the tempting wrong version, kept here to be shown failing
// (TestNaiveHalfOpenAdmitsEveryone). Its state and generation share one
// atomic word, as in the real core, and its open -> half-open flip is a CAS;
// the one mistake is in half-open, where it checks the probe count and then
// marks a probe taken in a separate step:
//
//	if inFlight.Load() >= permitted { reject }   // check
//	inFlight.Add(1)                              // mark
//
// Each step is atomic, so the race detector is satisfied, yet two callers
// can both pass the check before either marks: R6 is broken without a data
// race. The real core makes check and mark one CAS on the word it checked;
// the baseline makes them one critical section.
//
// Only what the teaching tests need is implemented: consecutive failures
// with a threshold of one, one probe budget, no window, no notifications.
//
// Its wrap field adds the mistakes of two more teaching pairs: a breaker
// that keeps no generation at all (wrap 1: every permit names generation 0,
// so every outcome counts; TestNaiveStaleResultFlipsTheState) and one whose
// generation counter is small and wraps (wrap 256: a permit from 256
// generations ago names the current one; TestNaiveGenerationWraps).
type naiveBreaker struct {
	noExtras
	clock     core.Clock
	open      time.Duration
	permitted int32
	// beforeMark runs between the check and the mark: the hook with which a
	// test forces the interleaving in which every caller checks first.
	beforeMark func()
	// wrap is how many generations the counter tells apart: generations
	// are kept mod wrap. Zero keeps them whole.
	wrap uint64

	sg       atomic.Uint64 // generation<<8 | state
	deadline atomic.Int64  // open: the first instant a call may probe
	inFlight atomic.Int32  // half-open: probes in flight
}

var _ breakers.Breaker = (*naiveBreaker)(nil)

func (n *naiveBreaker) load() (core.State, uint64) {
	w := n.sg.Load()
	return core.State(w & 0xff), w >> 8
}

// word packs s and gen, the generation kept mod wrap.
func (n *naiveBreaker) word(s core.State, gen uint64) uint64 {
	if n.wrap != 0 {
		gen %= n.wrap
	}
	return gen<<8 | uint64(s)
}

func (n *naiveBreaker) Allow() (core.Permit, error) {
	st, gen := n.load()
	if st == core.Closed {
		return core.Permit{Generation: gen}, nil
	}
	if st == core.Open {
		now := max(n.clock.Now(), 0)
		if dl := time.Duration(n.deadline.Load()); now < dl {
			return core.Permit{RetryAfter: dl - now}, core.ErrOpen
		}
		if n.sg.CompareAndSwap(n.word(core.Open, gen), n.word(core.HalfOpen, gen+1)) {
			n.inFlight.Store(0)
		}
		_, gen = n.load()
	}
	if n.inFlight.Load() >= n.permitted { // check ...
		return core.Permit{}, core.ErrHalfOpenFull
	}
	if n.beforeMark != nil {
		n.beforeMark()
	}
	n.inFlight.Add(1) // ... then mark: the bug
	return core.Permit{Generation: gen, Probe: true}, nil
}

func (n *naiveBreaker) Done(p core.Permit, err error) {
	n.Record(p, core.DefaultClassifier(err))
}

func (n *naiveBreaker) Record(p core.Permit, o core.Outcome) {
	st, gen := n.load()
	if gen != p.Generation || o == core.Ignored {
		return
	}
	switch {
	case st == core.Closed && o == core.Failure, st == core.HalfOpen && o == core.Failure:
		if n.sg.CompareAndSwap(n.word(st, gen), n.word(core.Open, gen+1)) {
			n.deadline.Store(int64(max(n.clock.Now(), 0) + n.open))
		}
	case st == core.HalfOpen && o == core.Success:
		n.sg.CompareAndSwap(n.word(st, gen), n.word(core.Closed, gen+1))
	}
}

// RecordHint has no hints to honour: the naive breaker only counts the failure.
func (n *naiveBreaker) RecordHint(p core.Permit, _ time.Duration) { n.Record(p, core.Failure) }

// noExtras completes breakers.Breaker for the naive teaching breakers:
// they keep no metrics, and the manual controls are outside what the
// teaching tests show, so calling one is a mistake in a test.
type noExtras struct{}

func (noExtras) Metrics() core.Metrics         { return core.Metrics{} }
func (noExtras) ForceOpen(time.Duration) error { panic("naive breaker: no manual controls") }
func (noExtras) Disable()                      { panic("naive breaker: no manual controls") }
func (noExtras) MetricsOnly()                  { panic("naive breaker: no manual controls") }
func (noExtras) Reset()                        { panic("naive breaker: no manual controls") }

func (n *naiveBreaker) State() core.State {
	st, _ := n.load()
	if st == core.Open && max(n.clock.Now(), 0) >= time.Duration(n.deadline.Load()) {
		return core.HalfOpen
	}
	return st
}

func (n *naiveBreaker) Counts() core.Counts {
	st, gen := n.load()
	c := core.Counts{State: st, Generation: gen}
	if st == core.HalfOpen {
		c.ProbesInFlight = int(n.inFlight.Load())
	}
	return c
}

// rendezvous parks up to want arriving goroutines until all want have
// arrived, then lets them all go; after that, arrivals pass straight
// through. A party that waits longer than timeout goes on alone: that is how
// the baseline, whose mutex lets only one caller reach the rendezvous at a
// time, gets through it.
type rendezvous struct {
	want    int
	timeout time.Duration

	mu       sync.Mutex
	arrived  int
	waiting  int
	maxWait  int // most parties parked at the same time
	released chan struct{}
}

func newRendezvous(want int, timeout time.Duration) *rendezvous {
	return &rendezvous{want: want, timeout: timeout, released: make(chan struct{})}
}

func (r *rendezvous) arrive() {
	r.mu.Lock()
	r.arrived++
	if r.arrived > r.want {
		r.mu.Unlock()
		return
	}
	r.waiting++
	r.maxWait = max(r.maxWait, r.waiting)
	if r.arrived == r.want {
		close(r.released)
	}
	r.mu.Unlock()
	select {
	case <-r.released:
	case <-time.After(r.timeout):
	}
	r.mu.Lock()
	r.waiting--
	r.mu.Unlock()
}

func (r *rendezvous) most() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxWait
}

// gateClock is a manual clock with a rendezvous in its Now while armed: the
// real implementations read the clock in open state after loading their
// state and before committing the open -> half-open transition, so the
// rendezvous holds every caller between its check and its mark, the same
// interleaving beforeMark forces on the naive breaker.
type gateClock struct {
	*core.ManualClock
	gate atomic.Pointer[rendezvous]
}

func (c *gateClock) Now() time.Duration {
	if r := c.gate.Load(); r != nil {
		r.arrive()
	}
	return c.ManualClock.Now()
}

// splitBreaker keeps its state and the time it opened in two fields, as
// Netflix Hystrix does (status and circuitOpened): each is atomic,
// but a trip writes them one after the other, so a call that comes between
// the two writes sees open with the opened-at time of an earlier trip
// (TestNaiveStatusAndTimestampApart). The real core keeps the deadline in
// the state word, so one swap changes both.
//
// Only what that test needs is implemented: one failure trips, one probe,
// no generations, no notifications.
type splitBreaker struct {
	noExtras
	clock core.Clock
	open  time.Duration
	// betweenWrites runs after a trip's state write and before its
	// timestamp write: the hook with which the test puts a call there.
	betweenWrites func()

	state    atomic.Int32 // core.State
	openedAt atomic.Int64 // the clock reading of the last trip
}

var _ breakers.Breaker = (*splitBreaker)(nil)

func (s *splitBreaker) Allow() (core.Permit, error) {
	switch core.State(s.state.Load()) {
	case core.Closed:
		return core.Permit{}, nil
	case core.Open:
		now := s.clock.Now()
		if dl := time.Duration(s.openedAt.Load()) + s.open; now < dl {
			return core.Permit{RetryAfter: dl - now}, core.ErrOpen
		}
		if s.state.CompareAndSwap(int32(core.Open), int32(core.HalfOpen)) {
			return core.Permit{Probe: true}, nil
		}
	}
	return core.Permit{}, core.ErrHalfOpenFull
}

func (s *splitBreaker) Done(p core.Permit, err error) { s.Record(p, core.DefaultClassifier(err)) }

func (s *splitBreaker) Record(p core.Permit, o core.Outcome) {
	switch {
	case o == core.Failure:
		if s.state.CompareAndSwap(int32(core.Closed), int32(core.Open)) ||
			p.Probe && s.state.CompareAndSwap(int32(core.HalfOpen), int32(core.Open)) {
			if s.betweenWrites != nil {
				s.betweenWrites()
			}
			s.openedAt.Store(int64(s.clock.Now())) // the second write: the bug
		}
	case o == core.Success && p.Probe:
		s.state.CompareAndSwap(int32(core.HalfOpen), int32(core.Closed))
	}
}

func (s *splitBreaker) RecordHint(p core.Permit, _ time.Duration) { s.Record(p, core.Failure) }

func (s *splitBreaker) State() core.State { return core.State(s.state.Load()) }

func (s *splitBreaker) Counts() core.Counts { return core.Counts{State: s.State()} }

// lockedBreaker is a plain mutex breaker that calls its listener while it
// still holds its lock (TestNaiveCallbackUnderTheLock): a listener that
// calls back into the breaker, even only State, waits for a lock its own
// caller holds, and Go's mutex is not reentrant, so that call never
// returns. The real core delivers a notification after the swap that
// committed it, the baseline after releasing its mutex.
//
// Only what that test needs: one failure trips; nothing reopens it.
type lockedBreaker struct {
	mu       sync.Mutex
	state    core.State
	onChange func(core.Transition)
}

func (l *lockedBreaker) Record(o core.Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o == core.Failure && l.state == core.Closed {
		l.state = core.Open
		l.onChange(core.Transition{From: core.Closed, To: core.Open, Generation: 1}) // under mu: the bug
	}
}

func (l *lockedBreaker) State() core.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// readFirstBreaker packs its state and its open deadline in one word, as
// the real core does, but a trip reads the clock first and swaps the word
// after: the reading and the commit are two instants, and a call between
// them still sees closed while the deadline will come from the reading
// before it (TestNaiveClockReadBeforeItsSwap). The real core claims the
// word first, reads the clock, then commits; the baseline reads the clock
// under its lock.
//
// Only what that test needs: one failure trips; nothing probes.
type readFirstBreaker struct {
	clock core.Clock
	open  time.Duration
	word  atomic.Uint64 // deadline in ns << 8 | state
}

func (r *readFirstBreaker) Allow() (core.Permit, error) {
	w := r.word.Load()
	if core.State(w&0xff) == core.Closed {
		return core.Permit{}, nil
	}
	if dl, now := time.Duration(w>>8), r.clock.Now(); now < dl {
		return core.Permit{RetryAfter: dl - now}, core.ErrOpen
	}
	return core.Permit{Probe: true}, nil
}

func (r *readFirstBreaker) Record(_ core.Permit, o core.Outcome) {
	if o != core.Failure {
		return
	}
	now := r.clock.Now() // read first ...
	closed := uint64(core.Closed)
	r.word.CompareAndSwap(closed, uint64(now+r.open)<<8|uint64(core.Open)) // ... swap after: the bug
}

// recycleBreaker counts failures in a time-based sliding window of one
// bucket per second, as cep21/circuit's rolling buckets did: the bucket of
// second s is bucket s mod 10, and it is recycled for a new second by
// relabelling it and then clearing its counter, two steps, so a writer that
// sees the new label between them adds to a counter the recycler then
// clears (TestNaiveRecycleLosesWrites). The real window tags each counter
// with its bucket's incarnation: a writer that finds a counter of the old
// incarnation moves it forward itself, and the recycler's late clear, a
// CAS from the old incarnation, fails.
//
// Only what that test needs: outcomes label their bucket, failures count
// towards a failure-count threshold, no probes.
type recycleBreaker struct {
	clock     core.Clock
	threshold uint64
	second    [10]atomic.Int64 // the second each bucket holds
	failures  [10]atomic.Uint64
	open      atomic.Bool
	// afterRelabel, when set, runs between the two steps of a recycle: the
	// adversary's hold on the recycler.
	afterRelabel func()
}

func (r *recycleBreaker) Allow() (core.Permit, error) {
	if r.open.Load() {
		return core.Permit{}, core.ErrOpen
	}
	return core.Permit{}, nil
}

func (r *recycleBreaker) Record(_ core.Permit, o core.Outcome) {
	now := int64(r.clock.Now() / time.Second)
	i := now % int64(len(r.second))
	if old := r.second[i].Load(); old != now && r.second[i].CompareAndSwap(old, now) {
		if r.afterRelabel != nil {
			r.afterRelabel()
		}
		r.failures[i].Store(0) // relabelled first, cleared after: the bug
	}
	if o != core.Failure {
		return
	}
	r.failures[i].Add(1)
	if r.inWindow(now) >= r.threshold {
		r.open.Store(true)
	}
}

// inWindow is the failures of the last 10 seconds up to now.
func (r *recycleBreaker) inWindow(now int64) (n uint64) {
	for i := range r.second {
		if s := r.second[i].Load(); s <= now && now-s < int64(len(r.second)) {
			n += r.failures[i].Load()
		}
	}
	return n
}
