package core

import (
	"fmt"
	"time"
)

// State is the position of a breaker in its state machine.
//
// The zero value is Closed. Open, HalfOpen and the rest follow from calls;
// ForcedOpen, Disabled and MetricsOnly only from the manual controls
// (ForceOpen, Disable, MetricsOnly), as in Resilience4j, or from
// Config.InitialState and Restore.
type State uint8

const (
	// Closed admits every call and counts outcomes in the sliding window.
	Closed State = iota
	// Open rejects every call with ErrOpen until the open duration elapses.
	Open
	// HalfOpen admits up to PermittedCallsInHalfOpen probes; their outcomes
	// close or re-open the breaker.
	HalfOpen
	// ForcedOpen rejects every call with ErrForcedOpen until a manual
	// control moves the breaker on; time never ends it (Resilience4j
	// FORCED_OPEN).
	ForcedOpen
	// Disabled admits every call and records nothing: outcomes are dropped
	// and the breaker never trips (Resilience4j DISABLED).
	Disabled
	// MetricsOnly admits every call and counts outcomes like Closed, but
	// where Closed would trip it commits MetricsOnly -> MetricsOnly instead
	// (a new generation and a fresh window, and the notification that says
	// "would have opened"); it never rejects (Resilience4j METRICS_ONLY).
	MetricsOnly

	// NumStates is the number of states, for tables indexed by State.
	NumStates = 6
)

// String returns "closed", "open", "half-open", "forced-open", "disabled" or
// "metrics-only", or "state(N)" for a value no breaker produces. It does not
// allocate for the real states.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	case ForcedOpen:
		return "forced-open"
	case Disabled:
		return "disabled"
	case MetricsOnly:
		return "metrics-only"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// The lock-free breaker keeps its whole state machine in one uint64, the
// state word (Breaker.state, whose comment has the layout), advanced only
// by compare-and-swap. A transition changes the state, the generation and
// the payload in one CAS, so no reader can ever see a state that disagrees
// with its deadline or its probe counts (the Hystrix drift, regressions.md
// B25).
//
// The generation is in the high bits so that incrementing it by adding
// genOne can only carry out of the word, never into another field.
//
// The breaker generation itself is 64 bits: the number of transitions
// committed since New. Permits, notifications and Counts carry all of it,
// and an outcome counts only if its permit names the current generation
// exactly, so a permit held across any number of transitions below 2^64 is
// stale (R8, R15): at 10^8 transitions a second, 2.5 times the fastest
// rate a tight loop of any public call commits them on the machine the
// bound was measured on (docs/design.md, Widths), 2^64 takes 5,800 years.
// The word has room
// for only its low 20 bits; Breaker.base, a second word on the state
// word's cache line, names the rest. base is a breaker generation that was
// current at some time: it never exceeds the current one and trails it by
// less than 2^20 (the lag), so the current generation is the one value in
// [base, base+2^20) with the word's low bits (fullGen). A committer raises
// base to the generation it committed once the lag reaches 2^16
// (committed), before anything else can run (no user code comes between a
// transition's swap and that step), so the lag reaches 2^20 only if 2^20 -
// 2^16 goroutines have each committed one of the latest transitions and
// not yet taken the next few steps, all at once. docs/design.md has the
// argument for how each reader combines the two words.
//
// The deadline has 36 bits of milliseconds: 2^36 ms is about 795 days, and
// it is compared by signed difference, so it is exact while an open breaker
// sees an Allow at least once every 2^35 ms (about 397 days); State and
// Counts read it but write nothing. The coarse
// deadlines (coarse.go) are compared the same way, with a remainder beyond
// their span read as passed; docs/design.md has the idle times where the
// 19 and 15 bits can still mislead.
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
	probeBits   = 7
	probeMask   = 1<<probeBits - 1
	maxStep     = stepMask
	maxProbes   = probeMask
	deadlineMod = 1 << payBits

	consecShift = 8
	consecBits  = 16
	consecMask  = 1<<consecBits - 1
	maxConsec   = consecMask
	rampFlag    = 1 << 24
	rampShift   = 25
	rampBits    = 19
	rampMask    = 1<<rampBits - 1
	expiryShift = payShift + 3*probeBits
	expiryBits  = payBits - 3*probeBits
	expiryMask  = 1<<expiryBits - 1
)

// word is an unpacked view of the state word. fields and packed translate
// whole words; stateWord's accessors read one field in place. A field that
// the state does not carry is zero.
type word struct {
	state    State
	step     uint8
	gen      uint32
	deadline uint64 // Open: ms mod 2^36
	inFlight uint8  // HalfOpen
	success  uint8  // HalfOpen
	failure  uint8  // HalfOpen: probe failures that did not re-open
	expiry   uint32 // HalfOpen: max-wait deadline, coarse units mod 2^15
	consec   uint32 // Closed, MetricsOnly
	ramping  bool   // Closed
	rampEnd  uint32 // Closed: ramp-up deadline, coarse units mod 2^19
}

// stateWord is a value of the state word, as loaded or about to be
// swapped in. Each accessor reads one field in place (without unpacking
// the rest, which a hot path cannot afford); what it returns for a state
// that does not carry the field is meaningless.
type stateWord uint64

// The fields a comparison of two words (sameIn) looks at.
const (
	stateAndGen     = stateMask | genMask<<genShift
	stateRampAndGen = stateAndGen | rampFlag
)

// sameIn reports whether w and v agree in the fields that mask selects.
func (w stateWord) sameIn(v, mask stateWord) bool { return (w^v)&mask == 0 }

// state is the word's state, or a claim's kind (claimOpen, claimOther).
func (w stateWord) state() State { return State(w & stateMask) }

// claimed reports whether w holds a claimed transition rather than a state.
func (w stateWord) claimed() bool { return w&stateMask >= claimOpen }

// counting reports whether w's state counts outcomes in a window.
func (w stateWord) counting() bool { return counting(w.state()) }

// step is the open-duration backoff step (also a claim's).
func (w stateWord) step() uint8 { return uint8(w >> stepShift & stepMask) }

// genField is the generation field: the breaker generation's low 20 bits.
func (w stateWord) genField() uint64 { return uint64(w >> genShift) }

// deadline is an open word's deadline, in ms mod 2^36.
func (w stateWord) deadline() uint64 { return uint64(w >> payShift & payMask) }

// consec is a closed or metrics-only word's run of consecutive failures.
func (w stateWord) consec() uint32 { return uint32(w >> consecShift & consecMask) }

// withConsec is w with its run of consecutive failures set to n (at most
// maxConsec); everything else, the ramp-up bits included, rides along.
func (w stateWord) withConsec(n uint32) stateWord {
	return w&^(consecMask<<consecShift) | stateWord(n)<<consecShift
}

// plainClosed reports whether w is closed and not ramping up: one mask
// test, Allow's fast path.
func (w stateWord) plainClosed() bool { return w&(stateMask|rampFlag) == 0 }

// ramping reports whether a closed word is ramping up.
func (w stateWord) ramping() bool { return w&rampFlag != 0 }

// closedNoRun reports whether w is closed, with the low 20 bits of
// generation gen, and no run of failures that a success would have to end:
// what the fast paths of Done and Record need. It does not consult base, so it
// cannot tell gen from a generation 2^20 away; where that matters the
// caller asks Breaker.closedOf, which adds base's bound.
func (w stateWord) closedNoRun(gen uint64) bool {
	// gen<<genShift keeps only gen's low 20 bits, in the field's place, so
	// one XOR and one mask test state, run and generation together.
	return (w^stateWord(gen<<genShift))&noRunMask == 0
}

// noRunMask is closedNoRun's: the state, the run of failures and the
// generation.
const noRunMask = stateMask | consecMask<<consecShift | genMask<<genShift

// explicitMillis is an open claim's explicit duration in whole
// milliseconds, and whether it has one (else: the step's open duration).
// For claimOther, has is the ramp-up flag.
func (w stateWord) explicitMillis() (ms uint64, has bool) {
	return uint64(w >> explicitShift & explicitMask), w&claimFlag != 0
}

// fields is w unpacked: the one translation from the word to its fields
// (packed is the other way). It is not a wrapper of a shared helper
// because the inliner copies a struct result once per level: a wrapper
// cost Counts a 48-byte copy.
func (w stateWord) fields() word {
	u := word{
		state: State(w & stateMask),
		step:  uint8(w >> stepShift & stepMask),
		gen:   uint32(w >> genShift & genMask),
	}
	switch u.state {
	case Closed:
		u.consec = uint32(w >> consecShift & consecMask)
		u.ramping = w&rampFlag != 0
		u.rampEnd = uint32(w >> rampShift & rampMask)
	case MetricsOnly:
		u.consec = uint32(w >> consecShift & consecMask)
	case Open:
		u.deadline = uint64(w >> payShift & payMask)
	case HalfOpen:
		u.inFlight = uint8(w >> payShift & probeMask)
		u.success = uint8(w >> (payShift + probeBits) & probeMask)
		u.failure = uint8(w >> (payShift + 2*probeBits) & probeMask)
		u.expiry = uint32(w >> expiryShift & expiryMask)
	}
	return u
}

// packed is u packed, as a value of the state word (the translation
// itself, for the reason fields gives).
func (u word) packed() stateWord {
	var p uint64
	switch u.state {
	case Closed, MetricsOnly:
		p = uint64(u.consec&consecMask)<<consecShift | uint64(u.rampEnd&rampMask)<<rampShift
		if u.ramping {
			p |= rampFlag
		}
	case Open:
		p = (u.deadline & payMask) << payShift
	case HalfOpen:
		p = uint64(u.inFlight)<<payShift | uint64(u.success)<<(payShift+probeBits) |
			uint64(u.failure)<<(payShift+2*probeBits) | uint64(u.expiry&expiryMask)<<expiryShift
	}
	return stateWord(uint64(u.state)&stateMask |
		uint64(u.step&stepMask)<<stepShift |
		p |
		uint64(u.gen&genMask)<<genShift)
}

// signedDiff is (a - b) mod 2^bits read as a signed number of bits bits:
// exact whenever the true difference is within ±2^(bits-1).
func signedDiff(a, b uint64, bits uint) int64 {
	return int64((a-b)<<(64-bits)) >> (64 - bits)
}

// genSpan is the number of generations the word's field tells apart, and
// baseStep the lag at which a committer raises Breaker.base.
const (
	genSpan  = 1 << genBits
	baseStep = 1 << 16
)

// fullGen is the breaker generation of word w, given base, a value of
// Breaker.base: the one generation in [base, base+2^20) whose low 20 bits
// are the word's generation field. It is exact when base was loaded while
// the word's generation was current, or before (within less than 2^20 -
// lag transitions), never after; see docs/design.md.
func fullGen(base uint64, w stateWord) uint64 { return base + (w.genField()-base)&genMask }

// lowGen is the word's generation field for breaker generation g.
func lowGen(g uint64) uint32 { return uint32(g) & genMask }

// A claimed transition. A transition whose new word depends on the clock
// (an open deadline, a half-open max-wait deadline, a ramp-up deadline)
// commits in two swaps: the claim puts one of the two spare values of the
// three state bits in the word, with everything the new word needs but the
// clock reading; the reading is taken after the claim; the commit replaces
// the claim with the new word at that reading. Every call that finds a
// claim completes it first with a reading of its own (help), and the first
// commit wins, so no call ever decides on a claimed word and none waits
// for another (docs/design.md, Transitions).
//
//	claimOpen (6):  to Open at step (bits 3..7), generation g+1 (the new
//	                one). Bit 8 clear: for the step's open duration.
//	                Bit 8 set: for bits 9..43 milliseconds (a retry-after
//	                hint or ForceOpen's duration, rounded up to whole ms).
//	claimOther (7): bit 8 clear: to HalfOpen at step and the max wait's
//	                deadline, with one probe in flight (the claimer's), or
//	                with none if bit 9 is set (the manual control
//	                HalfOpen); bit 8 set: to Closed (step 0) ramping up;
//	                bits 8 and 9 set, and nothing else: moving, the final
//	                word of a breaker whose rules Reconfigure replaced.
const (
	claimOpen  = 6
	claimOther = 7

	claimFlag     = 1 << payShift  // explicit duration, or ramp-up
	noProbe       = claimFlag << 1 // claimOther to HalfOpen: no probe in flight
	explicitShift = payShift + 1
	explicitBits  = payBits - 1
	explicitMask  = 1<<explicitBits - 1

	// moving is never completed by help and never left: no swap from an
	// earlier word can succeed once it is in, so a decision taken on the
	// old rules cannot land (reconfigure.go).
	moving stateWord = claimOther | claimFlag | noProbe
)

// An explicit open duration of up to MaxOpenDurationLimit, in whole
// milliseconds, fits in a claim: this constant overflows (a compile error)
// if a change of the layout leaves the claim too few bits.
const _ = uint64(explicitMask - uint64(MaxOpenDurationLimit/time.Millisecond))

// claimWord packs a claim of kind (claimOpen or claimOther) to step and
// generation gen, with the payload's low bits pay. The four claims below
// are the ones the table above names.
func claimWord(kind uint64, step uint8, gen uint32, pay uint64) stateWord {
	return stateWord(kind | uint64(step&stepMask)<<stepShift | pay&payMask<<payShift | uint64(gen&genMask)<<genShift)
}

// claimOpenStep claims open at step for the step's open duration.
func claimOpenStep(step uint8, gen uint32) stateWord { return claimWord(claimOpen, step, gen, 0) }

// claimOpenMillis claims open at step for ms milliseconds.
func claimOpenMillis(step uint8, gen uint32, ms uint64) stateWord {
	return claimWord(claimOpen, step, gen, ms<<(explicitShift-payShift)|claimFlag>>payShift)
}

// claimHalfOpen claims half-open at step, the claimer's probe in flight.
func claimHalfOpen(step uint8, gen uint32) stateWord { return claimWord(claimOther, step, gen, 0) }

// claimManualHalfOpen claims half-open at step 0 with no probe in flight:
// the manual control HalfOpen.
func claimManualHalfOpen(gen uint32) stateWord {
	return claimWord(claimOther, 0, gen, noProbe>>payShift)
}

// claimRampUp claims closed, ramping up.
func claimRampUp(gen uint32) stateWord { return claimWord(claimOther, 0, gen, claimFlag>>payShift) }

// deadline is the open-state payload: the first whole millisecond at or
// after now+d, mod 2^36. Rounding up keeps the open duration from being
// shortened by the coarser unit.
func deadline(now, d time.Duration) uint64 {
	return deadlineMillis(now, d) % deadlineMod
}

// deadlineMillis is the open deadline rule: the first whole millisecond of
// the clock at or after now+d, with a negative reading counted as zero. It
// works in milliseconds so that no clock reading (up to 2^63-1 ns) and
// duration (up to a year) can overflow.
func deadlineMillis(now, d time.Duration) uint64 { return ceilUnits(now, d, time.Millisecond) }

// untilDeadline is how long before a call at now may probe, or 0 if it may.
// The difference is taken mod 2^36 and read as signed, so it is exact for
// clock readings within 2^35 ms of the deadline; a reading that went
// backwards only makes the wait longer (R14).
func untilDeadline(dl uint64, now time.Duration) time.Duration {
	if now < 0 {
		now = 0
	}
	nowMs := uint64(now / time.Millisecond)
	diff := signedDiff(dl, nowMs, payBits)
	if diff <= 0 {
		return 0
	}
	return time.Duration(diff)*time.Millisecond - now%time.Millisecond
}
