package core

// OpenGate caps how many of the breakers that share it may be ejected at
// once (Envoy's max_ejection_percent): a breaker holds one open slot of
// its gate from the transition that takes it into Open, HalfOpen or
// ForcedOpen until the one that takes it out of all three (to Closed,
// Disabled or MetricsOnly). A half-open breaker keeps its slot: its
// dependency is still ejected, probed by a few calls, and a probe's
// failure re-opens it without asking the gate again. The registry package
// supplies one per breaker, over a share of its breakers
// (registry.Options.MaxOpenPercent); Config.OpenGate takes any other.
//
// The breaker calls the gate only on the slow paths of the transitions
// that change whether it holds a slot, never on the closed-state Allow,
// Done or Record of a call that trips nothing. It calls it from the
// goroutine of the call committing the transition (the baseline under its
// mutex), so the methods must be safe for concurrent use, must not block
// for long, and must neither panic nor call into the breaker. A slot is
// reserved before the transition that takes it is committed, and given
// back if that transition loses a race (another call moved the breaker
// first), so a gate never counts fewer slots than its breakers hold: for
// a moment it may count one more.
//
// One trip may be committed by several calls of the lock-free breaker (the
// call whose outcome decided it and calls that find it decided), and each
// asks TryAcquire. One that is refused while another call of the same
// breaker is asking or holds a slot waits for that call to finish, up to
// 10 ms, and asks again, so that a trip is not capped for want of the slot
// its own caller holds: a TryAcquire that blocks for longer after it has
// reserved a slot can still get the trip capped (docs/design.md, Known
// limits). The mutex baseline asks once per trip.
type OpenGate interface {
	// TryAcquire reserves one open slot for a trip (closed -> open) and
	// reports true, or reports false and reserves nothing: the breaker
	// then commits closed -> closed with ReasonCapped instead, a new
	// generation with a fresh window, and rejects nothing (unless another
	// call committed the trip first: see above).
	TryAcquire() bool
	// Acquire takes one open slot whether or not one is free: for a
	// manual control that ejects the breaker (ForceOpen, HalfOpen) and for
	// Config.InitialState Open, HalfOpen or ForcedOpen. An operator's
	// decision is not refused, but it is counted, so that the trips after
	// it see the share as it is.
	Acquire()
	// Release gives back one slot taken by TryAcquire or Acquire.
	Release()
}

// ejected reports whether a breaker in state s holds a slot of its
// OpenGate.
func ejected(s State) bool { return s == Open || s == HalfOpen || s == ForcedOpen }

// acquireIf takes a slot of the gate, if there is one, for a manual
// control that moves the breaker from state from to state to and ejects
// it, and reports whether it took one (to be given back if the control's
// swap loses).
func (b *Breaker) acquireIf(from, to State) bool {
	if b.cfg.OpenGate == nil || ejected(from) || !ejected(to) {
		return false
	}
	b.cfg.OpenGate.Acquire()
	return true
}

// releaseIf gives back the breaker's slot, if there is a gate, for a
// committed transition from state from to state to that ends its
// ejection.
func (b *Breaker) releaseIf(from, to State) {
	if b.cfg.OpenGate != nil && ejected(from) && !ejected(to) {
		b.cfg.OpenGate.Release()
	}
}
