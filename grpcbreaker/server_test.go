package grpcbreaker_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/casbreaker/casbreaker/grpcbreaker"
)

// health is a test server that fails on command: the request's service
// name is a comma-separated list of
//
//	code=N      end the call with status code N (0 or none: OK)
//	pushback=V  set the grpc-retry-pushback-ms trailer to V
//	retry=D     add an errdetails.RetryInfo of duration D to the status
//	hang        wait until the call's context is done
//
// Watch, the server-streaming method, sends one response first.
type health struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int64 // calls that reached the server
}

func (h *health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Inc()
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING},
		act(ctx, req.GetService(), func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
}

func (h *health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.calls.Inc()
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	return act(stream.Context(), req.GetService(), func(md metadata.MD) error { stream.SetTrailer(md); return nil })
}

// act carries out a command (see health) and returns the call's status.
func act(ctx context.Context, cmd string, trailer func(metadata.MD) error) error {
	code, msg := codes.OK, "as commanded: "+cmd
	var details []*durationpb.Duration
	for _, kv := range strings.Split(cmd, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "code":
			n, err := strconv.Atoi(v)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "bad code %q", v)
			}
			code = codes.Code(n)
		case "pushback":
			if err := trailer(metadata.Pairs(grpcbreaker.PushbackKey, v)); err != nil {
				return err
			}
		case "retry":
			d, err := time.ParseDuration(v)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "bad retry %q", v)
			}
			details = append(details, durationpb.New(d))
		case "hang":
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if code == codes.OK {
		return nil
	}
	st := status.New(code, msg)
	for _, d := range details {
		var err error
		if st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: d}); err != nil {
			return err
		}
	}
	return st.Err()
}

// serve starts a health server on a loopback listener until the test
// ends and returns it and its address.
func serve(t *testing.T) (*health, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &health{}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		// Serve returns nil once stopped, or ErrServerStopped if Stop
		// came first (a test that never dialled may end before the
		// goroutine runs).
		if err := <-done; err != nil {
			require.ErrorIs(t, err, grpc.ErrServerStopped)
		}
	})
	return h, ln.Addr().String()
}

// dial returns a health client to addr through ic's interceptors.
func dial(t *testing.T, addr string, ic *grpcbreaker.Interceptors) healthpb.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ic.Unary()),
		grpc.WithStreamInterceptor(ic.Stream()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cc.Close()) })
	return healthpb.NewHealthClient(cc)
}
