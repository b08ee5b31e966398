package grpcbreaker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/grpcbreaker"
)

// badRequest is a request that gRPC's proto codec cannot marshal: a proto3
// string must be valid UTF-8.
var badRequest = &healthpb.HealthCheckRequest{Service: "\xff"}

// Requests that the client's gRPC library refuses to send, because it
// cannot marshal them, because they are over the caller's own send limit,
// or because their metadata has a key or a value gRPC does not allow
// (a user's name with an accent, say), fail with Internal and
// ResourceExhausted, codes that DefaultClassifier counts as the server's
// failures. Three of any, on a healthy server that saw none of them,
// opened the method's breaker. They are ignored, without asking the
// classifier, whether the call is unary or a stream. This also pins the
// messages of gRPC's client that tell these errors apart (grpcbreaker's
// local.go): an upgrade of grpc that changes them fails here.
func TestClientsOwnErrorsAreNotTheServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(c healthpb.HealthClient) error
		code codes.Code
	}{
		{"unary, cannot marshal", func(c healthpb.HealthClient) error {
			_, err := c.Check(context.Background(), badRequest)
			return err
		}, codes.Internal},
		{"unary, over the send limit", func(c healthpb.HealthClient) error {
			return check(c, "a request longer than the limit", grpc.MaxCallSendMsgSize(4))
		}, codes.ResourceExhausted},
		{"stream, cannot marshal", func(c healthpb.HealthClient) error {
			_, err := c.Watch(context.Background(), badRequest)
			return err
		}, codes.Internal},
		{"stream, over the send limit", func(c healthpb.HealthClient) error {
			_, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "a request longer than the limit"},
				grpc.MaxCallSendMsgSize(4))
			return err
		}, codes.ResourceExhausted},
		{"unary, a metadata value not ASCII", func(c healthpb.HealthClient) error {
			_, err := c.Check(metadata.AppendToOutgoingContext(context.Background(), "user", "Zoë"), &healthpb.HealthCheckRequest{})
			return err
		}, codes.Internal},
		{"stream, a metadata key not allowed", func(c healthpb.HealthClient) error {
			ctx := metadata.NewOutgoingContext(context.Background(), metadata.MD{"User Name": {"zoe"}})
			_, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
			return err
		}, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, addr := serve(t)
			classified := 0
			ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0)),
				Classifier: func(err error) core.Outcome { classified++; return grpcbreaker.DefaultClassifier(err) }})
			c := dial(t, addr, ic)
			for range 3 {
				assert.Equal(t, tc.code, status.Code(tc.call(c)))
			}
			assert.Zero(t, h.calls.Load(), "no request was sent")
			assert.Zero(t, classified)
			b, err := ic.Registry().Get(checkMethod)
			if strings.HasPrefix(tc.name, "stream") {
				b, err = ic.Registry().Get(watchMethod)
			}
			require.NoError(t, err)
			assert.Equal(t, core.Closed, b.State(), "the client's own refusals opened the breaker")
			assert.Equal(t, core.Metrics{Admitted: 3, Ignored: 3}, b.Metrics())
		})
	}
}

// failingCodec is a codec, for both codec interfaces, that marshals
// nothing.
type failingCodec struct{}

var errNoMarshal = errors.New("failingCodec cannot marshal")

func (failingCodec) Marshal(any) ([]byte, error) { return nil, errNoMarshal }
func (failingCodec) Unmarshal([]byte, any) error { return nil }
func (failingCodec) Name() string                { return "failing" }
func (failingCodec) String() string              { return "failing" }

// failingCodecV2 is failingCodec as an encoding.CodecV2.
type failingCodecV2 struct{}

func (failingCodecV2) Marshal(any) (mem.BufferSlice, error) { return nil, errNoMarshal }
func (failingCodecV2) Unmarshal(mem.BufferSlice, any) error { return nil }
func (failingCodecV2) Name() string                         { return "failing-v2" }

func init() {
	encoding.RegisterCodec(failingCodec{})
	encoding.RegisterCodecV2(failingCodecV2{})
}

// A status that only reads like one of the client's own is the server's:
// a server that cannot marshal its response answers Internal with gRPC's
// marshal prefix too, and a server's own send limit reads "grpc: trying to
// send ...". The client's marshal error is recognized only when the
// request does not marshal with the call's codec and the message is
// exactly the one gRPC makes of that error.
func TestServersLookalikeErrorsAreFailures(t *testing.T) {
	protoErr := func(req any) string {
		_, err := encoding.GetCodecV2("proto").Marshal(req)
		require.Error(t, err)
		return err.Error()
	}
	marshalErr := func(text string) error { return status.Error(codes.Internal, "grpc: error while marshaling: "+text) }
	good := &healthpb.HealthCheckRequest{Service: "fine"}
	bg := context.Background()
	withMD := func(kv ...string) context.Context { return metadata.NewOutgoingContext(bg, metadata.Pairs(kv...)) }
	internal := func(msg string) error { return status.Error(codes.Internal, msg) }
	for _, tc := range []struct {
		name string
		ctx  context.Context // nil: bg
		req  any
		opts []grpc.CallOption
		err  error
		want core.Outcome
	}{
		{"client: a metadata value", withMD("user", "Zoë"), good, nil, internal(`header key "user" contains value with non-printable ASCII characters`), core.Ignored},
		{"client: a metadata key", metadata.NewOutgoingContext(bg, metadata.MD{"User": {"x"}}), good, nil, internal(`header key "User" contains illegal characters not in [0-9a-z-_.]`), core.Ignored},
		{"client: an empty metadata key", withMD("", "x"), good, nil, internal("there is an empty key in the header"), core.Ignored},
		{"server: a metadata error of a key not sent", withMD("user", "x"), good, nil, internal(`header key "other" contains value with non-printable ASCII characters`), core.Failure},
		{"server: a metadata error of a value sent", withMD("user", "x"), good, nil, internal(`header key "user" contains nothing wrong`), core.Failure},
		{"server: a metadata value error of a printable value sent", withMD("user", " x~"), good, nil, internal(`header key "user" contains value with non-printable ASCII characters`), core.Failure},
		{"client: a metadata value with a control character", withMD("user", "x\x1f"), good, nil, internal(`header key "user" contains value with non-printable ASCII characters`), core.Ignored},
		{"server: a metadata value error of a binary key", withMD("trace-bin", "\x00\xff"), good, nil, internal(`header key "trace-bin" contains value with non-printable ASCII characters`), core.Failure},
		{"server: a metadata key error of a key sent in good form", withMD("az09-_.", "x"), good, nil, internal(`header key "az09-_." contains illegal characters not in [0-9a-z-_.]`), core.Failure},
		{"client: a metadata key with a space", metadata.NewOutgoingContext(bg, metadata.MD{"user name": {"x"}}), good, nil, internal(`header key "user name" contains illegal characters not in [0-9a-z-_.]`), core.Ignored},
		{"server: an empty key not sent", withMD("user", "x"), good, nil, internal("there is an empty key in the header"), core.Failure},
		{"server: a metadata error, no metadata sent", nil, good, nil, internal(`header key "user" contains value with non-printable ASCII characters`), core.Failure},
		{"client: cannot marshal", nil, badRequest, nil, marshalErr(protoErr(badRequest)), core.Ignored},
		{"client: over the send limit", nil, good, nil, status.Error(codes.ResourceExhausted, "trying to send message larger than max (6 vs. 4)"), core.Ignored},
		{"server: cannot marshal its response", nil, good, nil, marshalErr(protoErr(badRequest)), core.Failure},
		{"server: another message's marshal error", nil, badRequest, nil, marshalErr("proto: some other field"), core.Failure},
		{"server: the marshal prefix, another code", nil, badRequest, nil, status.Error(codes.Unavailable, "grpc: error while marshaling: "+protoErr(badRequest)), core.Failure},
		{"server: its own send limit", nil, good, nil, status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (6 vs. 4)"), core.Failure},
		{"server: Internal", nil, good, nil, status.Error(codes.Internal, "oops"), core.Failure},
		{"server: not a status", nil, good, nil, errors.New("grpc: error while marshaling: x"), core.Failure},
		{"nil request", nil, nil, nil, marshalErr(""), core.Failure},
		{"forced codec", nil, good, []grpc.CallOption{grpc.ForceCodec(failingCodec{})}, marshalErr(errNoMarshal.Error()), core.Ignored},
		{"forced codec V2", nil, good, []grpc.CallOption{grpc.ForceCodecV2(failingCodecV2{})}, marshalErr(errNoMarshal.Error()), core.Ignored},
		//lint:ignore SA1019 gRPC still honours the deprecated option
		{"custom codec", nil, good, []grpc.CallOption{grpc.CallCustomCodec(failingCodec{})}, marshalErr(errNoMarshal.Error()), core.Ignored},
		{"content subtype", nil, good, []grpc.CallOption{grpc.CallContentSubtype("failing")}, marshalErr(errNoMarshal.Error()), core.Ignored},
		{"content subtype V2", nil, good, []grpc.CallOption{grpc.CallContentSubtype("failing-v2")}, marshalErr(errNoMarshal.Error()), core.Ignored},
		{"content subtype without a codec", nil, good, []grpc.CallOption{grpc.CallContentSubtype("none")}, marshalErr(errNoMarshal.Error()), core.Failure},
		{"forced codec marshals", nil, badRequest, []grpc.CallOption{grpc.ForceCodecV2(encoding.GetCodecV2("proto")), grpc.ForceCodec(okCodec{})}, marshalErr(protoErr(badRequest)), core.Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ic := newInterceptors(t, grpcbreaker.Options{Config: config(core.NewManualClock(0))})
			ctx := tc.ctx
			if ctx == nil {
				ctx = bg
			}
			err := ic.Unary()(ctx, "/m", tc.req, nil, nil,
				func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return tc.err }, tc.opts...)
			assert.Equal(t, tc.err, err, "the caller gets the invoker's error")
			want := core.Metrics{Admitted: 1, Ignored: 1}
			if tc.want == core.Failure {
				want = core.Metrics{Admitted: 1, Failures: 1}
			}
			assert.Equal(t, want, breaker(t, ic, "/m").Metrics())
		})
	}
}

// okCodec is an encoding.Codec that marshals anything.
type okCodec struct{}

func (okCodec) Marshal(any) ([]byte, error) { return []byte{}, nil }
func (okCodec) Unmarshal([]byte, any) error { return nil }
func (okCodec) Name() string                { return "ok" }
