package grpcbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/grpcbreaker"
	"github.com/casbreaker/casbreaker/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// config trips at the third failure in a row, opens for 10 s on clock,
// and honours pushback up to a minute.
func config(clock core.Clock) core.Config {
	return core.Config{Name: "health", ConsecutiveFailures: 3, OpenDuration: 10 * time.Second,
		MaxRetryAfter: time.Minute, CollectMetrics: true, Clock: clock}
}

func newInterceptors(t *testing.T, o grpcbreaker.Options) *grpcbreaker.Interceptors {
	t.Helper()
	ic, err := grpcbreaker.New(o)
	require.NoError(t, err)
	return ic
}

func breaker(t *testing.T, ic *grpcbreaker.Interceptors, key string) *registry.Breaker {
	t.Helper()
	b, err := ic.Registry().Get(key)
	require.NoError(t, err)
	return b
}

func check(c healthpb.HealthClient, cmd string, opts ...grpc.CallOption) error {
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: cmd}, opts...)
	return err
}

func TestUnaryTripsAndRejectsWithRetryInfo(t *testing.T) {
	h, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock)})
	c := dial(t, addr, ic)

	require.NoError(t, check(c, ""))
	for range 3 {
		assert.Equal(t, codes.Unavailable, status.Code(check(c, "code=14")))
	}
	b := breaker(t, ic, checkMethod)
	assert.Equal(t, core.Open, b.State())
	assert.Equal(t, "health/"+checkMethod, b.Settings().Name)

	clock.Advance(4 * time.Second)
	var trailer metadata.MD
	err := check(c, "", grpc.Trailer(&trailer))
	assert.Equal(t, int64(4), h.calls.Load(), "a refused call is not sent")
	st, ok := status.FromError(err)
	require.True(t, ok, "a rejection is a gRPC status")
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Contains(t, st.Message(), `circuit breaker is open (breaker "health//grpc.health.v1.Health/Check")`)
	require.Len(t, st.Details(), 1)
	ri, ok := st.Details()[0].(*errdetails.RetryInfo)
	require.True(t, ok)
	assert.Equal(t, 6*time.Second, ri.GetRetryDelay().AsDuration(), "the open duration's time left")
	assert.Equal(t, []string{"6000"}, trailer.Get(grpcbreaker.PushbackKey), "the caller's trailer says the same")
	assert.ErrorIs(t, err, core.ErrOpen)
	assert.ErrorIs(t, err, core.ErrRejected)
	assert.Equal(t, 6*time.Second, core.RetryAfterOf(err))

	assert.NotErrorIs(t, err, core.ErrForcedOpen, "a rejection matches its own reason only")

	clock.Advance(6 * time.Second)
	require.NoError(t, check(c, ""), "the probe goes through and closes the breaker")
	assert.Equal(t, core.Closed, b.State())

	// A rejection with no wait (forced open: only a manual control ends
	// it) carries no RetryInfo and writes no pushback into the trailer.
	require.NoError(t, b.ForceOpen(0))
	trailer = nil
	err = check(c, "", grpc.Trailer(&trailer))
	assert.ErrorIs(t, err, core.ErrForcedOpen)
	st, ok = status.FromError(err)
	require.True(t, ok)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Empty(t, st.Details(), "no wait, no RetryInfo")
	assert.Empty(t, trailer.Get(grpcbreaker.PushbackKey), "no wait, no pushback")
	assert.Equal(t, int64(5), h.calls.Load(), "a refused call is not sent")
}

func TestCallerMistakesAreNotTheServersFault(t *testing.T) {
	_, addr := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	c := dial(t, addr, ic)
	for _, code := range []codes.Code{codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.Aborted, codes.OutOfRange, codes.Unimplemented} {
		for range 3 {
			assert.Equal(t, code, status.Code(check(c, fmt.Sprintf("code=%d", code))))
		}
	}
	b := breaker(t, ic, checkMethod)
	assert.Equal(t, core.Closed, b.State())
	assert.Equal(t, uint64(27), b.Metrics().Successes)
}

func TestDefaultClassifier(t *testing.T) {
	want := map[codes.Code]core.Outcome{
		codes.OK: core.Success, codes.Canceled: core.Ignored, codes.Unknown: core.Failure,
		codes.InvalidArgument: core.Success, codes.DeadlineExceeded: core.Failure, codes.NotFound: core.Success,
		codes.AlreadyExists: core.Success, codes.PermissionDenied: core.Success, codes.ResourceExhausted: core.Failure,
		codes.FailedPrecondition: core.Success, codes.Aborted: core.Success, codes.OutOfRange: core.Success,
		codes.Unimplemented: core.Success, codes.Internal: core.Failure, codes.Unavailable: core.Failure,
		codes.DataLoss: core.Failure, codes.Unauthenticated: core.Success,
	}
	for code := range codes.Code(17) {
		assert.Equal(t, want[code], grpcbreaker.DefaultClassifier(status.Error(code, "x")), "%v", code)
	}
	assert.Equal(t, core.Success, grpcbreaker.DefaultClassifier(nil))
	assert.Equal(t, core.Failure, grpcbreaker.DefaultClassifier(errors.New("not a status")), "Unknown")
	assert.Equal(t, core.Ignored, grpcbreaker.DefaultClassifier(fmt.Errorf("wrapped: %w", context.Canceled)))
	assert.Equal(t, core.Failure, grpcbreaker.DefaultClassifier(fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x"))))
}

func TestCancelledCallsAreIgnored(t *testing.T) {
	_, addr := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	c := dial(t, addr, ic)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.Equal(t, core.Metrics{}, breaker(t, ic, checkMethod).Metrics(), "a done context takes no permit")

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
		done <- err
	}()
	require.Eventually(t, func() bool { return breaker(t, ic, checkMethod).Metrics().Admitted == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	assert.Equal(t, codes.Canceled, status.Code(<-done))
	m := breaker(t, ic, checkMethod).Metrics()
	assert.Equal(t, uint64(1), m.Ignored)
	assert.Zero(t, m.Failures)
}

func TestDeadlineExceededIsAFailure(t *testing.T) {
	_, addr := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	c := dial(t, addr, ic)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	m := breaker(t, ic, checkMethod).Metrics()
	// The deadline may pass before the interceptor runs: then no permit.
	assert.Equal(t, m.Admitted, m.Failures)
}

func TestServerPushbackIsTheHint(t *testing.T) {
	for _, tc := range []struct{ name, cmd string }{
		{"trailer", "code=8,pushback=25000"},
		{"retry info", "code=14,retry=25s"},
		{"the longer of both", "code=14,retry=3s,pushback=25000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := serve(t)
			clock := core.NewManualClock(0)
			var why []core.Reason
			cfg := config(clock)
			cfg.OnStateChange = func(tr core.Transition) { why = append(why, tr.Reason) }
			ic := newInterceptors(t, grpcbreaker.Options{Config: cfg})
			c := dial(t, addr, ic)
			require.Error(t, check(c, tc.cmd))
			assert.Equal(t, []core.Reason{core.ReasonRetryAfter}, why, "one failure with pushback trips")
			err := check(c, "")
			assert.ErrorIs(t, err, core.ErrOpen)
			assert.Equal(t, 25*time.Second, core.RetryAfterOf(err), "open as long as the server asked, over the 10 s open duration")
		})
	}
}

func TestPushback(t *testing.T) {
	md := func(v string) metadata.MD { return metadata.Pairs(grpcbreaker.PushbackKey, v) }
	assert.Equal(t, 1500*time.Millisecond, grpcbreaker.Pushback(nil, md("1500")))
	assert.Zero(t, grpcbreaker.Pushback(nil, md("-1")), "negative: never retry, no wait")
	assert.Zero(t, grpcbreaker.Pushback(nil, md("soon")))
	assert.Zero(t, grpcbreaker.Pushback(nil, nil))
	assert.Equal(t, time.Duration(1<<63-1)/time.Millisecond*time.Millisecond, grpcbreaker.Pushback(nil, md("99999999999999999")))
	st, err := status.New(codes.Unavailable, "x").WithDetails(&errdetails.RetryInfo{})
	require.NoError(t, err)
	assert.Zero(t, grpcbreaker.Pushback(st.Err(), nil), "a RetryInfo without a delay")
	assert.Zero(t, grpcbreaker.Pushback(errors.New("plain"), nil))
}

func TestPushbackIsIgnoredWithoutMaxRetryAfter(t *testing.T) {
	_, addr := serve(t)
	cfg := config(core.NewManualClock(0))
	cfg.MaxRetryAfter = 0
	ic := newInterceptors(t, grpcbreaker.Options{Config: cfg})
	c := dial(t, addr, ic)
	require.Error(t, check(c, "code=14,pushback=25000"))
	assert.Equal(t, core.Closed, breaker(t, ic, checkMethod).State(), "one failure of three")
}

func TestOneBreakerPerTarget(t *testing.T) {
	_, down := serve(t)
	_, up := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0)), Key: grpcbreaker.ByTarget})
	cDown, cUp := dial(t, down, ic), dial(t, up, ic)
	for range 3 {
		require.Error(t, check(cDown, "code=13"))
	}
	assert.ErrorIs(t, check(cDown, ""), core.ErrOpen)
	require.NoError(t, check(cUp, ""))
	assert.Equal(t, core.Open, breaker(t, ic, "passthrough:///"+down).State())
	assert.Equal(t, core.Closed, breaker(t, ic, "passthrough:///"+up).State())
	assert.Equal(t, 2, ic.Registry().Len())
}

// With MaxOpenPercent and one breaker per target, a fault that fails
// every server opens only the first target's breaker: the other's trip is
// capped, and its calls still go out.
func TestMaxOpenPercentKeepsTargetsReachable(t *testing.T) {
	_, a := serve(t)
	_, b := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0)), Key: grpcbreaker.ByTarget, MaxOpenPercent: 50})
	ca, cb := dial(t, a, ic), dial(t, b, ic)
	for range 3 {
		require.Error(t, check(ca, "code=13"))
		require.Error(t, check(cb, "code=13"))
	}
	assert.ErrorIs(t, check(ca, ""), core.ErrOpen)
	require.NoError(t, check(cb, ""), "the capped target is still called")
	ba, bb := breaker(t, ic, "passthrough:///"+a), breaker(t, ic, "passthrough:///"+b)
	assert.Equal(t, core.Open, ba.State())
	assert.Equal(t, core.Closed, bb.State())
	assert.Equal(t, uint64(1), bb.Metrics().Capped)
	held, allowed := ic.Registry().OpenShare()
	assert.Equal(t, [2]int{1, 1}, [2]int{held, allowed})

	_, err := grpcbreaker.New(grpcbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}, MaxOpenPercent: -1})
	assert.ErrorIs(t, err, registry.ErrInvalidOptions)
}

// watch reads a Watch stream to its end and returns its final error. The
// test server sends one message: a stream that delivers more has lost its
// end (an interceptor that hides it), and fails rather than hangs.
func watch(ctx context.Context, c healthpb.HealthClient, cmd string) error {
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: cmd})
	if err != nil {
		return err
	}
	for range 2 {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return errors.New("watch: more than one message, or the stream's end hidden")
}

func TestStreamOutcomeIsItsFinalStatus(t *testing.T) {
	h, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock)})
	c := dial(t, addr, ic)
	require.NoError(t, watch(context.Background(), c, ""))
	b := breaker(t, ic, watchMethod)
	assert.Equal(t, uint64(1), b.Metrics().Successes)
	require.Equal(t, codes.NotFound, status.Code(watch(context.Background(), c, "code=5")))
	assert.Equal(t, uint64(2), b.Metrics().Successes, "a caller's mistake")
	for range 3 {
		assert.Equal(t, codes.Unavailable, status.Code(watch(context.Background(), c, "code=14")))
	}
	assert.Equal(t, uint64(3), b.Metrics().Failures)
	_, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.ErrorIs(t, err, core.ErrOpen)
	assert.Equal(t, 10*time.Second, core.RetryAfterOf(err))
	assert.Equal(t, int64(5), h.calls.Load(), "a refused stream is not opened")
}

func TestStreamPushbackIsTheHint(t *testing.T) {
	_, addr := serve(t)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	c := dial(t, addr, ic)
	require.Error(t, watch(context.Background(), c, "code=14,pushback=30000"))
	err := watch(context.Background(), c, "")
	assert.ErrorIs(t, err, core.ErrOpen)
	assert.Equal(t, 30*time.Second, core.RetryAfterOf(err))
}

// halfOpenWatch starts a health server and returns a client of it through
// new interceptors, and their breaker of Watch, half-open.
func halfOpenWatch(t *testing.T) (healthpb.HealthClient, *registry.Breaker) {
	t.Helper()
	_, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock)})
	c := dial(t, addr, ic)
	b := breaker(t, ic, watchMethod)
	require.NoError(t, b.ForceOpen(time.Second))
	clock.Advance(time.Second)
	require.Equal(t, core.HalfOpen, b.State())
	return c, b
}

// A stream that its caller abandons by cancelling its context before it
// has read a message gives its permit back: a half-open breaker's probe
// slot is not lost, and the next probe decides.
func TestCancelledStreamReleasesItsPermit(t *testing.T) {
	c, b := halfOpenWatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
	require.NoError(t, err)
	assert.Equal(t, 1, b.Counts().ProbesInFlight)
	cancel()
	require.Eventually(t, func() bool { return b.Metrics().Ignored == 1 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, b.Counts().ProbesInFlight)
	require.NoError(t, watch(context.Background(), c, ""), "the probe slot is free again")
	assert.Equal(t, core.Closed, b.State())
}

// Server streams admitted as half-open probes, each read (the server
// answered) and then cancelled by the caller before its end, as a client
// of a watch does: each was ignored, so the breaker stayed half-open
// however many healthy streams it saw (20 here). A cancellation after a
// message is a success: the first such probe closes the breaker.
func TestHalfOpenStreamProbesReadThenCancelledDecide(t *testing.T) {
	c, b := halfOpenWatch(t)
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: "hang"})
		require.NoError(t, err)
		_, err = s.Recv() // the server's one response; the stream stays open
		require.NoError(t, err)
		cancel()
		require.Eventually(t, func() bool { m := b.Metrics(); return m.Successes+m.Ignored == uint64(i+1) }, 10*time.Second, time.Millisecond)
	}
	assert.Equal(t, core.Closed, b.State(), "20 healthy streams, and still half-open")
	m := b.Metrics()
	assert.Equal(t, [3]uint64{20, 20, 0}, [3]uint64{m.Admitted, m.Successes, m.Ignored}, "admitted, successes, ignored")
}

// A stream that has delivered messages and then ends is judged by how it
// ends: a cancellation (seen by RecvMsg, before the context's callback
// runs) is the caller's and OK; any other status is the server's.
func TestStreamWithMessagesIsJudgedByItsEnd(t *testing.T) {
	for _, tc := range []struct {
		end  error
		want core.Metrics
	}{
		{status.Error(codes.Canceled, "context canceled"), core.Metrics{Admitted: 1, Successes: 1}},
		{status.Error(codes.Unavailable, "gone"), core.Metrics{Admitted: 1, Failures: 1}},
	} {
		ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
		fs := &fakeStream{}
		s, err := ic.Stream()(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/m",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				return fs, nil
			})
		require.NoError(t, err)
		require.NoError(t, s.RecvMsg(nil))
		require.NoError(t, s.RecvMsg(nil))
		fs.recv = tc.end
		require.Error(t, s.RecvMsg(nil))
		assert.Equal(t, tc.want, breaker(t, ic, "/m").Metrics(), "%v", tc.end)
	}
}

func TestFullRegistryIsUnavailable(t *testing.T) {
	_, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock), MaxBreakers: 1})
	c := dial(t, addr, ic)
	for range 3 {
		require.Error(t, check(c, "code=14"))
	}
	err := watch(context.Background(), c, "")
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.ErrorIs(t, err, registry.ErrFull, "the only breaker is open: none to evict")
}

func TestPanicsReleaseThePermit(t *testing.T) {
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0)),
		Classifier: func(err error) core.Outcome {
			if err != nil && err.Error() == "classifier" {
				panic("classifier")
			}
			return grpcbreaker.DefaultClassifier(err)
		}})
	unary := ic.Unary()
	invoke := func(err error) grpc.UnaryInvoker {
		return func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			if err == nil {
				panic("invoker")
			}
			return err
		}
	}
	assert.PanicsWithValue(t, "invoker", func() { _ = unary(context.Background(), "/m", nil, nil, nil, invoke(nil)) })
	assert.PanicsWithValue(t, "classifier", func() { _ = unary(context.Background(), "/m", nil, nil, nil, invoke(errors.New("classifier"))) })
	stream := ic.Stream()
	assert.PanicsWithValue(t, "streamer", func() {
		_, _ = stream(context.Background(), &grpc.StreamDesc{}, nil, "/m",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				panic("streamer")
			})
	})
	m := breaker(t, ic, "/m").Metrics()
	assert.Equal(t, uint64(3), m.Admitted)
	assert.Equal(t, uint64(3), m.Ignored)
}

func TestCallerOptionsAreNotWrittenInto(t *testing.T) {
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	opts := make([]grpc.CallOption, 1, 4)
	opts[0] = grpc.WaitForReady(false)
	err := ic.Unary()(context.Background(), "/m", nil, nil, nil,
		func(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, got ...grpc.CallOption) error {
			assert.Len(t, got, 2, "the caller's and the interceptor's trailer")
			return nil
		}, opts...)
	require.NoError(t, err)
	assert.Nil(t, opts[:2][1], "the spare capacity of the caller's slice is untouched")
}

func TestBadOptions(t *testing.T) {
	_, err := grpcbreaker.New(grpcbreaker.Options{})
	assert.ErrorIs(t, err, core.ErrInvalidConfig, "no trip rule")
	// A classifier the interceptors would not use is refused, not ignored.
	_, err = grpcbreaker.New(grpcbreaker.Options{Config: core.Config{ConsecutiveFailures: 5, Classifier: core.DefaultClassifier}})
	assert.ErrorIs(t, err, core.ErrInvalidConfig)
	assert.ErrorContains(t, err, "Config.Classifier: not used by grpcbreaker")
	var zero grpcbreaker.Interceptors
	assert.PanicsWithValue(t, "grpcbreaker: Interceptors used without New", func() {
		_ = zero.Unary()(context.Background(), "/m", nil, nil, nil, nil)
	})
}

// fakeStream is a grpc.ClientStream whose methods return what it is told.
type fakeStream struct {
	grpc.ClientStream  // nil: the methods not overridden are not called
	recv, send, header error
}

func (f *fakeStream) RecvMsg(any) error            { return f.recv }
func (f *fakeStream) SendMsg(any) error            { return f.send }
func (f *fakeStream) Header() (metadata.MD, error) { return nil, f.header }
func (f *fakeStream) Trailer() metadata.MD         { return nil }
func (f *fakeStream) CloseSend() error             { return nil }
func (f *fakeStream) Context() context.Context     { return context.Background() }

// Each way a stream can end is recorded once, as its outcome.
func TestStreamEnds(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	for _, tc := range []struct {
		name string
		desc grpc.StreamDesc
		fs   fakeStream
		use  func(s grpc.ClientStream)
		want core.Metrics
	}{
		{"client streaming: the response", grpc.StreamDesc{ClientStreams: true}, fakeStream{},
			func(s grpc.ClientStream) { _ = s.RecvMsg(nil); _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1, Successes: 1}},
		{"server streaming: a message is not the end", grpc.StreamDesc{ServerStreams: true}, fakeStream{},
			func(s grpc.ClientStream) { _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1}},
		{"server streaming: io.EOF", grpc.StreamDesc{ServerStreams: true}, fakeStream{recv: io.EOF},
			func(s grpc.ClientStream) { _ = s.RecvMsg(nil); _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1, Successes: 1}},
		{"SendMsg io.EOF: RecvMsg tells", grpc.StreamDesc{ClientStreams: true}, fakeStream{send: io.EOF, recv: unavailable},
			func(s grpc.ClientStream) { _ = s.SendMsg(nil); _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1, Failures: 1}},
		{"SendMsg error", grpc.StreamDesc{ClientStreams: true}, fakeStream{send: unavailable},
			func(s grpc.ClientStream) { _ = s.SendMsg(nil); _ = s.SendMsg(nil) }, core.Metrics{Admitted: 1, Failures: 1}},
		{"SendMsg refused by the client", grpc.StreamDesc{ClientStreams: true},
			fakeStream{send: status.Error(codes.ResourceExhausted, "trying to send message larger than max (6 vs. 4)"), recv: unavailable},
			func(s grpc.ClientStream) { _ = s.SendMsg(nil); _ = s.SendMsg(nil); _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1, Ignored: 1}},
		{"Header error", grpc.StreamDesc{ServerStreams: true}, fakeStream{header: unavailable},
			func(s grpc.ClientStream) { _, _ = s.Header(); _ = s.RecvMsg(nil) }, core.Metrics{Admitted: 1, Failures: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
			s, err := ic.Stream()(context.Background(), &tc.desc, nil, "/m",
				func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
					return &tc.fs, nil
				})
			require.NoError(t, err)
			tc.use(s)
			assert.Equal(t, tc.want, breaker(t, ic, "/m").Metrics())
		})
	}
}

func TestStreamerErrorIsTheOutcome(t *testing.T) {
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
	_, err := ic.Stream()(context.Background(), &grpc.StreamDesc{}, nil, "/m",
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return nil, status.Error(codes.Unavailable, "no connection")
		})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, core.Metrics{Admitted: 1, Failures: 1}, breaker(t, ic, "/m").Metrics())
}

// Interceptors chained on one connection, one breaker per target outside
// one per method (grpc.WithChainUnaryInterceptor): the inner interceptors
// refuse a call, which is never sent, because the method's breaker is
// open or because their registry is full. The outer breaker must count
// neither: by its code, Unavailable, the refusal would read as a failure,
// and with MaxRetryAfter its RetryInfo (the inner breaker's time left) as
// server pushback, tripping the whole target's breaker at once on calls
// that no server saw.
func TestChainedRejectionIsNotTheServersFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		method  string // of the refused call; "/svc/M"'s breaker is open
		refusal error
	}{
		{"open breaker", 0, "/svc/M", core.ErrOpen},
		{"full registry", 1, "/svc/N", registry.ErrFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := core.NewManualClock(0)
			inner := newInterceptors(t, grpcbreaker.Options{MaxBreakers: tc.max,
				Config: core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, Clock: clock}})
			outer := newInterceptors(t, grpcbreaker.Options{
				Config: core.Config{ConsecutiveFailures: 1, OpenDuration: 10 * time.Second, MaxRetryAfter: time.Minute, CollectMetrics: true, Clock: clock},
				Key:    func(context.Context, *grpc.ClientConn, string) string { return "target" },
			})
			m := breaker(t, inner, "/svc/M")
			p, err := m.Allow()
			require.NoError(t, err)
			m.Record(p, core.Failure) // the method's breaker opens
			sent := false
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				sent = true
				return nil
			}
			innerAsInvoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
				return inner.Unary()(ctx, method, req, reply, cc, invoker, opts...)
			}
			err = outer.Unary()(context.Background(), tc.method, nil, nil, nil, innerAsInvoker)
			require.ErrorIs(t, err, tc.refusal)
			assert.ErrorIs(t, err, core.ErrIgnored)
			require.False(t, sent)
			target := breaker(t, outer, "target")
			assert.Equal(t, core.Closed, target.Counts().State, "the inner refusal opened the whole target's breaker")
			assert.Equal(t, core.Metrics{Admitted: 1, Ignored: 1}, target.Metrics())
		})
	}
}

// recovered runs f and returns the value it panicked with, or nil.
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// pastDeadline is a context that, once done, reports its deadline passed,
// so that a test can end a context by its deadline without waiting for
// the wall clock.
type pastDeadline struct{ context.Context }

func (c pastDeadline) Err() error {
	if c.Context.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}

// A panic in user code that the end of a stream's context runs (the
// classifier, or a listener of the transition that the stream's outcome
// commits) ran on context.AfterFunc's goroutine, where nothing can recover
// it: the process exited. It is recovered there and raised again, with its
// value and once, on the caller's goroutine: by the stream's next method,
// or, if the stream is not used again, by the next call through the
// interceptors, before that call is admitted.
func TestPanicAtAStreamsContextEndReachesTheCaller(t *testing.T) {
	users := []struct {
		name     string
		set      func(*grpcbreaker.Options)
		read     bool // read a message first, so that the cancellation closes the half-open breaker
		deadline bool // the context ends by its deadline: the probe fails and the breaker opens
	}{
		{"classifier", func(o *grpcbreaker.Options) {
			o.Classifier = func(err error) core.Outcome {
				if status.Code(err) == codes.Canceled {
					panic("classifier")
				}
				return grpcbreaker.DefaultClassifier(err)
			}
		}, false, false},
		{"listener", func(o *grpcbreaker.Options) {
			o.Config.OnStateChange = func(tr core.Transition) {
				if tr.To == core.Closed {
					panic("listener")
				}
			}
		}, true, false},
		{"listener of a trip", func(o *grpcbreaker.Options) {
			o.Config.OnStateChange = func(tr core.Transition) {
				if tr.From == core.HalfOpen && tr.To == core.Open {
					panic("listener of a trip")
				}
			}
		}, false, true},
	}
	// Each use returns how many calls it sent.
	uses := map[string]func(ic *grpcbreaker.Interceptors, s grpc.ClientStream) int{
		"RecvMsg":   func(_ *grpcbreaker.Interceptors, s grpc.ClientStream) int { _ = s.RecvMsg(nil); return 0 },
		"SendMsg":   func(_ *grpcbreaker.Interceptors, s grpc.ClientStream) int { _ = s.SendMsg(nil); return 0 },
		"Header":    func(_ *grpcbreaker.Interceptors, s grpc.ClientStream) int { _, _ = s.Header(); return 0 },
		"CloseSend": func(_ *grpcbreaker.Interceptors, s grpc.ClientStream) int { _ = s.CloseSend(); return 0 },
		"the next call": func(ic *grpcbreaker.Interceptors, _ grpc.ClientStream) int {
			sent := 0
			_ = ic.Unary()(context.Background(), "/other", nil, nil, nil,
				func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
					sent++
					return nil
				})
			return sent
		},
	}
	for _, user := range users {
		for name, use := range uses {
			t.Run(user.name+"/"+name, func(t *testing.T) {
				clock := core.NewManualClock(0)
				o := grpcbreaker.Options{Config: config(clock)}
				user.set(&o)
				ic := newInterceptors(t, o)
				b := breaker(t, ic, "/m")
				require.NoError(t, b.ForceOpen(time.Second))
				clock.Advance(time.Second)
				var ctx context.Context
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				end := status.Error(codes.Canceled, "context canceled")
				if user.deadline {
					ctx = pastDeadline{ctx}
					end = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
				}
				fs := &fakeStream{}
				s, err := ic.Stream()(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/m",
					func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
						return fs, nil
					})
				require.NoError(t, err)
				if user.read {
					require.NoError(t, s.RecvMsg(nil))
				}
				// RecvMsg reports the cancellation too, and may see it
				// first: then the panic is on the caller's goroutine anyway.
				fs.recv = end
				cancel()
				var v any
				tries, sent := 0, 0
				require.Eventually(t, func() bool {
					tries++
					v = recovered(func() { sent += use(ic, s) })
					return v != nil
				}, 10*time.Second, time.Millisecond)
				assert.Equal(t, user.name, v)
				if name == "the next call" {
					assert.Equal(t, tries-1, sent, "the call that raises it is not sent")
				}
				assert.Nil(t, recovered(func() { use(ic, s) }), "raised once")
				m := b.Metrics()
				assert.Equal(t, uint64(1), m.Successes+m.Failures+m.Ignored, "the outcome is recorded, or the permit released")
			})
		}
	}
}

// The registry of breakers is bounded by default, with idle eviction on:
// a client whose keys come from what it is given (a tenant, a target)
// cannot be made to grow it without limit. NoLimit turns either off.
func TestDefaultRegistryIsBounded(t *testing.T) {
	assert.Equal(t, 10_000, grpcbreaker.DefaultMaxBreakers, "the documented default")
	assert.Equal(t, 10*time.Minute, grpcbreaker.DefaultIdleAfter, "the documented default")
	n := 0
	key := func(context.Context, *grpc.ClientConn, string) string { n++; return fmt.Sprint(n) }
	ok := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, tc := range []struct {
		name string
		max  int
		idle time.Duration
		len  int // breakers after DefaultMaxBreakers+1 keys
		left int // breakers after DefaultIdleAfter idle
	}{
		{"defaults", 0, 0, grpcbreaker.DefaultMaxBreakers, 0},
		{"no bound", grpcbreaker.NoLimit, 0, grpcbreaker.DefaultMaxBreakers + 1, 0},
		{"never idle", 0, grpcbreaker.NoLimit, grpcbreaker.DefaultMaxBreakers, grpcbreaker.DefaultMaxBreakers},
		{"set", 3, time.Hour, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := core.NewManualClock(0)
			ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock), Key: key, MaxBreakers: tc.max, IdleAfter: tc.idle})
			unary := ic.Unary()
			for range grpcbreaker.DefaultMaxBreakers + 1 {
				require.NoError(t, unary(context.Background(), "/m", nil, nil, nil, ok))
			}
			assert.Equal(t, tc.len, ic.Registry().Len())
			clock.Advance(grpcbreaker.DefaultIdleAfter - time.Second)
			assert.Zero(t, ic.Registry().EvictIdle(), "not idle long enough yet")
			clock.Advance(time.Second)
			ic.Registry().EvictIdle()
			assert.Equal(t, tc.left, ic.Registry().Len())
		})
	}
}

// refuseProbes is a registry.Extension whose part refuses every probe of
// its breaker, as a fleet refuses one without a lease.
type refuseProbes struct{}

func (refuseProbes) Extend(_ string, c *core.Config) (registry.Extended, error) {
	c.ProbeGate = refuseProbes{}
	return refuseProbes{}, nil
}
func (refuseProbes) Made(*core.Breaker) {}
func (refuseProbes) Dropped()           {}

var errNoLease = fmt.Errorf("no lease: %w", core.ErrHalfOpenFull)

func (refuseProbes) AdmitProbe(core.Permit) (time.Duration, error) { return time.Second, errNoLease }
func (refuseProbes) ProbeDone(core.Permit, core.Outcome)           {}

// Options.Extension reaches each key's breaker: its probe gate decides
// the key's probes, so a refused probe is never sent.
func TestExtensionGatesEachKey(t *testing.T) {
	_, addr := serve(t)
	clock := core.NewManualClock(0)
	ic := newInterceptors(t, grpcbreaker.Options{Config: config(clock), Key: grpcbreaker.ByTarget, Extension: refuseProbes{}})
	c := dial(t, addr, ic)
	for range 3 {
		require.Error(t, check(c, "code=13"))
	}
	clock.Advance(10 * time.Second)
	err := check(c, "")
	require.ErrorIs(t, err, core.ErrHalfOpenFull)
	require.ErrorContains(t, err, "no lease")
}
