package grpcbreaker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/casbreaker/casbreaker/core"
)

// The messages of the statuses gRPC's client (grpc-go v1.85) makes itself
// when it refuses to send a request: it cannot marshal it (code Internal),
// it is over the call's send limit, grpc.MaxCallSendMsgSize (code
// ResourceExhausted), or its outgoing metadata has a key or a value that
// gRPC does not allow (code Internal). gRPC marks these statuses in no
// other way, so these texts are the only signal;
// TestClientsOwnErrorsAreNotTheServers pins them against the real
// library, and fails if an upgrade changes them.
const (
	marshalPrefix   = "grpc: error while marshaling: "
	sendLimitPrefix = "trying to send message larger than max ("
	metadataPrefix  = "header key "
	badKey          = "header key %q contains illegal characters not in [0-9a-z-_.]"
	badValue        = "header key %q contains value with non-printable ASCII characters"
	emptyKey        = "there is an empty key in the header"
)

// judge is the outcome of err, the error of a call (with context ctx,
// request req and call options opts): Ignored if the client refused to
// send the call (clientsOwn), else the classifier's.
func (ic *Interceptors) judge(ctx context.Context, err error, req any, opts []grpc.CallOption) core.Outcome {
	if clientsOwn(ctx, err, req, opts) {
		return core.Ignored
	}
	return ic.classify(err)
}

// clientsOwn reports whether err, the error of a call with context ctx
// that sent req with opts (or of a stream's SendMsg(req); req is nil for
// the opening of a stream), is one that the client's gRPC library made
// before the request left the client: nothing the server did.
//
// A server's status can read the same: a server that cannot marshal its
// response answers Internal with the marshal prefix too. So a marshal
// error is the client's only if req itself does not marshal, with the
// call's codec, and the error is exactly the one gRPC makes of that; a
// server's text differs (it names the response's field). Likewise a
// metadata error is the client's only if it is exactly gRPC's text for a
// key of ctx's outgoing metadata. The client's send-limit text is its
// own: a server's reads "grpc: trying to send ...". It costs nothing
// unless err's message has one of those prefixes.
func clientsOwn(ctx context.Context, err error, req any, opts []grpc.CallOption) bool {
	if err == nil {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Internal:
		msg := st.Message()
		if rest, ok := strings.CutPrefix(msg, marshalPrefix); ok {
			merr := marshal(req, opts)
			return merr != nil && merr.Error() == rest
		}
		return badMetadata(ctx, msg)
	case codes.ResourceExhausted:
		return strings.HasPrefix(st.Message(), sendLimitPrefix)
	}
	return false
}

// badMetadata reports whether msg is gRPC's refusal of a key or a value
// of ctx's outgoing metadata, and that key or value is one gRPC refuses:
// a server (or a proxy passing its own client's error on) may answer
// with the same text about a key the caller sent in good form, and that
// is the server's failure. gRPC names the key as the caller wrote it;
// metadata.FromOutgoingContext gives it in lower case, so a refused key
// matches in any case, and is taken as refused when the message spells
// it in another case (upper case is what gRPC refuses) or its lower case
// has a character outside [0-9a-z-_.]. A refused value's key passed the
// key check, so it is in lower case already.
func badMetadata(ctx context.Context, msg string) bool {
	if msg != emptyKey && !strings.HasPrefix(msg, metadataPrefix) {
		return false
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	// If statements, not a switch: Go's coverage, and so mutation testing,
	// does not see the conditions of case clauses.
	for k, vals := range md {
		if k == "" {
			if msg == emptyKey {
				return true
			}
		} else if msg == fmt.Sprintf(badValue, k) {
			if !strings.HasSuffix(k, "-bin") && slices.ContainsFunc(vals, notPrintableASCII) {
				return true
			}
		} else if strings.EqualFold(msg, fmt.Sprintf(badKey, k)) {
			if msg != fmt.Sprintf(badKey, k) || strings.ContainsFunc(k, notKeyRune) {
				return true
			}
		}
	}
	return false
}

// notKeyRune reports whether r is a character gRPC refuses in a metadata
// key, which it allows only [0-9a-z-_.] in.
func notKeyRune(r rune) bool {
	return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
}

// notPrintableASCII reports whether v has a byte gRPC refuses in a
// metadata value (of a key not ending in "-bin"): one outside ' '..'~'.
func notPrintableASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] > '~' {
			return true
		}
	}
	return false
}

// marshal marshals req as gRPC's client does, with the codec that opts
// choose (grpc.ForceCodecV2, grpc.ForceCodec, grpc.CustomCodec, or the
// codec registered for grpc.CallContentSubtype), proto by default, and
// returns its error. A codec chosen by the connection's default call
// options (grpc.WithDefaultCallOptions) is not visible to an interceptor;
// proto stands in for it. With no codec to use it returns nil.
func marshal(req any, opts []grpc.CallOption) error {
	if req == nil {
		return nil // gRPC sends an empty message
	}
	var forced func() error
	subtype := proto.Name
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ForceCodecV2CallOption:
			forced = func() error { return marshalV2(o.CodecV2, req) }
		case grpc.ForceCodecCallOption:
			forced = func() error { _, err := o.Codec.Marshal(req); return err }
		case grpc.CustomCodecCallOption:
			forced = func() error { _, err := o.Codec.Marshal(req); return err }
		case grpc.ContentSubtypeCallOption:
			subtype = o.ContentSubtype
		}
	}
	if forced != nil {
		return forced()
	}
	// As gRPC looks a content subtype up: a codec of the older interface
	// first.
	if c := encoding.GetCodec(subtype); c != nil {
		_, err := c.Marshal(req)
		return err
	}
	if c := encoding.GetCodecV2(subtype); c != nil {
		return marshalV2(c, req)
	}
	return nil
}

func marshalV2(c encoding.CodecV2, req any) error {
	b, err := c.Marshal(req)
	b.Free()
	return err
}
