package grpcbreaker

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/casbreaker/casbreaker/core"
)

// rejection is the error of a call the interceptors refused: a gRPC
// status of code Unavailable (GRPCStatus, which status.FromError and
// status.Code read), wrapping the breaker's rejection or the registry's
// error (Unwrap), so that errors.Is(err, core.ErrOpen) and
// core.RetryAfterOf(err) see through it. It matches core.ErrIgnored (Is),
// a full registry's included: a call these interceptors refused was never
// sent, and an outer breaker must not count it against the server.
type rejection struct {
	st    *status.Status
	msg   string
	cause error
}

// newRejection returns the error for cause, the refusal of the breaker
// named name (or of the registry, with name empty), which asked for wait.
// With a positive wait the status details hold an errdetails.RetryInfo
// with it. A refused call allocates this error and its status, as every
// gRPC status error does.
func newRejection(cause error, name string, wait time.Duration) error {
	msg := cause.Error()
	if name != "" {
		msg = fmt.Sprintf("%s (breaker %q)", msg, name)
	}
	st := status.New(codes.Unavailable, msg)
	if wait > 0 {
		if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
			st = with
		}
	}
	return &rejection{st: st, msg: st.Err().Error(), cause: cause}
}

func (r *rejection) Error() string              { return r.msg }
func (r *rejection) GRPCStatus() *status.Status { return r.st }
func (r *rejection) Unwrap() error              { return r.cause }
func (r *rejection) Is(target error) bool       { return target == core.ErrIgnored }
