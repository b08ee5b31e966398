package httpbreaker_test

// Edge cases that are easy to get wrong: a 101 body that must stay
// writable, the zero and the nil Transport, a classifier that panics on a body read,
// a base transport that breaks http.RoundTripper's contract.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

func edgeConfig() core.Config {
	return core.Config{ConsecutiveFailures: 2, OpenDuration: 5 * time.Second, CollectMetrics: true}
}

// net/http documents that a 101 Switching Protocols response's Body
// implements io.Writer (httputil.ReverseProxy and websocket clients rely on
// it). With RecordBodyErrors, a 101 is recorded at its headers and its body
// left unwrapped (a wrapper with only Read and Close broke upgrades).
func TestSwitchingProtocolsBodyStaysWritable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString(line)
		brw.Flush()
	}))
	defer srv.Close()

	for _, record := range []bool{false, true} {
		tr, err := httpbreaker.New(httpbreaker.Options{Config: edgeConfig(), RecordBodyErrors: record})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", resp.StatusCode)
		}
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			resp.Body.Close()
			t.Errorf("RecordBodyErrors=%v: 101 body %T is not an io.ReadWriteCloser (net/http promises one); upgrade impossible", record, resp.Body)
			continue
		}
		rw.Write([]byte("ping\n"))
		got, _ := bufio.NewReader(rw).ReadString('\n')
		rw.Close()
		if got != "ping\n" {
			t.Errorf("RecordBodyErrors=%v: echo %q", record, got)
		}
	}
}

// A zero Transport (not made by New) panics with a message naming New, as
// the registry's zero value does, not with a nil dereference.
func TestZeroTransportPanicsNamingNew(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg := ""
		switch v := r.(type) {
		case error:
			msg = v.Error()
		case string:
			msg = v
		}
		if strings.Contains(msg, "nil pointer") || !strings.Contains(msg, "New") {
			t.Errorf("zero Transport panics with %q, not a message naming New", msg)
		}
	}()
	var tr httpbreaker.Transport
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/", nil)
	tr.RoundTrip(req)
}

// A nil *Transport (an httpbreaker.New whose error went unchecked) panics
// with a message that says so.
func TestNilTransportPanicsNamingNew(t *testing.T) {
	var tr *httpbreaker.Transport
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/", nil)
	require.PanicsWithValue(t, "httpbreaker: RoundTrip on a nil *Transport: make one with httpbreaker.New and check its error", func() {
		_, _ = tr.RoundTrip(req)
	})
}

// Options.Classifier promises: "A panic in it propagates; the request's
// permit is then released as Ignored." That holds on a body read error
// too: the panic leaves Read with the permit released as Ignored, and the
// caller's deferred Close records nothing more (recording a Success there
// would count a call whose body failed as healthy).
func TestClassifyPanicInBodyReleasesAsIgnored(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		w.Write([]byte("short"))
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close() // body ends early: unexpected EOF
	}))
	defer srv.Close()
	classify := func(req *http.Request, resp *http.Response, err error) core.Outcome {
		if err != nil {
			panic("classifier panics on a body error")
		}
		return httpbreaker.DefaultClassifier(req, resp, err)
	}
	tr, err := httpbreaker.New(httpbreaker.Options{Config: edgeConfig(), RecordBodyErrors: true, Classifier: classify})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer resp.Body.Close() // as every caller does
		defer func() { recover() }()
		io.ReadAll(resp.Body)
		t.Fatal("Classifier did not panic")
	}()
	b, _ := tr.Registry().Get(srv.Listener.Addr().String())
	m := b.Metrics()
	if m.Successes != 0 || m.Ignored != 1 {
		t.Errorf("after a Classifier panic the permit was released as Successes=%d Ignored=%d Failures=%d; want Ignored=1", m.Successes, m.Ignored, m.Failures)
	}
}

// A base transport that returns neither a response nor an error breaks
// http.RoundTripper's contract; the default classifier counts it as a
// failure instead of dereferencing the missing response. A custom one may
// call it a success; with RecordBodyErrors there is then no body to
// watch: the outcome is recorded at once.
func TestNilResponse(t *testing.T) {
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	success := func(*http.Request, *http.Response, error) core.Outcome { return core.Success }
	for _, tc := range []struct {
		name string
		o    httpbreaker.Options
		want core.Metrics
	}{
		{"default classifier", httpbreaker.Options{Config: edgeConfig(), Base: base}, core.Metrics{Failures: 1}},
		{"called a success, RecordBodyErrors", httpbreaker.Options{Config: edgeConfig(), Base: base, Classifier: success, RecordBodyErrors: true}, core.Metrics{Successes: 1}},
	} {
		tr, err := httpbreaker.New(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://example.test/", nil)
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		b, err := tr.Registry().Get("example.test")
		if err != nil {
			t.Fatal(err)
		}
		if m := b.Metrics(); m.Failures != tc.want.Failures || m.Successes != tc.want.Successes {
			t.Errorf("%s: metrics %+v, want %+v", tc.name, m, tc.want)
		}
	}
}

// A response with a nil Body breaks http.RoundTripper's contract too, and
// http.Client mends it with an empty body. With RecordBodyErrors the
// outcome is then recorded at the headers, and the body left nil for the
// Client to mend: a watched nil body made the caller's first Read panic
// and kept the permit out for good.
func TestNilResponseBody(t *testing.T) {
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Request: r}, nil
	})
	tr, err := httpbreaker.New(httpbreaker.Options{Config: edgeConfig(), Base: base, RecordBodyErrors: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get("http://example.test/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	b, err := tr.Registry().Get("example.test")
	if err != nil {
		t.Fatal(err)
	}
	if m := b.Metrics(); m.Successes != 1 {
		t.Errorf("metrics %+v, want one success", m)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
