package core

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"go.uber.org/atomic"
)

// HeldPermit marks a call that runs under a permit of a breaker (any
// Guard: a *Breaker, a registry's breaker) which a layer around the call
// holds, so that a layer inside it that would ask the
// same breaker for a permit (httpbreaker's Transport, grpcbreaker's
// interceptors) takes none: a second permit per call would count the call
// twice, and in half-open the outer layer's probe would leave the inner one
// refused, so the breaker could never close. The inner layer sends the call
// under the outer permit and reports its verdict of it (Report); the outer
// layer records the call, by that verdict if it is a failure, once.
//
// Make one with WithHeldPermit; find one with HeldPermitOf. Its methods are
// safe for concurrent use, and allocate nothing.
type HeldPermit struct {
	// The latest verdict: 0 while none was reported, else the outcome + 1
	// in the low 2 bits and the retry-after hint in nanoseconds above.
	// First, so that it is 64-bit aligned on 32-bit platforms (heldContext
	// holds the HeldPermit first, and it is allocated).
	verdict atomic.Uint64
	g       Guard
	// outer is the context the mark was put on, where the search for a
	// mark of another breaker goes on.
	outer context.Context
}

// heldContext is a context with a HeldPermit: one allocation for both.
type heldContext struct {
	held HeldPermit // first: see HeldPermit.verdict
	context.Context
}

// heldPermitKey is the context key under which a heldContext answers with
// its mark.
type heldPermitKey struct{}

func (c *heldContext) Value(key any) any {
	if key == (heldPermitKey{}) {
		return &c.held
	}
	return c.Context.Value(key)
}

// WithHeldPermit returns a child of ctx that says that the call running
// under it holds a permit of g, and the mark, from which the holder reads
// the verdict that layers inside the call reported (Reported) when the call
// returns. Marks are found by g itself (==), so the layers inside must ask
// HeldPermitOf with the very Guard the holder passed: a pointer, such as a
// *Breaker or a *registry.Breaker. The child is done when ctx is, with
// ctx's Err. It allocates one context (64 bytes on 64-bit platforms). It
// panics with a message naming the misuse for a nil ctx, a nil g, or a g
// that == cannot compare (of an uncomparable type, or holding an
// uncomparable value in an interface field).
func WithHeldPermit(ctx context.Context, g Guard) (context.Context, *HeldPermit) {
	if ctx == nil {
		// As context.WithValue: a nil parent would fail later, in a
		// Value, Done or Err far from here.
		panic("core: WithHeldPermit of a nil Context")
	}
	if nilGuard(g) {
		panic("core: WithHeldPermit of a nil Guard")
	}
	// A pointer always compares; of any other kind the value decides: a
	// struct type is comparable, yet == panics on one whose interface
	// field holds a slice.
	if t := reflect.TypeOf(g); t.Kind() != reflect.Pointer && !reflect.ValueOf(g).Comparable() {
		panic(fmt.Sprintf("core: WithHeldPermit of a %T, which == cannot compare: pass a pointer", g))
	}
	c := &heldContext{Context: ctx}
	c.held.g, c.held.outer = g, ctx
	return c, &c.held
}

// nilGuard reports whether g is nil, or holds a nil pointer.
func nilGuard(g Guard) bool {
	if g == nil {
		return true
	}
	v := reflect.ValueOf(g)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// HeldPermitOf returns the mark of a permit of g that the call of ctx
// holds (WithHeldPermit with this g, by any layer around it), or nil if
// it holds none. It looks the marks up by ctx's Value, the innermost
// first, and allocates nothing.
func HeldPermitOf(ctx context.Context, g Guard) *HeldPermit {
	for {
		h, _ := ctx.Value(heldPermitKey{}).(*HeldPermit)
		if h == nil || h.g == g {
			return h
		}
		ctx = h.outer
	}
}

// maxHint is the largest retry-after hint a verdict keeps: 2^61 - 1 ns,
// about 73 years, far above MaxOpenDurationLimit.
const maxHint = 1<<61 - 1

// Report gives the verdict of the layer inside the call: its outcome, and
// for a failure the dependency's retry-after hint (0: none; a negative
// hint counts as none, one past 73 years as 73 years). A later report
// replaces an earlier one, so the verdict is that of the call's latest
// attempt. An outcome other than Success, Failure and Ignored counts as
// Failure.
func (h *HeldPermit) Report(o Outcome, retryAfter time.Duration) {
	if o > Ignored {
		o = Failure
	}
	hint := uint64(min(max(retryAfter, 0), maxHint))
	h.verdict.Store(hint<<2 | uint64(o+1))
}

// Reported returns the latest verdict reported (ok false while none was).
func (h *HeldPermit) Reported() (o Outcome, retryAfter time.Duration, ok bool) {
	v := h.verdict.Load()
	if v == 0 {
		return Success, 0, false
	}
	return Outcome(v&3 - 1), time.Duration(v >> 2), true
}
