package suite

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
)

// Ours is casbreaker's two implementations: impl=lockfree (core.New) and
// impl=mutex (baseline.New), built from the same core.Config.
var Ours = []Impl{
	{
		Name: "lockfree",
		New: func(s Spec) (Breaker, error) {
			b, err := core.New(s.Config())
			if err != nil {
				return nil, err
			}
			return &Lockfree{B: b, clock: s.Clock, open: s.OpenFor()}, nil
		},
		Construct: func(s Spec) (any, error) {
			b, err := core.New(s.Config())
			return b, err
		},
		ExactProbes: true,
	},
	{
		Name: "mutex",
		New: func(s Spec) (Breaker, error) {
			b, err := baseline.New(s.Config())
			if err != nil {
				return nil, err
			}
			return &Mutex{B: b, clock: s.Clock, open: s.OpenFor()}, nil
		},
		Construct: func(s Spec) (any, error) {
			b, err := baseline.New(s.Config())
			return b, err
		},
		ExactProbes: true,
	},
}

// Lockfree adapts a *core.Breaker. Its loops call Allow and Done on the
// concrete type: no interface call, no allocation per operation. The only
// work it adds to a bare loop of Allow+Done is the index into the outcome
// pattern (a load and a compare).
type Lockfree struct {
	B     *core.Breaker
	clock *core.ManualClock
	open  time.Duration
}

// Run implements Breaker.
func (a *Lockfree) Run(n int, outcomes []error) int {
	b, admitted, k := a.B, 0, 0
	for range n {
		if p, err := b.Allow(); err == nil {
			b.Done(p, outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

// Parallel implements Breaker.
func (a *Lockfree) Parallel(pb *testing.PB, outcomes []error) int {
	b, admitted, k := a.B, 0, 0
	for pb.Next() {
		if p, err := b.Allow(); err == nil {
			b.Done(p, outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

// Hold implements Breaker.
func (a *Lockfree) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	p, err := a.B.Allow()
	decided(err == nil)
	if err != nil {
		return
	}
	<-release
	a.B.Done(p, outcome)
}

// State implements Breaker.
func (a *Lockfree) State() core.State { return a.B.State() }

// Snapshot implements Breaker: Counts, which carries the state too.
func (a *Lockfree) Snapshot(n int) int {
	s := 0
	for range n {
		c := a.B.Counts()
		s += int(c.State) + int(c.Calls) + int(c.Failures)
	}
	return s
}

// Expire implements Breaker.
func (a *Lockfree) Expire() { expire(a.clock, a.open) }

// Mutex adapts a *baseline.Breaker exactly as Lockfree adapts a
// *core.Breaker.
type Mutex struct {
	B     *baseline.Breaker
	clock *core.ManualClock
	open  time.Duration
}

// Run implements Breaker.
func (a *Mutex) Run(n int, outcomes []error) int {
	b, admitted, k := a.B, 0, 0
	for range n {
		if p, err := b.Allow(); err == nil {
			b.Done(p, outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

// Parallel implements Breaker.
func (a *Mutex) Parallel(pb *testing.PB, outcomes []error) int {
	b, admitted, k := a.B, 0, 0
	for pb.Next() {
		if p, err := b.Allow(); err == nil {
			b.Done(p, outcomes[k])
			admitted++
		}
		if k++; k == len(outcomes) {
			k = 0
		}
	}
	return admitted
}

// Hold implements Breaker.
func (a *Mutex) Hold(release <-chan struct{}, outcome error, decided func(bool)) {
	p, err := a.B.Allow()
	decided(err == nil)
	if err != nil {
		return
	}
	<-release
	a.B.Done(p, outcome)
}

// State implements Breaker.
func (a *Mutex) State() core.State { return a.B.State() }

// Snapshot implements Breaker: Counts, which carries the state too.
func (a *Mutex) Snapshot(n int) int {
	s := 0
	for range n {
		c := a.B.Counts()
		s += int(c.State) + int(c.Calls) + int(c.Failures)
	}
	return s
}

// Expire implements Breaker.
func (a *Mutex) Expire() { expire(a.clock, a.open) }

// expire advances a manual clock by d, or sleeps d of real time.
func expire(c *core.ManualClock, d time.Duration) {
	if c != nil {
		c.Advance(d)
		return
	}
	time.Sleep(d)
}
