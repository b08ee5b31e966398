package grpcbreaker

import (
	"errors"
	"io"

	"go.uber.org/atomic"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// watchedStream is an admitted stream that records its outcome once,
// when it ends (see Interceptors.Stream).
type watchedStream struct {
	grpc.ClientStream
	ic            *Interceptors
	b             *registry.Breaker
	p             core.Permit
	serverStreams bool
	stop          func() bool // stops the context's callback
	done          atomic.Bool
}

// RecvMsg is the stream's RecvMsg, recording the end it reports.
func (w *watchedStream) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	switch {
	case errors.Is(err, io.EOF):
		w.end(nil, true)
	case err != nil:
		w.end(err, true)
	case !w.serverStreams:
		// The one response of a stream without server streaming: gRPC
		// has read the status too, and it was OK.
		w.end(nil, true)
	}
	return err
}

// SendMsg is the stream's SendMsg, recording an error other than io.EOF
// (which only says that the stream has ended: RecvMsg tells how).
func (w *watchedStream) SendMsg(m any) error {
	err := w.ClientStream.SendMsg(m)
	if err != nil && !errors.Is(err, io.EOF) {
		w.end(err, false)
	}
	return err
}

// Header is the stream's Header, recording an error other than io.EOF.
func (w *watchedStream) Header() (metadata.MD, error) {
	md, err := w.ClientStream.Header()
	if err != nil && !errors.Is(err, io.EOF) {
		w.end(err, false)
	}
	return md, err
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

// finish records the outcome of err, the first time only: the context's
// callback and the stream's reader may both see the end.
func (w *watchedStream) finish(err error, trailer metadata.MD) {
	if !w.done.CompareAndSwap(false, true) {
		return
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
