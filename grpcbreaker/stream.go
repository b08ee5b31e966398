package grpcbreaker

import (
	"context"
	"errors"
	"io"

	"go.uber.org/atomic"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// watchedStream is an admitted stream that records its outcome once,
// when it ends (see Interceptors.Stream).
type watchedStream struct {
	grpc.ClientStream
	ctx           context.Context // the caller's, as the interceptor got it
	ic            *Interceptors
	b             *registry.Breaker
	p             core.Permit
	serverStreams bool
	opts          []grpc.CallOption // the stream's, for the codec of SendMsg's message
	stop          func() bool       // stops the context's callback
	done          atomic.Bool
	// received is set once RecvMsg has returned a message: the server
	// answered, so a cancellation of the caller's is no longer ignored.
	received atomic.Bool
	// panicked is a panic of the context's callback, for the stream's
	// next method to raise.
	panicked atomic.Pointer[recovered]
}

// RecvMsg is the stream's RecvMsg, recording the end it reports.
func (w *watchedStream) RecvMsg(m any) error {
	w.raisePanic()
	err := w.ClientStream.RecvMsg(m)
	if err == nil && w.serverStreams {
		w.received.Store(true)
		return nil
	}
	// The end: an error (io.EOF: OK), or the one response of a stream
	// without server streaming, whose status, OK, gRPC has read too.
	end := err
	if errors.Is(err, io.EOF) {
		end = nil
	}
	w.end(end, true)
	return err
}

// SendMsg is the stream's SendMsg, recording an error other than io.EOF
// (which only says that the stream has ended: RecvMsg tells how), or
// ignoring it if the client refused to send m.
func (w *watchedStream) SendMsg(m any) error {
	w.raisePanic()
	err := w.ClientStream.SendMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if clientsOwn(w.ctx, err, m, w.opts) {
		w.ignore()
	} else {
		w.end(err, false)
	}
	return err
}

// Header is the stream's Header, recording an error other than io.EOF.
func (w *watchedStream) Header() (metadata.MD, error) {
	w.raisePanic()
	md, err := w.ClientStream.Header()
	if err != nil && !errors.Is(err, io.EOF) {
		w.end(err, false)
	}
	return md, err
}

// CloseSend is the stream's CloseSend.
func (w *watchedStream) CloseSend() error {
	w.raisePanic()
	return w.ClientStream.CloseSend()
}

// end records the stream's end with its final error (nil: OK), reading
// its trailer for pushback if the stream has one to read.
func (w *watchedStream) end(err error, trailer bool) {
	w.stop()
	var md metadata.MD
	if trailer {
		md = w.ClientStream.Trailer()
	}
	w.finish(err, md)
}

// ignore releases the permit as Ignored, the first time only.
func (w *watchedStream) ignore() {
	w.stop()
	if w.done.CompareAndSwap(false, true) {
		w.b.Record(w.p, core.Ignored)
	}
}

// contextDone records the end of the stream's context. It runs on
// the goroutine of context.AfterFunc, where a panic of the classifier or
// of a listener would end the process: it is recovered, and raised again
// by the stream's next method or the interceptors' next call (see the
// package doc). It reads no trailer, which only the stream's reader may
// read.
func (w *watchedStream) contextDone() {
	defer func() {
		if v := recover(); v != nil {
			r := &recovered{v: v}
			w.panicked.Store(r)
			w.ic.pending.CompareAndSwap(nil, r)
		}
	}()
	w.finish(toStatusError(w.ctx.Err()), nil)
}

// finish records the outcome of err, the first time only: the context's
// callback and the stream's reader may both see the end. A cancellation
// after a message was received is OK.
func (w *watchedStream) finish(err error, trailer metadata.MD) {
	if !w.done.CompareAndSwap(false, true) {
		return
	}
	if status.Code(err) == codes.Canceled && w.received.Load() {
		err = nil
	}
	recorded := false
	defer func() {
		if !recorded {
			w.b.Record(w.p, core.Ignored) // the classifier panicked
		}
	}()
	o := w.ic.classify(err)
	recorded = true
	w.ic.record(w.b, w.p, o, err, trailer)
}

// raisePanic raises the panic of the stream's context callback, if any,
// once.
func (w *watchedStream) raisePanic() {
	if r := w.panicked.Load(); r != nil {
		w.ic.raise(r)
	}
}

// recovered is a panic recovered where nobody could recover it, to be
// raised again on a caller's goroutine exactly once.
type recovered struct {
	v      any
	raised atomic.Bool
}

// raise raises r's panic unless it was raised already, and forgets it as
// the pending one.
func (ic *Interceptors) raise(r *recovered) {
	ic.pending.CompareAndSwap(r, nil)
	if r.raised.CompareAndSwap(false, true) {
		panic(r.v)
	}
}
