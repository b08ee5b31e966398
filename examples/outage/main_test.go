package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// These tests cover the demo's bookkeeping and its scripted server without
// running the 13 s demo and without measuring wall-clock time.

func TestPhaseAt(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want phase
	}{
		{0, healthy},
		{limitedStart - time.Nanosecond, healthy},
		{limitedStart, limited},
		{outageAStart - time.Nanosecond, limited},
		{outageAStart, outageA},
		{outageBStart - time.Nanosecond, outageA},
		{outageBStart, outageB},
		{recoveryStart - time.Nanosecond, outageB},
		{recoveryStart, recovery},
		{runFor + time.Hour, recovery},
	}
	for _, c := range cases {
		if got := phaseAt(c.d); got != c.want {
			t.Errorf("phaseAt(%v) = %v, want %v", c.d, got, c.want)
		}
	}
	// Each timeline row must fall inside one phase.
	for _, b := range []time.Duration{limitedStart, outageAStart, outageBStart, recoveryStart, runFor} {
		if b%tick != 0 {
			t.Errorf("phase boundary %v is not a multiple of the %v tick", b, tick)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want result
	}{
		{nil, succeeded},
		{core.ErrOpen, rejected},
		{core.ErrHalfOpenFull, rejected},
		{fmt.Errorf("wrapped: %w", core.ErrOpen), rejected},
		{context.DeadlineExceeded, failed},
		{errors.New("GET /: 503 Service Unavailable"), failed},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestTallyDeltasAndMeans(t *testing.T) {
	var tl tally
	tl.add(succeeded, time.Millisecond)
	tl.add(rejected, 2*time.Microsecond)
	before := tl.snapshot()
	tl.reached.Add(3)
	tl.add(succeeded, time.Millisecond)
	tl.add(rejected, 4*time.Microsecond)
	tl.add(rejected, 6*time.Microsecond)
	tl.add(failed, 100*time.Millisecond)
	d := tl.snapshot().sub(before)

	want := sample{reached: 3, ok: 1, rejected: 2, failed: 1,
		rejectedNs: int64(10 * time.Microsecond), failedNs: int64(100 * time.Millisecond)}
	if d != want {
		t.Fatalf("delta = %+v, want %+v", d, want)
	}
	if d.calls() != 4 {
		t.Errorf("calls = %d, want 4", d.calls())
	}
	if got := d.meanRejected(); got != 5*time.Microsecond {
		t.Errorf("meanRejected = %v, want 5µs", got)
	}
	if got := d.meanFailed(); got != 100*time.Millisecond {
		t.Errorf("meanFailed = %v, want 100ms", got)
	}
	if got := (sample{}).meanFailed(); got != 0 {
		t.Errorf("mean of no calls = %v, want 0", got)
	}
}

func TestLatency(t *testing.T) {
	cases := []struct {
		d    time.Duration
		n    int64
		want string
	}{
		{0, 0, "-"},
		{1500 * time.Nanosecond, 3, "1.5µs"},
		{100*time.Millisecond + 250*time.Microsecond, 1, "100.2ms"},
	}
	for _, c := range cases {
		if got := latency(c.d, c.n); got != c.want {
			t.Errorf("latency(%v, %d) = %q, want %q", c.d, c.n, got, c.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	at := func(d time.Duration, from, to core.State) transition {
		return transition{at: d, from: from, to: to}
	}
	good := []transition{
		at(3100*time.Millisecond, core.Closed, core.Open),
		at(3600*time.Millisecond, core.Open, core.HalfOpen),
		at(3601*time.Millisecond, core.HalfOpen, core.Open),
		at(10*time.Second, core.Open, core.HalfOpen),
		at(10*time.Second+time.Millisecond, core.HalfOpen, core.Closed),
	}
	cases := []struct {
		name   string
		events []transition
		final  core.State
		want   int // number of problems
	}{
		{"opened and recovered", good, core.Closed, 0},
		{"never opened", nil, core.Closed, 1},
		{"never closed again", good[:3], core.Open, 2},
		{"closed only during the outage", []transition{
			at(3100*time.Millisecond, core.Closed, core.Open),
			at(3600*time.Millisecond, core.Open, core.HalfOpen),
			at(3601*time.Millisecond, core.HalfOpen, core.Closed),
		}, core.Closed, 1},
		{"ended half-open", good, core.HalfOpen, 1},
		{"tripped again after recovery", append(slices.Clone(good),
			at(12900*time.Millisecond, core.Closed, core.Open)), core.Open, 1},
		{"opened only in the healthy phase", []transition{at(time.Second, core.Closed, core.Open)}, core.Closed, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := verdict(c.events, c.final)
			if len(got) != c.want {
				t.Errorf("verdict = %q, want %d problem(s)", got, c.want)
			}
			for _, p := range got {
				t.Log(p)
			}
		})
	}
}

// TestHandlerScript puts the server in each phase through its elapsed
// function and checks what it answers and counts.
func TestHandlerScript(t *testing.T) {
	cases := []struct {
		at       time.Duration
		code     int
		body     bool // whether the handler writes a body
		canceled bool // the client has already given up
	}{
		{time.Second, http.StatusOK, true, false},
		{4 * time.Second, http.StatusTooManyRequests, true, false},
		{5 * time.Second, http.StatusServiceUnavailable, true, false},
		// Hanging: with the client gone, the handler must return at once
		// and write nothing (it would otherwise sleep hangFor and write).
		{7 * time.Second, http.StatusOK, false, true},
		{10 * time.Second, http.StatusOK, true, false},
	}
	st := &stats{}
	for _, c := range cases {
		h := newHandler(func() time.Duration { return c.at }, st)
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.canceled {
			ctx, cancel := context.WithCancel(req.Context())
			cancel()
			req = req.WithContext(ctx)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || (rec.Body.Len() > 0) != c.body {
			t.Errorf("at %v: code %d body %q, want code %d, body written %v",
				c.at, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
	var reached []int64
	for p := range numPhases {
		reached = append(reached, st.byPhase[p].reached.Load())
	}
	if want := []int64{1, 1, 1, 1, 1}; !slices.Equal(reached, want) {
		t.Errorf("reached per phase = %v, want %v", reached, want)
	}
	if got := st.total.reached.Load(); got != 5 {
		t.Errorf("reached in total = %d, want 5", got)
	}
}

func TestShownLines(t *testing.T) {
	exposition := `# HELP casbreaker_state 1 for the state the breaker is in, 0 for each other state.
# TYPE casbreaker_state gauge
casbreaker_state{breaker="demo/a",state="closed"} 1
casbreaker_state{breaker="demo/a",state="open"} 0
casbreaker_state{breaker="demo/b",state="closed"} 1
casbreaker_buffered_calls{breaker="demo/a",kind="successful"} 20
casbreaker_calls_total{breaker="demo/a",kind="failed"} 12
casbreaker_transitions_total{breaker="demo/a",from="closed",reason="retry_after",to="open"} 1
`
	got, err := shownLines(strings.NewReader(exposition), "demo/a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`casbreaker_state{breaker="demo/a",state="closed"} 1`,
		`casbreaker_calls_total{breaker="demo/a",kind="failed"} 12`,
		`casbreaker_transitions_total{breaker="demo/a",from="closed",reason="retry_after",to="open"} 1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("shownLines = %q, want %q", got, want)
	}
}
