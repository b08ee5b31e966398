//go:build exercises && solutions

package race_test

// The solutions of the exercises (exercises_test.go): each variant of
// exercises_broken_test.go with its mistake fixed, the fix marked.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// failureCounter counts failures. Section 1.
type failureCounter struct {
	hooks
	n atomic.Int64
}

// fail counts one failure.
func (c *failureCounter) fail() {
	c.hold("adds 1")
	c.note("count %d", c.n.Add(1)) // the fix: one atomic read-modify-write, nothing between
}

// boundedCounter counts up to max. Section 2.
type boundedCounter struct {
	hooks
	max int64
	n   atomic.Int64
}

// inc adds one unless the count is at max, and says whether it did.
func (c *boundedCounter) inc() bool {
	for {
		n := c.n.Load()
		if n >= c.max {
			return false
		}
		c.hold("loaded %d", n)
		if c.n.CompareAndSwap(n, n+1) { // the fix: commit only on the value decided on
			c.note("CAS: %d", n+1)
			return true
		}
		c.note("CAS fails: the count moved")
	}
}

// Section 3: the word is state in bits 0..2, step in 3..7, payload in
// 8..43 and generation in 44..63.
func packWord(st, step, payload, gen uint64) uint64 {
	return gen<<44 | payload<<8 | step<<3 | st // the fix: 44, past the payload's 36 bits
}

func unpackWord(w uint64) (st, step, payload, gen uint64) {
	return w & 7, w >> 3 & 31, w >> 8 & (1<<36 - 1), w >> 44
}

// flipBreaker is open until its deadline, then admits permitted probes.
// Section 4.
type flipBreaker struct {
	clock     core.Clock
	deadline  time.Duration
	permitted uint64
	w         atomic.Uint64 // probes in flight<<8 | state
}

func (f *flipBreaker) allow() bool {
	for {
		w := f.w.Load()
		switch core.State(w & 0xff) {
		case core.Open:
			if f.clock.Now() < f.deadline {
				return false
			}
			if f.w.CompareAndSwap(w, 1<<8|uint64(core.HalfOpen)) { // the fix: the flip counts its probe
				return true // the flipping caller is the first probe
			}
		case core.HalfOpen:
			if w>>8 >= f.permitted {
				return false
			}
			if f.w.CompareAndSwap(w, w+1<<8) {
				return true
			}
		default:
			return true
		}
	}
}

// genBreaker trips on one failure and closes on one probe success; a
// permit names the generation it was granted in. Section 5.
type genBreaker struct {
	mu    sync.Mutex
	state core.State
	gen   uint64
}

func (g *genBreaker) allow() core.Permit {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := core.Permit{Generation: g.gen, Probe: g.state == core.HalfOpen}
	if g.state == core.Open {
		g.state, g.gen = core.HalfOpen, g.gen+1
		p = core.Permit{Generation: g.gen, Probe: true}
	}
	return p
}

func (g *genBreaker) record(p core.Permit, o core.Outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.Generation != g.gen { // the fix: every outcome of a past generation is stale
		return
	}
	switch {
	case o == core.Failure:
		g.state, g.gen = core.Open, g.gen+1
	case o == core.Success && g.state == core.HalfOpen:
		g.state, g.gen = core.Closed, g.gen+1
	}
}

// untilBreaker is open until a deadline, one failure trips it for open.
// Section 6. The fix: one word holds the state and the deadline, so one
// load sees both and one store writes both.
type untilBreaker struct {
	hooks
	clock core.Clock
	open  time.Duration
	w     atomic.Uint64 // deadline in ns<<8 | state
}

func (u *untilBreaker) trip() {
	u.w.Store(uint64(u.clock.Now()+u.open)<<8 | uint64(core.Open))
}

// close is the state a probe's success leaves.
func (u *untilBreaker) close() { u.w.Store(u.w.Load() &^ 0xff) }

// allow admits a closed call, refuses before the deadline and admits a
// probe after it.
func (u *untilBreaker) allow() (probe, ok bool) {
	w := u.w.Load()
	until := time.Duration(w >> 8)
	u.hold("loads until: %v", until)
	if core.State(w&0xff) != core.Open {
		return false, true
	}
	if u.clock.Now() < until {
		return false, false
	}
	return true, true
}

// bucket counts the failures of one second. Section 7. The fix: one word
// holds the second and its count, so relabel and clear are one CAS and an
// add counts into the second it checked.
type bucket struct {
	hooks
	w atomic.Uint64 // second<<32 | count
}

// add counts a failure of second now, recycling the bucket first if it
// holds an older second.
func (b *bucket) add(now int64) {
	for {
		w := b.w.Load()
		if int64(w>>32) != now {
			if b.w.CompareAndSwap(w, uint64(now)<<32) {
				b.hold("relabels and clears: second %d", now)
			}
			continue
		}
		if b.w.CompareAndSwap(w, w+1) {
			return
		}
	}
}

// failures is the count of second now.
func (b *bucket) failures(now int64) int64 {
	w := b.w.Load()
	if int64(w>>32) != now {
		return 0
	}
	return int64(w & 0xffffffff)
}

// notifier trips on one failure and tells its listener. Section 8.
type notifier struct {
	mu       sync.Mutex
	state    core.State
	listener func(core.Transition)
}

func (n *notifier) fail() {
	n.mu.Lock()
	tripped := n.state == core.Closed
	if tripped {
		n.state = core.Open
	}
	n.mu.Unlock()
	if tripped { // the fix: the listener runs after the unlock
		n.listener(core.Transition{From: core.Closed, To: core.Open, Generation: 1})
	}
}

func (n *notifier) State() core.State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// wideBreaker keeps a 64-bit generation and counts an outcome only for a
// permit of the current one. Section 9.
type wideBreaker struct {
	gen      uint64
	failures int
}

func (w *wideBreaker) transition() { w.gen++ }

func (w *wideBreaker) record(p core.Permit) {
	if p.Generation != w.gen { // the fix: the whole generation
		return // stale
	}
	w.failures++
}

// tripBreaker is readFirstBreaker's trip alone: one failure trips for open,
// the word holds the state and the deadline. Section 10.
type tripBreaker struct {
	noExtras
	hooks
	clock core.Clock
	open  time.Duration
	w     atomic.Uint64 // deadline in ns<<8 | state, with state 7 a claim
}

func (r *tripBreaker) Record(p core.Permit, o core.Outcome) {
	w := r.w.Load()
	if o != core.Failure || core.State(w&0xff) != core.Closed || p.Generation != 0 {
		return
	}
	// The fix: claim, then read the clock, then commit; a call that finds
	// the claim commits with its own reading (Allow), the first commit wins.
	const claim = 7
	if !r.w.CompareAndSwap(w, claim) {
		return
	}
	now := r.clock.Now()
	r.w.CompareAndSwap(claim, uint64(now+r.open)<<8|uint64(core.Open))
}
