package resilience

import (
	"context"
	"errors"
	"fmt"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// Layer is one part of a Stack: a Retry, a breaker, a Bulkhead or a
// TimeLimiter. Make one with WithRetry, WithBreaker, WithBulkhead or
// WithTimeLimiter; the zero Layer is refused by NewStack.
type Layer struct {
	retry    *Retry
	guard    core.Guard
	bulkhead *Bulkhead
	limiter  *TimeLimiter
}

// WithRetry is the layer that retries what is inside it.
func WithRetry(r *Retry) Layer { return Layer{retry: r} }

// WithBreaker is the layer that runs what is inside it under a circuit
// breaker (core.Do): a *core.Breaker, a baseline breaker or any
// core.Guard. An open breaker rejects the call without running the
// layers inside it.
//
// A *registry.Breaker, such as the breaker of a host that an httpbreaker
// Transport's Registry returns, or one of grpcbreaker's, may also guard
// the call inside: the layer marks the call's context with its permit
// (core.WithHeldPermit, one allocation per call), and that Transport or
// interceptor then sends under it, taking no second permit, and reports
// its verdict, a failure of which the layer records even if the call
// returned no error.
func WithBreaker(b core.Guard) Layer { return Layer{guard: b} }

// WithBulkhead is the layer that runs what is inside it in a slot of b.
func WithBulkhead(b *Bulkhead) Layer { return Layer{bulkhead: b} }

// WithTimeLimiter is the layer that bounds what is inside it with tl's
// deadline.
func WithTimeLimiter(tl *TimeLimiter) Layer { return Layer{limiter: tl} }

// name says which layer l is, for errors.
func (l Layer) name() string {
	if l.retry != nil {
		return "retry"
	}
	if l.guard != nil {
		return "breaker"
	}
	if l.bulkhead != nil {
		return "bulkhead"
	}
	if l.limiter != nil {
		return "time limiter"
	}
	return "zero Layer"
}

// Stack is an ordered list of layers around a call, outermost first: a
// Stack of WithRetry(r), WithBreaker(b), WithTimeLimiter(tl) runs
// Retry(Breaker(TimeLimiter(call))). Run a call through it with Do. Any
// order, and any layer more than once, is allowed; docs/composition.md
// compares the orders, and DefaultStack builds the recommended one.
//
// A Stack is immutable and safe for concurrent use; it is shared by every
// call through it and by every result type. Through a stack of any
// layers, a call that succeeds at once allocates nothing but what its
// layers do (a TimeLimiter's deadline context, a *registry.Breaker's
// permit mark) and takes no lock.
type Stack struct {
	layers []Layer
}

// NewStack returns the stack of layers, outermost first. Its error matches
// ErrInvalidConfig and names each zero Layer or Layer made from a nil part
// by position; no layers at all is a valid stack that only calls the
// function.
func NewStack(layers ...Layer) (*Stack, error) {
	var errs []error
	for i, l := range layers {
		if l.name() == "zero Layer" || typedNil(l.guard) {
			errs = append(errs, fmt.Errorf("%w: NewStack layer %d is a zero Layer or made from a nil part: make layers with WithRetry, WithBreaker, WithBulkhead or WithTimeLimiter", ErrInvalidConfig, i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Stack{layers: append([]Layer(nil), layers...)}, nil
}

// DefaultStack returns the recommended order,
// Retry(Breaker(Bulkhead(TimeLimiter(call)))), of the four parts, each
// required: its error matches ErrInvalidConfig and names every nil part (a
// nil *core.Breaker included), since a nil part is most often a
// constructor's error left unchecked, and a stack that silently lost its
// breaker would protect nothing. For fewer layers, call NewStack with
// them in this order.
// Retry is outermost so that each attempt passes the breaker: the breaker
// counts the load the dependency really gets, and an open circuit ends the
// retry loop at the first rejection (DefaultRetryable does not retry it).
// The bulkhead is inside the breaker so that a rejected call never takes a
// slot, and a full bulkhead, which the breaker does not count, returns a
// half-open probe's slot. The time limiter is innermost, so that its
// timeout is the failure the breaker counts and the bulkhead slot is held
// only while the bounded call runs. docs/composition.md has the
// trade-offs of the other order.
func DefaultStack(r *Retry, b core.Guard, bh *Bulkhead, tl *TimeLimiter) (*Stack, error) {
	var missing []error
	for _, part := range []struct {
		name string
		nil  bool
	}{{"retry", r == nil}, {"breaker", b == nil || typedNil(b)}, {"bulkhead", bh == nil}, {"time limiter", tl == nil}} {
		if part.nil {
			missing = append(missing, fmt.Errorf("%w: DefaultStack's %s is nil (check its constructor's error; for fewer layers use NewStack)", ErrInvalidConfig, part.name))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	return NewStack(WithRetry(r), WithBreaker(b), WithBulkhead(bh), WithTimeLimiter(tl))
}

// Do runs fn through s, outermost layer first, and returns fn's result or
// the error of the layer that stopped the call: a breaker rejection
// (core.ErrRejected), ErrBulkheadFull, an error matching ErrTimeout,
// ErrRetryBudgetExhausted, or the caller's ctx.Err(). A panic in fn passes
// through every layer (each releases what it holds; a breaker records a
// failure) and re-panics with the same value. Do allocates nothing of its
// own; fn escapes through the layers, so a closure that captures per-call
// values is allocated by its caller. A zero Stack has no layers; a nil s
// panics with a message naming NewStack, and a nil ctx or fn with one
// naming it, before any layer acts (a nil fn's panic would otherwise
// count as the dependency's failure).
func Do[T any](ctx context.Context, s *Stack, fn func(context.Context) (T, error)) (T, error) {
	switch {
	case s == nil:
		panic("resilience: Do with a nil *Stack: make one with NewStack or DefaultStack")
	case ctx == nil:
		panic("resilience: Do with a nil context: pass context.Background() or the caller's context")
	case fn == nil:
		panic("resilience: Do with a nil function: pass the call to make")
	}
	return step[T]{layers: s.layers, fn: fn}.call(ctx)
}

// step is the rest of a stack below one layer, ending in the call: a
// plain value, so passing it down allocates nothing.
type step[T any] struct {
	layers []Layer
	fn     func(context.Context) (T, error)
}

// call runs the first layer of st around the rest, or the function when
// no layer is left.
func (st step[T]) call(ctx context.Context) (T, error) {
	if len(st.layers) == 0 {
		return st.fn(ctx)
	}
	l, next := st.layers[0], step[T]{layers: st.layers[1:], fn: st.fn}
	if l.retry != nil {
		return retryCall(ctx, l.retry, next)
	}
	if b, ok := l.guard.(*registry.Breaker); ok {
		return heldCall(ctx, b, next)
	}
	if l.guard != nil {
		return core.Do(ctx, l.guard, next.call)
	}
	if l.bulkhead != nil {
		return bulkheadCall(ctx, l.bulkhead, next)
	}
	return limitCall(ctx, l.limiter, next)
}

// heldCall is core.Do for a registry's breaker, which an httpbreaker
// Transport or a grpcbreaker interceptor inside the call may hold too: the
// call runs under a context that says it holds a permit of b
// (core.WithHeldPermit), so such a layer takes no second permit and reports
// its verdict instead, and a failure it reported is recorded (with its
// retry-after hint) even if the call returned no error.
func heldCall[T any](ctx context.Context, b *registry.Breaker, next step[T]) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	p, err := b.Allow()
	if err != nil {
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			b.Record(p, core.Failure)
		}
	}()
	held, mark := core.WithHeldPermit(ctx, b)
	v, err := next.call(held)
	finished = true
	if o, hint, ok := mark.Reported(); ok && o == core.Failure {
		b.RecordHint(p, hint)
	} else {
		b.Done(p, err)
	}
	return v, err
}
