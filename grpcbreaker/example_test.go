package grpcbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/grpcbreaker"
)

// down is a health server that is always unavailable.
type down struct {
	healthpb.UnimplementedHealthServer
}

func (down) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "overloaded")
}

// A client whose calls go through a breaker per method: after three
// Unavailable answers the method's breaker opens, and the next call is
// refused without being sent, with a status that says how long to wait.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, down{})
	go srv.Serve(ln)
	defer srv.Stop()

	ic, err := grpcbreaker.New(grpcbreaker.Options{
		Config: core.Config{
			Name:                "health",
			ConsecutiveFailures: 3,
			OpenDuration:        30 * time.Second,
			MaxRetryAfter:       time.Minute, // honour server pushback, up to a minute
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ic.Unary()),
		grpc.WithStreamInterceptor(ic.Stream()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	for range 3 {
		_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err)) // sent, and failed
	}
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	st := status.Convert(err)
	fmt.Println(st.Code(), errors.Is(err, core.ErrOpen))
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			fmt.Println("retry in", ri.GetRetryDelay().AsDuration().Round(time.Second))
		}
	}
	// Output:
	// Unavailable
	// Unavailable
	// Unavailable
	// Unavailable true
	// retry in 30s
}
