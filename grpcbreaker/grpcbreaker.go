// Package grpcbreaker puts circuit breakers in a gRPC client: unary and
// streaming client interceptors with one breaker per method, per target,
// or per any key of a call, from a registry made from one template
// core.Config.
//
//	ic, err := grpcbreaker.New(grpcbreaker.Options{Config: core.Config{...}})
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(ic.Unary()), grpc.WithStreamInterceptor(ic.Stream()), ...)
//
// A call whose breaker refuses is not sent: it fails with a status of
// code Unavailable whose details hold an errdetails.RetryInfo with the
// wait (when the breaker knows one), and the caller's grpc.Trailer call
// option, if any, gets the same wait as grpc-retry-pushback-ms; for Go
// callers the error also matches core.ErrRejected and its reason with
// errors.Is, and core.RetryAfterOf(err) says when to try again. Every
// other call is sent, and its final status is its outcome: for a stream,
// the status it ends with (RecvMsg's error, io.EOF being OK), or the
// cancellation of its context. By default Unavailable, DeadlineExceeded,
// ResourceExhausted, Internal, Unknown and DataLoss are failures,
// Canceled is ignored, and every other code, the caller's own mistakes
// such as InvalidArgument or NotFound included, is a success: the server
// answered (DefaultClassifier). A stream its caller cancels after it has
// read a message of it is OK. A request the client's gRPC library refuses
// to send (it cannot marshal it, it is over the call's
// grpc.MaxCallSendMsgSize, or its outgoing metadata has a key or a value
// gRPC does not allow) is ignored whatever its code: nothing the client
// decides on its own counts against the server. With
// Config.MaxRetryAfter set, a failure's server pushback (the
// grpc-retry-pushback-ms trailer, or a RetryInfo in the status details)
// keeps the breaker open at least that long, capped at MaxRetryAfter.
//
// The breakers live in a registry bounded by default (Options.MaxBreakers,
// Options.IdleAfter), so that keys made from what callers send cannot
// grow it without limit.
//
// User code that the interceptors run (Options.Key, Options.Classifier, and
// the listener Config.OnStateChange, which runs inside the recording of an
// outcome) runs on a caller's goroutine, so that a panic in it reaches
// the caller, with one exception: the end of a stream's context is
// recorded on a goroutine of package context. A panic there is recovered
// and raised again, with the same value and once, on a goroutine of the
// caller's: by the stream's next RecvMsg, SendMsg, Header or CloseSend,
// or, if none comes first, by the next call through the same
// Interceptors, before it is admitted.
package grpcbreaker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/atomic"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// Options configures the interceptors. Only Config is required.
type Options struct {
	// Config is the template of every key's breaker (see registry.Options:
	// each breaker is named Config.Name + "/" + key, or the key alone).
	// Set MaxRetryAfter to honour server pushback. Its Classifier must be
	// nil: the interceptors classify by Options.Classifier, so New refuses a
	// Config that sets one rather than ignore it.
	Config core.Config
	// Key picks the breaker of a call from its context, its connection
	// and its full method name ("/package.Service/Method"). It runs on the
	// caller's goroutine before every call. Zero: ByMethod.
	Key func(ctx context.Context, cc *grpc.ClientConn, method string) string
	// Classifier maps a call's final error (nil for OK) to an outcome. It
	// is not asked about a request the client refused to send (see the
	// package doc), which is ignored. Zero: DefaultClassifier. A panic in it
	// propagates (see the package doc for a stream's context); the call's
	// permit is then released as Ignored.
	Classifier func(err error) core.Outcome
	// MaxBreakers bounds the number of breakers, so that keys made from
	// what callers send (a tenant, a target) cannot grow the registry
	// without limit: at the bound, a new key's breaker replaces one not
	// used lately (an approximation of least recently used) that is
	// neither open nor forced open and has no call in flight (a half-open
	// one between probes may go, and its key starts over closed); if
	// every breaker is open or busy the call fails unsent with
	// registry.ErrFull (see registry.Options). An evicted key starts over
	// with a fresh window, so keep the bound above the number of keys in
	// use. Zero: DefaultMaxBreakers. Negative (NoLimit): no bound.
	MaxBreakers int
	// IdleAfter is how long a breaker that is not open may go without a
	// call before the registry may evict it (see
	// registry.Options.IdleAfter). Zero: DefaultIdleAfter. Negative
	// (NoLimit): never idle.
	IdleAfter time.Duration
	// MaxOpenPercent caps the share of the keys' breakers that may be
	// open (or half-open, or forced open) at once, in percent, 1..100,
	// as the outlier detection's max_ejection_percent of Envoy and gRPC:
	// past it a key's trip is refused and its breaker stays closed
	// (core.ReasonCapped), so that a fault of the client's own, which
	// fails every key, cannot shed all of them. It means most with keys
	// that name servers (ByTarget). At least one key may always open.
	// See registry.Options.MaxOpenPercent. Zero: no cap. Outside 0..100:
	// New's error.
	MaxOpenPercent int
	// Extension adds a part of its own to each key's breaker, such as
	// the fleet module's membership, so that replicas share the key's open
	// state and probe budget (see registry.Options.Extension). Zero: none.
	Extension registry.Extension
}

// The bounds of the registry when Options leaves them zero. 10,000
// breakers take about 4 MB with no window, 15 MB with a count window of
// 100 calls and up to 72 MB with a 60-second time window, as httpbreaker's
// (docs/design.md states the memory per breaker), and are
// more methods or targets than a client calls in the usual case. A
// breaker without a call for 10 minutes has been idle longer than any
// sensible open duration or time window, so its window says little about
// the server's health now.
const (
	DefaultMaxBreakers = 10_000
	DefaultIdleAfter   = 10 * time.Minute
)

// NoLimit, as Options.MaxBreakers or Options.IdleAfter, turns that bound
// off: the registry then keeps one breaker per key for as long as the
// Interceptors live.
const NoLimit = -1

// ByMethod keys a call by its full method name: one breaker per method,
// whatever the connection. The default Options.Key.
func ByMethod(_ context.Context, _ *grpc.ClientConn, method string) string { return method }

// ByTarget keys a call by its connection's target (ClientConn.Target):
// one breaker per server address or name, whatever the method.
func ByTarget(_ context.Context, cc *grpc.ClientConn, _ string) string { return cc.Target() }

// Interceptors holds the breakers of the unary and streaming client
// interceptors it makes, which share them. Make one with New: the
// interceptors of a zero Interceptors panic with "grpcbreaker:
// Interceptors used without New" at their first call. It is safe for
// concurrent use.
type Interceptors struct {
	reg      *registry.Registry[string]
	key      func(context.Context, *grpc.ClientConn, string) string
	classify func(error) core.Outcome
	// pending is a panic recovered on a stream context's goroutine and not
	// raised again yet: the next admission raises it.
	pending atomic.Pointer[recovered]
}

// New returns the interceptors' breakers. It returns the registry's error
// for a bad template Config, and a *core.ConfigError for a
// Config.Classifier (both matching core.ErrInvalidConfig); it never
// panics.
func New(o Options) (*Interceptors, error) {
	if o.Config.Classifier != nil {
		return nil, &core.ConfigError{Field: "Classifier", Problem: "not used by grpcbreaker, which classifies by Options.Classifier (the call's final error): set that instead"}
	}
	reg, err := registry.New(registry.Options[string]{Config: o.Config,
		MaxBreakers: bound(o.MaxBreakers, DefaultMaxBreakers), IdleAfter: bound(o.IdleAfter, DefaultIdleAfter),
		MaxOpenPercent: o.MaxOpenPercent, Extension: o.Extension})
	if err != nil {
		return nil, err
	}
	ic := &Interceptors{reg: reg, key: o.Key, classify: o.Classifier}
	if ic.key == nil {
		ic.key = ByMethod
	}
	if ic.classify == nil {
		ic.classify = DefaultClassifier
	}
	return ic, nil
}

// bound is the registry's option for v: def for zero, 0 (no bound) for a
// negative v.
func bound[T int | time.Duration](v, def T) T {
	if v < 0 {
		return 0
	}
	if v == 0 {
		return def
	}
	return v
}

// Registry returns the breakers, by key, for metrics and manual controls.
func (ic *Interceptors) Registry() *registry.Registry[string] { return ic.reg }

// admit returns the breaker of the call and its permit, or the error to
// fail the call with: the context's own status if it is done already (no
// permit taken), the rejection, or a full registry. It first raises a
// panic recovered on a stream context's goroutine, if one is pending. If
// the call's context holds a permit of the breaker already
// (core.HeldPermitOf), it returns that holder's mark instead of a permit
// of its own.
func (ic *Interceptors) admit(ctx context.Context, cc *grpc.ClientConn, method string) (*registry.Breaker, core.Permit, *core.HeldPermit, error) {
	if ic.reg == nil {
		panic("grpcbreaker: Interceptors used without New")
	}
	if r := ic.pending.Load(); r != nil {
		ic.raise(r)
	}
	if err := ctx.Err(); err != nil {
		return nil, core.Permit{}, nil, toStatusError(err)
	}
	b, err := ic.reg.Get(ic.key(ctx, cc, method))
	if err != nil {
		return nil, core.Permit{}, nil, newRejection(err, "", 0)
	}
	if held := core.HeldPermitOf(ctx, b); held != nil {
		return b, core.Permit{}, held, nil
	}
	p, err := b.Allow()
	if err != nil {
		return nil, core.Permit{}, nil, newRejection(err, b.Settings().Name, p.RetryAfter)
	}
	return b, p, nil, nil
}

// record records the outcome of err, the call's final error, for p, with
// the server's pushback as the hint of a failure when the breaker honours
// hints.
func (ic *Interceptors) record(b *registry.Breaker, p core.Permit, o core.Outcome, err error, trailer metadata.MD) {
	if d := hint(b, o, err, trailer); d > 0 {
		b.RecordHint(p, d) // bounded by MaxRetryAfter there
		return
	}
	b.Record(p, o)
}

// hint is the server's pushback if o is a failure and b honours hints, and
// 0 otherwise.
func hint(b *registry.Breaker, o core.Outcome, err error, trailer metadata.MD) time.Duration {
	if o == core.Failure && b.Settings().MaxRetryAfter > 0 {
		return Pushback(err, trailer)
	}
	return 0
}

// Unary returns the unary client interceptor. A refused call is not sent
// (see the package doc); an admitted one is recorded when the invoker
// returns, with its trailer read for pushback, or ignored if the client
// refused to send it. A panic in the invoker releases the permit as
// Ignored and propagates. A call first raises the panic of a stream's
// context callback that no stream method has raised yet (see the package
// doc). A call whose context holds a permit of its breaker already (a
// resilience.Stack's breaker layer given the breaker from Registry: see
// core.HeldPermit) is sent under that permit without taking its own, and
// its outcome and pushback are reported to the holder, which records them.
func (ic *Interceptors) Unary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		b, p, held, err := ic.admit(ctx, cc, method)
		if err != nil {
			fillTrailers(opts, err)
			return err
		}
		recorded := false
		defer func() {
			if !recorded && held == nil {
				b.Record(p, core.Ignored) // the invoker or the classifier panicked
			}
		}()
		var trailer metadata.MD
		// A copy: appending to the caller's slice could write into its
		// spare capacity.
		opts = append(slices.Clip(opts), grpc.Trailer(&trailer))
		err = invoker(ctx, method, req, reply, cc, opts...)
		o := ic.judge(ctx, err, req, opts)
		recorded = true
		if held != nil {
			held.Report(o, hint(b, o, err, trailer))
			return err
		}
		ic.record(b, p, o, err, trailer)
		return err
	}
}

// Stream returns the streaming client interceptor. A refused stream is
// not opened (see the package doc); an opened one is recorded once, when
// it ends: RecvMsg returns an error (io.EOF: OK) or, for a stream without
// server streaming, its one response; SendMsg fails with anything but
// io.EOF (ignored if the client refused to send the message); Header
// fails with anything but io.EOF; or the stream's context is done, which
// records the context's status (Canceled: ignored). A stream cancelled by
// its caller after RecvMsg has returned a message of it is recorded as OK:
// the server was answering, and a half-open breaker's probe that its
// caller stops reading early still decides the breaker. A stream that is
// neither read to its end nor cancelled keeps its permit, as it keeps
// gRPC's resources. A panic that the end of the stream's context causes
// in the classifier or a listener is raised by the stream's next method,
// or by the interceptors' next call (see the package doc). A stream whose
// context holds a permit of its breaker already (see Unary) is opened
// under that permit without taking its own; the holder records the call
// that opened it by that call's error.
func (ic *Interceptors) Stream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		b, p, held, err := ic.admit(ctx, cc, method)
		if err != nil {
			return nil, err
		}
		if held != nil {
			// The holder records the call by its own error: a stream
			// outlives the call that opens it.
			return streamer(ctx, desc, cc, method, opts...)
		}
		opened := false
		defer func() {
			if !opened {
				b.Record(p, core.Ignored) // the streamer or the classifier panicked
			}
		}()
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			o := ic.judge(ctx, err, nil, opts)
			opened = true
			ic.record(b, p, o, err, nil)
			return nil, err
		}
		opened = true
		w := &watchedStream{ClientStream: cs, ctx: ctx, ic: ic, b: b, p: p, serverStreams: desc.ServerStreams, opts: opts}
		w.stop = context.AfterFunc(ctx, w.contextDone)
		return w, nil
	}
}

// fillTrailers sets the trailer of each grpc.Trailer call option to the
// rejection's wait, as grpc-retry-pushback-ms, so that a caller reading
// trailers sees it as it would a server's pushback.
func fillTrailers(opts []grpc.CallOption, err error) {
	wait := retryDelay(err)
	if wait <= 0 {
		return
	}
	for _, o := range opts {
		if t, ok := o.(grpc.TrailerCallOption); ok && t.TrailerAddr != nil {
			*t.TrailerAddr = metadata.Pairs(PushbackKey, fmt.Sprint(wait.Milliseconds()))
		}
	}
}
