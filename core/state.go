package core

import "fmt"

// State is the position of a breaker in its state machine.
//
// The zero value is Closed. Three more values fit in the state word's three
// state bits and are reserved for the manual controls (forced open, disabled,
// metrics-only) that come with a later feature; no breaker reports them yet.
type State uint8

const (
	// Closed admits every call and counts outcomes in the sliding window.
	Closed State = iota
	// Open rejects every call with ErrOpen until the open duration elapses.
	Open
	// HalfOpen admits up to PermittedCallsInHalfOpen probes; their outcomes
	// close or re-open the breaker.
	HalfOpen
)

// String returns "closed", "open" or "half-open", or "state(N)" for a value
// no breaker produces. It does not allocate for the three real states.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// The lock-free breaker keeps its whole state machine in one uint64, the
// state word, advanced only by compare-and-swap. A transition changes the
// state, the generation and the payload in one CAS, so no reader can ever see
// a state that disagrees with its deadline or its probe counts (the Hystrix
// drift, regressions.md B25).
//
//	bits    width  field       meaning
//	 0..2     3    state       Closed, Open, HalfOpen (values 3..7 reserved)
//	 3..7     5    step        open-duration backoff step, 0..31; reset on close
//	 8..43   36    payload     depends on state, see below
//	44..63   20    generation  +1 on every committed transition, mod 2^20
//
//	payload in Closed:   consecutive failures (bits 8..43, saturating)
//	payload in Open:     deadline: the first millisecond of the breaker clock
//	                     at which a call may probe, mod 2^36
//	payload in HalfOpen: bits 8..15 probes in flight, bits 16..23 probe
//	                     successes counted, bits 24..43 zero
//
// The generation is in the high bits so that incrementing it by adding
// genOne can only carry out of the word, never into another field. Its width
// bounds stale-permit aliasing: an outcome is mistaken for a current one only
// if its call stays in flight across exactly a multiple of 2^20 (1,048,576)
// transitions; every open -> half-open step waits at least one open duration,
// so with a one-second open duration that takes about 4 days of continuous
// flapping (docs/design.md, R15).
//
// The deadline has 36 bits of milliseconds: 2^36 ms is about 795 days, and
// it is compared by signed difference, so it is exact while an open breaker
// is consulted at least once every 2^35 ms (about 397 days).
const (
	stateBits   = 3
	stepShift   = 3
	stepBits    = 5
	payShift    = 8
	payBits     = 36
	genShift    = 44
	genBits     = 20
	stateMask   = 1<<stateBits - 1
	stepMask    = 1<<stepBits - 1
	payMask     = 1<<payBits - 1
	genMask     = 1<<genBits - 1
	genOne      = uint64(1) << genShift
	probeBits   = 8
	probeMask   = 1<<probeBits - 1
	maxStep     = stepMask
	maxConsec   = payMask
	maxProbes   = probeMask
	deadlineMod = 1 << payBits
)

// word is an unpacked view of the state word. Only pack and unpack translate
// between the two; everything else works on fields.
type word struct {
	state    State
	step     uint8
	payload  uint64
	gen      uint32
	inFlight uint8 // HalfOpen only
	success  uint8 // HalfOpen only
}

func unpack(w uint64) word {
	u := word{
		state:   State(w & stateMask),
		step:    uint8(w >> stepShift & stepMask),
		payload: w >> payShift & payMask,
		gen:     uint32(w >> genShift & genMask),
	}
	if u.state == HalfOpen {
		u.inFlight = uint8(u.payload & probeMask)
		u.success = uint8(u.payload >> probeBits & probeMask)
	}
	return u
}

func pack(u word) uint64 {
	p := u.payload
	if u.state == HalfOpen {
		p = uint64(u.inFlight) | uint64(u.success)<<probeBits
	}
	return uint64(u.state)&stateMask |
		uint64(u.step&stepMask)<<stepShift |
		(p&payMask)<<payShift |
		uint64(u.gen&genMask)<<genShift
}

// GenerationModulus is the number of distinct generations: a Permit's and a
// Transition's Generation is the breaker generation mod GenerationModulus
// (2^20). Both implementations wrap at the same point.
const GenerationModulus = 1 << 20

// nextGen is the generation after g, wrapping at 2^20 like the word does.
func nextGen(g uint32) uint32 { return (g + 1) & genMask }
