package grpcbreaker

import (
	"errors"
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
)

// PushbackKey is the trailer a server sets to ask a client to wait before
// it retries, in whole milliseconds (gRPC's retry design, A6).
const PushbackKey = "grpc-retry-pushback-ms"

// DefaultClassifier is the default Options.Classifier, by the status code of
// err (status.Code; an error that is not a status is Unknown):
//
//	Success  OK, and the codes of a server that answered a call it judged
//	         wrong: InvalidArgument, NotFound, AlreadyExists,
//	         PermissionDenied, Unauthenticated, FailedPrecondition,
//	         Aborted, OutOfRange, Unimplemented
//	Failure  Unavailable, DeadlineExceeded, ResourceExhausted, Internal,
//	         Unknown, DataLoss
//	Ignored  Canceled, and any error matching context.Canceled: the
//	         caller gave up, which says nothing about the server; and
//	         any error matching core.ErrIgnored: a refusal of another
//	         breaker or of its full registry (an inner interceptor's,
//	         which never sent the call) or of a local limit such as a
//	         full bulkhead
func DefaultClassifier(err error) core.Outcome {
	if err == nil {
		return core.Success
	}
	if core.DefaultClassifier(err) == core.Ignored {
		return core.Ignored // the caller gave up, another breaker refused, a full bulkhead
	}
	switch status.Code(err) {
	case codes.Canceled:
		return core.Ignored
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Internal, codes.Unknown, codes.DataLoss:
		return core.Failure
	}
	return core.Success
}

// Pushback is how long the server asked its client to wait, from the call's
// final error and trailer: the longer of an errdetails.RetryInfo in the
// error's status details and the trailer's grpc-retry-pushback-ms (a
// non-negative decimal number of milliseconds; a negative one, which asks
// the client never to retry, and a malformed one are no wait). It returns
// 0 when neither asks for a wait, and for a breaker's own rejection (an
// inner interceptor's, whose RetryInfo is its own wait, not the server's).
// It never panics.
func Pushback(err error, trailer metadata.MD) time.Duration {
	if errors.Is(err, core.ErrRejected) {
		return 0 // a breaker's own refusal (an inner interceptor's), not the server's
	}
	d := retryDelay(err)
	if v := trailer.Get(PushbackKey); len(v) > 0 {
		if ms, perr := strconv.ParseInt(v[0], 10, 64); perr == nil && ms > 0 {
			d = max(d, time.Duration(min(ms, int64(maxPushback/time.Millisecond)))*time.Millisecond)
		}
	}
	return d
}

// maxPushback keeps a pushback inside time.Duration; core.Config's
// MaxRetryAfter cuts it further.
const maxPushback = time.Duration(math.MaxInt64)

// retryDelay is the longest RetryInfo delay in err's status details, or 0.
func retryDelay(err error) time.Duration {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return 0
	}
	var d time.Duration
	for _, det := range st.Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			d = max(d, ri.GetRetryDelay().AsDuration())
		}
	}
	return d
}

// toStatusError is a context's error as gRPC reports it: Canceled or
// DeadlineExceeded.
func toStatusError(err error) error { return status.FromContextError(err).Err() }
