package httpbreaker_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

// A request whose context is done before it starts is not sent, takes no
// permit and counts for nothing: three of them do not open a breaker that
// opens at three failures, and a healthy host stays reachable. It fails
// with the context's error (its cause, as net/http's own transport does),
// and its body is closed.
func TestEndedContextIsNotSentNorCounted(t *testing.T) {
	errStop := errors.New("shutting down")
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
		{"cancelled with a cause", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errStop)
			return ctx
		}, errStop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, status(http.StatusOK, ""))
			c, tr, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 3}})
			for range 3 {
				_, err := get(tc.ctx(), c, s.URL)
				require.ErrorIs(t, err, tc.want)
			}
			body := &closeSpy{Reader: strings.NewReader("payload")}
			req := mustRequest(t, s.URL, body).WithContext(tc.ctx())
			_, err := tr.RoundTrip(req)
			require.ErrorIs(t, err, tc.want)
			require.True(t, body.closed, "the body of a request not sent is closed")
			require.Zero(t, s.hits.Load(), "not sent")
			require.Zero(t, tr.Registry().Len(), "no breaker asked, no permit taken")

			code, err := get(context.Background(), c, s.URL)
			require.NoError(t, err, "the healthy host is reachable")
			require.Equal(t, http.StatusOK, code)
		})
	}
}

// A context that ends while the request is out: the caller's cancel says
// nothing about the server (ignored), a deadline the server did not meet
// is its failure; both on the headers and, with RecordBodyErrors, on the
// body. The context here ends when the test says, not on a timer.
func TestContextEndsDuringTheCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		inBody bool
		want   core.Metrics // of the one breaker, after the one request
	}{
		{"cancelled awaiting the headers", context.Canceled, false, core.Metrics{Ignored: 1}},
		{"deadline awaiting the headers", context.DeadlineExceeded, false, core.Metrics{Failures: 1}},
		{"cancelled reading the body", context.Canceled, true, core.Metrics{Ignored: 1}},
		{"deadline reading the body", context.DeadlineExceeded, true, core.Metrics{Failures: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.inBody {
					w.WriteHeader(http.StatusOK)
					_, _ = w.Write([]byte("first part"))
					http.NewResponseController(w).Flush()
				}
				close(arrived)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			defer close(release)
			_, tr, _ := client(t, httpbreaker.Options{
				Config:           core.Config{ConsecutiveFailures: 5, CollectMetrics: true},
				RecordBodyErrors: true,
			})
			ctx := newEndingContext()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
			require.NoError(t, err)
			if tc.inBody {
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				<-arrived
				ctx.end(tc.err)
				_, err = io.ReadAll(resp.Body)
				require.ErrorIs(t, err, tc.err)
				resp.Body.Close()
			} else {
				go func() { <-arrived; ctx.end(tc.err) }()
				_, err := tr.RoundTrip(req)
				require.ErrorIs(t, err, tc.err)
			}
			b, err := tr.Registry().Get(strings.TrimPrefix(s.URL, "http://"))
			require.NoError(t, err)
			m := b.Metrics()
			require.Equal(t, tc.want, core.Metrics{Successes: m.Successes, Failures: m.Failures, Ignored: m.Ignored})
		})
	}
}

// endingContext is a context that the test ends, with the error it
// chooses: context.DeadlineExceeded stands for a deadline passing without
// waiting for one.
type endingContext struct {
	context.Context
	done chan struct{}
	err  error // set before done is closed
}

func newEndingContext() *endingContext {
	return &endingContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *endingContext) end(err error) { c.err = err; close(c.done) }

func (c *endingContext) Done() <-chan struct{} { return c.done }

func (c *endingContext) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// A request with no server to send to (no URL, or a URL with no host) is
// the caller's mistake: it is refused with an error that says so, its body
// closed, and no breaker is asked, so it cannot trip one.
func TestRequestWithNoHostIsNotSentNorCounted(t *testing.T) {
	_, tr, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}})
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{"nil URL", func() *http.Request {
			r := mustRequest(t, "http://example.com/", nil)
			r.URL = nil
			return r
		}, "no URL"},
		{"no host", func() *http.Request { return mustRequest(t, "http:///path", nil) }, `"http:///path" has no host`},
		{"relative", func() *http.Request { return mustRequest(t, "/path", nil) }, `"/path" has no host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &closeSpy{Reader: strings.NewReader("payload")}
			req := tc.req()
			req.Body = body
			for range 3 {
				_, err := tr.RoundTrip(req)
				require.ErrorContains(t, err, tc.want)
			}
			require.True(t, body.closed, "the body of a request not sent is closed")
			require.Zero(t, tr.Registry().Len(), "no breaker asked")
		})
	}
}
