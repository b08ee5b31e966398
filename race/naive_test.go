package race_test

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
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
type naiveBreaker struct {
	noExtras
	clock     core.Clock
	open      time.Duration
	permitted int32
	// beforeMark runs between the check and the mark: the hook with which a
	// test forces the interleaving in which every caller checks first.
	beforeMark func()

	sg       atomic.Uint64 // generation<<8 | state
	deadline atomic.Int64  // open: the first instant a call may probe
	inFlight atomic.Int32  // half-open: probes in flight
}

var _ core.CircuitBreaker = (*naiveBreaker)(nil)

func (n *naiveBreaker) load() (core.State, uint64) {
	w := n.sg.Load()
	return core.State(w & 0xff), w >> 8
}

func sgWord(s core.State, gen uint64) uint64 { return gen<<8 | uint64(s) }

func (n *naiveBreaker) Allow() (core.Permit, error) {
	st, gen := n.load()
	if st == core.Closed {
		return core.Permit{Generation: gen}, nil
	}
	if st == core.Open {
		now := max(n.clock.Now(), 0)
		if dl := time.Duration(n.deadline.Load()); now < dl {
			return core.Permit{Wait: dl - now}, core.ErrOpen
		}
		if n.sg.CompareAndSwap(sgWord(core.Open, gen), sgWord(core.HalfOpen, gen+1)) {
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
		if n.sg.CompareAndSwap(sgWord(st, gen), sgWord(core.Open, gen+1)) {
			n.deadline.Store(int64(max(n.clock.Now(), 0) + n.open))
		}
	case st == core.HalfOpen && o == core.Success:
		n.sg.CompareAndSwap(sgWord(st, gen), sgWord(core.Closed, gen+1))
	}
}

// RecordHint has no hints to honour: the naive breaker only counts the failure.
func (n *naiveBreaker) RecordHint(p core.Permit, _ time.Duration) { n.Record(p, core.Failure) }

// noExtras completes core.CircuitBreaker for the naive teaching breakers:
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
