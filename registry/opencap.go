package registry

import (
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// openCap is a registry's cap on ejected breakers (Options.MaxOpenPercent):
// the open slots its breakers hold and the breakers it holds, from which
// the share allowed follows. Each breaker reaches it through an openSlot
// of its own, its core.OpenGate.
type openCap struct {
	// The 64-bit atomics first, so they are aligned on 32-bit platforms.
	held    atomic.Int64 // slots held by the breakers the registry holds
	live    atomic.Int64 // breakers the registry holds (written under its mutex)
	percent int64
}

// allowed is the number of breakers that may be ejected at once now:
// percent of the breakers the registry holds, rounded down, but at least
// one, so that a small registry (3 breakers at 10 %) can still open one.
func (c *openCap) allowed() int64 { return max(1, c.live.Load()*c.percent/100) }

// reserve takes a slot if fewer than allowed are held, and reports
// whether it did: of two trips racing for the last slot one wins.
func (c *openCap) reserve() bool {
	for {
		n := c.held.Load()
		if n >= c.allowed() {
			return false
		}
		if c.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// openSlot is one breaker's core.OpenGate on its registry's openCap. It
// counts the slots its breaker holds, so that eviction gives them back
// exactly once (detach): a caller may still hold an evicted breaker, and
// its later transitions must not move the registry's count again.
//
// state is the slots held << 1 | detached. Every change of the cap's
// count is paired with a swap of state that says whether the breaker was
// detached at that moment, so the count stays exact under any race of
// the breaker's transitions with its eviction. A slot is taken from the
// cap before the swap that records it (and given back if the swap finds
// the breaker detached), and returned after the swap that releases it, so
// the cap never counts fewer slots than are held.
type openSlot struct {
	state atomic.Int64 // first: 64-bit aligned on 32-bit platforms too
	of    *openCap
}

const (
	detached = 1
	oneSlot  = 2
)

var _ core.OpenGate = (*openSlot)(nil)

// TryAcquire reserves a slot of the cap for a trip, or refuses one when
// the share is taken. A detached (evicted) breaker is no longer counted:
// it may always open.
func (s *openSlot) TryAcquire() bool {
	for {
		v := s.state.Load()
		counted := v&detached == 0
		if counted && !s.of.reserve() {
			return false
		}
		if s.state.CompareAndSwap(v, v+oneSlot) {
			return true
		}
		if counted {
			s.of.held.Dec()
		}
	}
}

// Acquire takes a slot whether or not the share is taken.
func (s *openSlot) Acquire() {
	for {
		v := s.state.Load()
		counted := v&detached == 0
		if counted {
			s.of.held.Inc()
		}
		if s.state.CompareAndSwap(v, v+oneSlot) {
			return
		}
		if counted {
			s.of.held.Dec()
		}
	}
}

// Release gives back a slot taken by TryAcquire or Acquire. With none
// held it changes nothing: the breaker never releases a slot it does not
// hold, but its gate is reachable from its Settings, and a caller's
// Release must not take the registry's count below the breakers ejected,
// which would let a trip open past the share.
func (s *openSlot) Release() {
	for {
		v := s.state.Load()
		if v < oneSlot {
			return
		}
		if s.state.CompareAndSwap(v, v-oneSlot) {
			if v&detached == 0 {
				s.of.held.Dec()
			}
			return
		}
	}
}

// detach takes the breaker out of the cap's count when the registry
// evicts it: the slots it holds go back to the cap, once.
func (s *openSlot) detach() {
	for {
		v := s.state.Load()
		if v&detached != 0 {
			return
		}
		if s.state.CompareAndSwap(v, v|detached) {
			s.of.held.Sub(v >> 1)
			return
		}
	}
}

// detachGate takes an evicted breaker out of the registry's cap, if the
// registry has one. Its slot is found through its settings, so that a
// registry without a cap keeps no field for it in each breaker.
func (r *Registry[K]) detachGate(b *Breaker) {
	if r.share == nil {
		return
	}
	if s, ok := b.core.Settings().OpenGate.(*openSlot); ok {
		s.detach()
	}
}

// OpenShare returns how many of the registry's breakers are ejected (open,
// half-open or forced open) and how many may be, with
// Options.MaxOpenPercent: max(1, MaxOpenPercent% of Len(), rounded down).
// held may exceed allowed after a manual control, an eviction or a
// Restore of ejected breakers (each takes its slot, as an ejecting initial
// state does, whatever the share): no
// breaker is closed for it, and trips are refused until it is below.
// Without a cap it returns 0, 0. It takes no lock and is safe for
// concurrent use; under concurrent transitions held may for a moment
// count a slot reserved for a trip that is still being committed (never
// one fewer than are held). It panics only on a nil *Registry.
func (r *Registry[K]) OpenShare() (held, allowed int) {
	if r == nil {
		panic(nilRegistry)
	}
	if r.share == nil {
		return 0, 0
	}
	return int(r.share.held.Load()), int(r.share.allowed())
}
