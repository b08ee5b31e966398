package httpbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
	"github.com/casbreaker/casbreaker/registry"
)

// server answers every request with status and header, counting hits.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func status(code int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}
}

// client is an http.Client over a Transport on a manual clock.
func client(t *testing.T, o httpbreaker.Options) (*http.Client, *httpbreaker.Transport, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(0)
	if o.Config.Clock == nil {
		o.Config.Clock = clock
	}
	if o.Config.ConsecutiveFailures == 0 && o.Config.FailureRateThreshold == 0 {
		o.Config.ConsecutiveFailures = 2
	}
	if o.Config.OpenDuration == 0 {
		o.Config.OpenDuration = 5 * time.Second
	}
	tr, err := httpbreaker.New(o)
	require.NoError(t, err)
	c := &http.Client{Transport: tr}
	t.Cleanup(c.CloseIdleConnections)
	return c, tr, clock
}

// get sends a GET and closes the body; it returns the status, or 0 and the
// error.
func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// 503s trip the host's breaker; then requests are refused without being
// sent, with an error that says why and when.
func TestServerErrorsTripAndRefuse(t *testing.T) {
	s := newServer(t, status(http.StatusServiceUnavailable, ""))
	c, tr, clock := client(t, httpbreaker.Options{})
	ctx := context.Background()
	for range 2 {
		code, err := get(ctx, c, s.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
	clock.Set(time.Second)
	_, err := get(ctx, c, s.URL)
	require.ErrorIs(t, err, core.ErrOpen)
	require.ErrorIs(t, err, core.ErrRejected)
	require.Equal(t, 4*time.Second, core.RetryAfterOf(err))
	require.EqualValues(t, 2, s.hits.Load(), "a refused request is not sent")

	b, err := tr.Registry().Get(strings.TrimPrefix(s.URL, "http://"))
	require.NoError(t, err)
	require.Equal(t, core.Open, b.State())
}

// A 429 with Retry-After opens the breaker for as long as it asks, in
// either form, capped by MaxRetryAfter; a malformed header is a plain
// failure.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		retryAfter string
		want       time.Duration // the wait after the one 429; 0: still closed
	}{
		{"seconds", "30", 30 * time.Second},
		{"seconds beyond the cap", "86400", time.Minute},
		{"HTTP-date", now.Add(45 * time.Second).Format(http.TimeFormat), 45 * time.Second},
		{"HTTP-date in the past", now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"malformed", "soon", 0},
		{"negative", "-5", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, status(http.StatusTooManyRequests, tc.retryAfter))
			c, _, _ := client(t, httpbreaker.Options{
				Config: core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, MaxRetryAfter: time.Minute},
				Now:    func() time.Time { return now },
			})
			code, err := get(context.Background(), c, s.URL)
			require.NoError(t, err)
			require.Equal(t, http.StatusTooManyRequests, code, "the response itself reaches the caller")
			_, err = get(context.Background(), c, s.URL)
			if tc.want == 0 {
				require.NoError(t, err, "no hint: one failure of two")
				return
			}
			require.ErrorIs(t, err, core.ErrOpen)
			require.Equal(t, tc.want, core.RetryAfterOf(err))
		})
	}
}

// Without MaxRetryAfter the header is not read (nor the wall clock it
// would be measured against): a 429 is a failure like any other.
func TestRetryAfterNeedsMaxRetryAfter(t *testing.T) {
	s := newServer(t, status(http.StatusTooManyRequests, "30"))
	c, _, _ := client(t, httpbreaker.Options{
		Config: core.Config{ConsecutiveFailures: 2},
		Now:    func() time.Time { t.Error("the wall clock was read"); return time.Now() },
	})
	_, err := get(context.Background(), c, s.URL)
	require.NoError(t, err)
	_, err = get(context.Background(), c, s.URL)
	require.NoError(t, err)
	_, err = get(context.Background(), c, s.URL)
	require.ErrorIs(t, err, core.ErrOpen)
	require.Equal(t, 5*time.Second, core.RetryAfterOf(err))
}

// A server that hangs: the caller's timeout is a failure, its
// cancellation is ignored.
func TestHangingServer(t *testing.T) {
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	c, _, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}})

	// Cancelled by the caller while the server hangs: ignored.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := get(ctx, c, s.URL)
	require.ErrorIs(t, err, context.Canceled)
	code, err := get(expiresOnArrival(arrived), c, s.URL+"/?after-cancel")
	require.Zero(t, code)
	require.ErrorIs(t, err, context.DeadlineExceeded, "still closed: the request was sent and timed out")

	// The timeout above was a failure: the breaker is open.
	_, err = get(context.Background(), c, s.URL)
	require.ErrorIs(t, err, core.ErrOpen)
}

// expiresOnArrival is a context whose deadline passes once the request
// has reached the server (a receive from arrived), whatever the machine's
// speed: a deadline of wall time could pass before the request is sent,
// which the transport then refuses unsent.
func expiresOnArrival(arrived <-chan struct{}) context.Context {
	ctx := &expiring{Context: context.Background(), done: make(chan struct{})}
	go func() { <-arrived; close(ctx.done) }()
	return ctx
}

// expiring is a context that ends with context.DeadlineExceeded when done
// is closed.
type expiring struct {
	context.Context
	done chan struct{}
}

func (c *expiring) Done() <-chan struct{} { return c.done }

func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// One breaker per host: a failing host does not refuse requests to a
// healthy one.
func TestBreakerPerHost(t *testing.T) {
	bad := newServer(t, status(http.StatusInternalServerError, ""))
	good := newServer(t, status(http.StatusOK, ""))
	c, tr, _ := client(t, httpbreaker.Options{Config: core.Config{Name: "api", ConsecutiveFailures: 1}})
	_, err := get(context.Background(), c, bad.URL)
	require.NoError(t, err)
	_, err = get(context.Background(), c, bad.URL)
	require.ErrorIs(t, err, core.ErrOpen)
	code, err := get(context.Background(), c, good.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	names := map[string]core.State{}
	for _, b := range tr.Registry().All() {
		names[b.Settings().Name] = b.State()
	}
	require.Equal(t, map[string]core.State{
		"api/" + strings.TrimPrefix(bad.URL, "http://"):  core.Open,
		"api/" + strings.TrimPrefix(good.URL, "http://"): core.Closed,
	}, names)
}

// With MaxOpenPercent, a fault that fails every host (here: every server
// answers 503) opens the breakers of a third of the hosts only: the trips
// of the rest are capped, and their requests are still sent.
func TestMaxOpenPercentKeepsHostsReachable(t *testing.T) {
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = newServer(t, status(http.StatusServiceUnavailable, ""))
	}
	c, tr, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1, CollectMetrics: true}, MaxOpenPercent: 34})
	for range 2 {
		for _, s := range servers {
			code, err := get(context.Background(), c, s.URL)
			if err != nil {
				require.ErrorIs(t, err, core.ErrOpen)
				continue
			}
			require.Equal(t, http.StatusServiceUnavailable, code)
		}
	}
	require.Equal(t, []int64{1, 2, 2}, []int64{servers[0].hits.Load(), servers[1].hits.Load(), servers[2].hits.Load()},
		"the first host's breaker opened; the others' trips were capped")
	held, allowed := tr.Registry().OpenShare()
	require.Equal(t, [2]int{1, 1}, [2]int{held, allowed})
	var capped uint64
	for _, b := range tr.Registry().All() {
		capped += b.Metrics().Capped
	}
	require.Equal(t, uint64(4), capped)
	_, err := httpbreaker.New(httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}, MaxOpenPercent: 101})
	require.ErrorIs(t, err, registry.ErrInvalidOptions)
}

// A custom classifier and key: 404 is a failure here, and every path of a
// host has its own breaker.
func TestCustomClassifierAndKey(t *testing.T) {
	s := newServer(t, status(http.StatusNotFound, ""))
	c, _, _ := client(t, httpbreaker.Options{
		Config: core.Config{ConsecutiveFailures: 1},
		Key:    func(r *http.Request) string { return r.URL.Host + r.URL.Path },
		Classifier: func(req *http.Request, resp *http.Response, err error) core.Outcome {
			if resp != nil && resp.StatusCode == http.StatusNotFound {
				return core.Failure
			}
			return httpbreaker.DefaultClassifier(req, resp, err)
		},
	})
	_, err := get(context.Background(), c, s.URL+"/a")
	require.NoError(t, err)
	_, err = get(context.Background(), c, s.URL+"/a")
	require.ErrorIs(t, err, core.ErrOpen)
	_, err = get(context.Background(), c, s.URL+"/b")
	require.NoError(t, err)
}

// A refused request's body is closed, as http.RoundTripper requires.
func TestRefusedRequestBodyIsClosed(t *testing.T) {
	s := newServer(t, status(http.StatusInternalServerError, ""))
	_, tr, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}})
	resp, err := tr.RoundTrip(mustRequest(t, s.URL, nil))
	require.NoError(t, err)
	resp.Body.Close()
	body := &closeSpy{Reader: strings.NewReader("payload")}
	_, err = tr.RoundTrip(mustRequest(t, s.URL, body))
	require.ErrorIs(t, err, core.ErrOpen)
	require.True(t, body.closed)
}

type closeSpy struct {
	io.Reader
	closed bool
}

func (c *closeSpy) Close() error { c.closed = true; return nil }

func mustRequest(t *testing.T, url string, body io.ReadCloser) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	require.NoError(t, err)
	return req
}

// With RecordBodyErrors a body that fails mid-read is a failure; without
// it the response counts at its headers.
func TestBodyFailsMidRead(t *testing.T) {
	for _, bodyErrors := range []bool{false, true} {
		t.Run(fmt.Sprint("RecordBodyErrors=", bodyErrors), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte("short"))
				// Hang up with 95 bytes owed.
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			})
			c, _, _ := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1}, RecordBodyErrors: bodyErrors})
			resp, err := c.Get(s.URL)
			require.NoError(t, err)
			_, err = io.ReadAll(resp.Body)
			require.Error(t, err, "the body ends early")
			resp.Body.Close()
			_, err = get(context.Background(), c, s.URL)
			if bodyErrors {
				require.ErrorIs(t, err, core.ErrOpen)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// Many clients at once against a flaky server, under the race detector:
// every answer is a response or a rejection, and refused requests are not
// sent.
func TestConcurrentClients(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	c, _, clock := client(t, httpbreaker.Options{Config: core.Config{WindowSize: 10, FailureRateThreshold: 50, PermittedCallsInHalfOpen: 2}})
	var wg sync.WaitGroup
	var sent, refused atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				_, err := get(context.Background(), c, s.URL)
				switch {
				case err == nil:
					sent.Add(1)
				case errors.Is(err, core.ErrRejected):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
				clock.Advance(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(8*40), sent.Load()+refused.Load())
	require.Equal(t, sent.Load(), s.hits.Load())
}

// A bad template is refused with the config's own error.
func TestNewRejectsBadConfig(t *testing.T) {
	_, err := httpbreaker.New(httpbreaker.Options{Config: core.Config{FailureRateThreshold: 150}})
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	// A classifier the transport would not use is refused, not ignored.
	_, err = httpbreaker.New(httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 5, Classifier: core.DefaultClassifier}})
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	require.ErrorContains(t, err, "Config.Classifier: not used by httpbreaker")
}

// The default classification at every boundary: the statuses around 429
// and 500..599, a caller's cancel (by the error or by the request's
// context) and a timeout.
func TestDefaultClassifier(t *testing.T) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "http://example.test/", nil)
	for code, want := range map[int]core.Outcome{
		200: core.Success, 428: core.Success, 429: core.Failure, 430: core.Success, 499: core.Success,
		500: core.Failure, 503: core.Failure, 599: core.Failure, 600: core.Success,
	} {
		require.Equal(t, want, httpbreaker.DefaultClassifier(req, &http.Response{StatusCode: code}, nil), "status %d", code)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		req  *http.Request
		err  error
		want core.Outcome
	}{
		{"cancelled", req, fmt.Errorf("read: %w", context.Canceled), core.Ignored},
		{"its context cancelled", httptest.NewRequestWithContext(cancelled, http.MethodGet, "http://example.test/", nil), errors.New("connection reset"), core.Ignored},
		{"timeout", req, fmt.Errorf("read: %w", context.DeadlineExceeded), core.Failure},
		{"transport error", req, errors.New("connection refused"), core.Failure},
		{"neither response nor error", req, nil, core.Failure},
		{"a local limit", req, fmt.Errorf("base: %w", core.ErrIgnored), core.Ignored},
		{"another breaker's rejection", req, fmt.Errorf("base: %w", core.ErrOpen), core.Ignored},
		{"a full registry", req, registry.ErrFull, core.Ignored},
	} {
		require.Equal(t, tc.want, httpbreaker.DefaultClassifier(tc.req, nil, tc.err), tc.name)
	}
}

// A Transport whose base is another breaker's transport does not count
// that breaker's refusals as the server's failures: only the one request
// the server failed counts, and the outer breaker stays closed.
func TestInnerRejectionsAreNotTheServers(t *testing.T) {
	s := newServer(t, status(http.StatusInternalServerError, ""))
	inner, err := httpbreaker.New(httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0)}})
	require.NoError(t, err)
	outer, err := httpbreaker.New(httpbreaker.Options{Base: inner, Config: core.Config{ConsecutiveFailures: 3, CollectMetrics: true, Clock: core.NewManualClock(0)}})
	require.NoError(t, err)
	c := &http.Client{Transport: outer}
	defer c.CloseIdleConnections()
	code, err := get(context.Background(), c, s.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, code)
	for range 5 {
		_, err := get(context.Background(), c, s.URL)
		require.ErrorIs(t, err, core.ErrOpen, "the inner breaker refuses")
	}
	b, err := outer.Registry().Get(httpbreaker.HostKey(mustRequest(t, s.URL, nil)))
	require.NoError(t, err)
	require.Equal(t, core.Closed, b.State())
	require.Equal(t, uint64(5), b.Metrics().Ignored)
}

// refuseProbes is a registry.Extension whose part refuses every probe of
// its breaker, as a fleet refuses one without a lease, and counts the
// breakers it was made for.
type refuseProbes struct{ made atomic.Int64 }

func (r *refuseProbes) Extend(_ string, c *core.Config) (registry.Extended, error) {
	c.ProbeGate = refuseAll{}
	return r, nil
}
func (r *refuseProbes) Made(*core.Breaker) { r.made.Add(1) }
func (r *refuseProbes) Dropped()           {}

type refuseAll struct{}

var errNoLease = fmt.Errorf("no lease: %w", core.ErrHalfOpenFull)

func (refuseAll) AdmitProbe(core.Permit) (time.Duration, error) { return time.Second, errNoLease }
func (refuseAll) ProbeDone(core.Permit, core.Outcome)           {}

// Options.Extension reaches each host's breaker: its probe gate decides
// the host's probes, so a refused probe is never sent.
func TestExtensionGatesEachHost(t *testing.T) {
	s := newServer(t, status(http.StatusServiceUnavailable, ""))
	ext := new(refuseProbes)
	c, _, clock := client(t, httpbreaker.Options{Config: core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second}, Extension: ext})
	code, err := get(context.Background(), c, s.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, code)
	clock.Advance(time.Second)
	_, err = get(context.Background(), c, s.URL)
	require.ErrorIs(t, err, errNoLease)
	require.EqualValues(t, 1, s.hits.Load(), "the refused probe was not sent")
	require.EqualValues(t, 1, ext.made.Load())
}
