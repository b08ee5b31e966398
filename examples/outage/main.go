// Command outage runs circuit breakers in front of real HTTP calls while one
// of two servers goes through three outages, and prints what the breakers
// did about it, every 250 ms, as slog lines for every transition, and as a
// summary per phase.
//
// Two servers listen on 127.0.0.1. The steady one always answers 200 OK; the
// flaky one follows a script driven by the time since start:
//
//	0 s - 3 s     healthy: 200 OK in a couple of milliseconds
//	3 s - 4.5 s   rate limited: 429 with Retry-After: 1
//	4.5 s - 6 s   outage A: every request answers 503 at once
//	6 s - 9 s     outage B: every request hangs for longer than the client waits
//	9 s on        healthy again
//
// Sixteen workers call both servers in turn through one http.Client whose
// Transport is an httpbreaker.Transport: one breaker per host, each call
// with a 100 ms timeout. The point to watch is the difference between
// "failed" and "rejected": a failed call reached the server and cost up to
// the whole timeout, a rejected call was refused by the open breaker in
// microseconds and never added load to a server that was already down. A
// refused worker waits as the rejection tells it (core.RetryAfterOf)
// instead of spinning; the 429's Retry-After keeps the flaky host's breaker
// open a whole second. The steady host's breaker never opens. When the
// flaky server heals, half-open probes find out and its breaker closes on
// its own.
//
// The breakers' Prometheus series are served on /metrics of a third
// loopback listener while the demo runs (the URL is printed first), and
// the end of the demo prints the flaky host's non-zero series of its state,
// calls, refusals and transitions as scraped from there.
//
// Run it with `make demo` or `go -C examples/outage run .` (a nested
// module, for client_golang). It ends by itself after about 13 s, with
// exit status 0 if the breaker opened during the outage and closed again
// after it, and 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/slogbreaker"
)

// The script of the demo. The phase boundaries are multiples of tick, so
// every row of the timeline belongs to exactly one phase.
const (
	limitedStart  = 3 * time.Second         // the server starts answering 429 with Retry-After
	outageAStart  = 4500 * time.Millisecond // the server starts answering 503
	outageBStart  = 6 * time.Second         // the server starts hanging
	recoveryStart = 9 * time.Second         // the server is healthy again
	runFor        = 13 * time.Second

	tick        = 250 * time.Millisecond // one row of the timeline
	workers     = 16
	callTimeout = 100 * time.Millisecond // per request, client side
	hangFor     = 500 * time.Millisecond // well past callTimeout
	serveDelay  = 2 * time.Millisecond   // a healthy answer is fast but not free
	pause       = 2 * time.Millisecond   // between two calls of one worker
	retryAfter  = "1"                    // the 429's Retry-After, in seconds
	maxWait     = 2 * time.Second        // the longest a worker waits when told to
)

// phase is one act of the server's script.
type phase int

const (
	healthy phase = iota
	limited
	outageA
	outageB
	recovery
	numPhases
)

// String names the phase in the timeline and the summary.
func (p phase) String() string {
	switch p {
	case healthy:
		return "healthy"
	case outageA:
		return "503 outage"
	case limited:
		return "429 limited"
	case outageB:
		return "hang outage"
	case recovery:
		return "recovery"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// span is the part of the script the phase covers, for the summary.
func (p phase) span() string {
	bounds := []time.Duration{0, limitedStart, outageAStart, outageBStart, recoveryStart, runFor}
	return fmt.Sprintf("%v-%v", bounds[p], bounds[p+1])
}

// isOutage reports whether the server is down in p.
func (p phase) isOutage() bool { return p == outageA || p == limited || p == outageB }

// phaseAt is the phase of the script at elapsed time d since start.
func phaseAt(d time.Duration) phase {
	switch {
	case d < limitedStart:
		return healthy
	case d < outageAStart:
		return limited
	case d < outageBStart:
		return outageA
	case d < recoveryStart:
		return outageB
	}
	return recovery
}

// result is how a call through the breaker ended, from the caller's side.
type result int

const (
	succeeded result = iota // a 2xx answer in time
	rejected                // refused by the breaker: no request was sent
	failed                  // sent, and it errored, timed out or got a non-2xx answer
)

// classify tells the breaker's own refusals (ErrOpen and ErrHalfOpenFull
// both match ErrRejected) from the errors of calls that were really made.
func classify(err error) result {
	switch {
	case err == nil:
		return succeeded
	case errors.Is(err, core.ErrRejected):
		return rejected
	}
	return failed
}

// tally accumulates calls and their latencies. Its counters only grow, so
// the timeline reads a row as the difference of two snapshots and nobody
// has to reset anything under the writers' feet.
type tally struct {
	reached    atomic.Int64 // requests that arrived at the server
	ok         atomic.Int64
	rejected   atomic.Int64
	failed     atomic.Int64
	rejectedNs atomic.Int64 // total latency of the rejected calls
	failedNs   atomic.Int64 // total latency of the failed calls
}

// add records one finished call that took d.
func (t *tally) add(r result, d time.Duration) {
	switch r {
	case succeeded:
		t.ok.Add(1)
	case rejected:
		t.rejectedNs.Add(int64(d))
		t.rejected.Add(1)
	default:
		t.failedNs.Add(int64(d))
		t.failed.Add(1)
	}
}

// snapshot reads the counters. The fields are read one by one, so a call
// finishing meanwhile may show up in the next row instead of this one; for
// a timeline that is harmless, and it keeps the hot path free of locks.
func (t *tally) snapshot() sample {
	return sample{
		reached:    t.reached.Load(),
		ok:         t.ok.Load(),
		rejected:   t.rejected.Load(),
		failed:     t.failed.Load(),
		rejectedNs: t.rejectedNs.Load(),
		failedNs:   t.failedNs.Load(),
	}
}

// sample is a plain copy of a tally, or the difference of two.
type sample struct {
	reached, ok, rejected, failed int64
	rejectedNs, failedNs          int64
}

// sub returns s - o, field by field: the activity between two snapshots.
func (s sample) sub(o sample) sample {
	return sample{
		reached:    s.reached - o.reached,
		ok:         s.ok - o.ok,
		rejected:   s.rejected - o.rejected,
		failed:     s.failed - o.failed,
		rejectedNs: s.rejectedNs - o.rejectedNs,
		failedNs:   s.failedNs - o.failedNs,
	}
}

// calls is the number of calls the workers made, whatever their result.
func (s sample) calls() int64 { return s.ok + s.rejected + s.failed }

// meanRejected is the mean latency of the rejected calls, 0 if none.
func (s sample) meanRejected() time.Duration { return mean(s.rejectedNs, s.rejected) }

// meanFailed is the mean latency of the failed calls, 0 if none.
func (s sample) meanFailed() time.Duration { return mean(s.failedNs, s.failed) }

func mean(totalNs, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(totalNs / n)
}

// latency formats a mean latency in the unit that makes it readable: a
// rejection takes microseconds, a failure up to the 100 ms timeout.
func latency(d time.Duration, n int64) string {
	switch {
	case n == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// stats is everything the demo counts: one tally for the timeline and one
// per phase for the summary.
type stats struct {
	total   tally
	byPhase [numPhases]tally
	steady  [3]atomic.Int64 // the steady host's calls, by result
	waited  atomic.Int64    // the total time workers were told to wait, ns
}

// arrived counts a request that reached the server during p.
func (s *stats) arrived(p phase) {
	s.total.reached.Add(1)
	s.byPhase[p].reached.Add(1)
}

// record counts a call started during p that ended as r after d.
func (s *stats) record(p phase, r result, d time.Duration) {
	s.total.add(r, d)
	s.byPhase[p].add(r, d)
}

// newHandler returns the scripted server. elapsed tells it where it is in
// the script; it is a parameter so the tests can put it in any phase.
func newHandler(elapsed func() time.Duration, st *stats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := phaseAt(elapsed())
		st.arrived(p)
		switch p {
		case outageA:
			// A dependency that is down often fails fast: the client sees
			// the error quickly, yet every request still costs the server.
			http.Error(w, "outage A: service unavailable", http.StatusServiceUnavailable)
		case limited:
			// A dependency that says when to come back: the breaker stays
			// open as long as it asks (httpbreaker reads Retry-After).
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "rate limited", http.StatusTooManyRequests)
		case outageB:
			// The nastier outage: nothing answers in time. The client gives
			// up after callTimeout; r.Context() is cancelled then, so the
			// handler goroutine ends instead of piling up.
			if sleep(r.Context(), hangFor) {
				fmt.Fprintln(w, "late")
			}
		default:
			if sleep(r.Context(), serveDelay) {
				fmt.Fprintln(w, "ok")
			}
		}
	})
}

// sleep waits for d or until ctx is done, and reports whether it waited
// the whole d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// call makes one GET through the client, whose Transport holds the host's
// breaker, with its own timeout. A non-2xx answer is an error here; the
// breaker's own judgement is httpbreaker.DefaultClassifier's (5xx and 429 are
// failures).
func call(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Reading the body to the end lets the Transport reuse the connection
	// for the next call.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// worker calls the flaky and the steady server in turn until ctx is done.
// Each request runs under a context detached from ctx's cancellation:
// stopping the demo lets calls in flight finish (within callTimeout)
// instead of counting them as failures. A refused call waits as its
// rejection says (at most maxWait, and not past the end of the demo)
// before that host is tried again, instead of spinning on the refusal.
func worker(ctx context.Context, start time.Time, client *http.Client, flaky, steady string, st *stats) {
	reqCtx := context.WithoutCancel(ctx)
	var notBefore [2]time.Time // per host: when the last rejection said to come back
	for i := 0; ctx.Err() == nil; i++ {
		host, url := i%2, flaky
		if host == 1 {
			url = steady
		}
		if wait := time.Until(notBefore[host]); wait > 0 {
			sleep(ctx, wait)
			continue
		}
		began := time.Now()
		p := phaseAt(began.Sub(start))
		err := call(reqCtx, client, url)
		r := classify(err)
		if r == rejected {
			wait := min(core.RetryAfterOf(err), maxWait)
			notBefore[host] = time.Now().Add(wait)
			st.waited.Add(int64(wait))
		}
		if host == 0 {
			st.record(p, r, time.Since(began))
		} else {
			st.steady[r].Add(1)
		}
		time.Sleep(pause)
	}
}

// transition is one state change the breaker reported, stamped with the
// time since the demo started.
type transition struct {
	at       time.Duration
	host     string // the breaker's name: "demo/" and the host
	from, to core.State
	reason   core.Reason
	gen      uint64
}

// transitionLog keeps the transitions for the summary. The breaker delivers
// them one at a time, in order, but on whichever worker goroutine committed
// them, hence the mutex.
type transitionLog struct {
	mu     sync.Mutex
	events []transition
}

func (l *transitionLog) add(t transition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, t)
}

func (l *transitionLog) all() []transition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// verdict checks that the breaker did its job: it opened while the server
// was down, closed again once it was back, and ended closed. It returns
// what went wrong, or nothing.
func verdict(events []transition, final core.State) []string {
	var problems []string
	opened := slices.ContainsFunc(events, func(t transition) bool {
		return t.to == core.Open && phaseAt(t.at).isOutage()
	})
	if !opened {
		problems = append(problems, "the breaker never opened during the outage")
	}
	closed := slices.ContainsFunc(events, func(t transition) bool {
		return t.to == core.Closed && phaseAt(t.at) == recovery
	})
	if opened && !closed {
		problems = append(problems, "the breaker never closed after the server recovered")
	}
	if final != core.Closed {
		msg := fmt.Sprintf("the breaker ended %v, not closed", final)
		// A trip while the server was healthy means healthy calls missed
		// their timeout: the machine, not the server, was too slow.
		if i := slices.IndexFunc(events, func(t transition) bool {
			return t.from == core.Closed && t.to == core.Open && phaseAt(t.at) == recovery
		}); i >= 0 {
			msg += fmt.Sprintf(" (it tripped again at %.3fs with the server healthy: calls took over %v; is the machine overloaded?)",
				events[i].at.Seconds(), callTimeout)
		}
		problems = append(problems, msg)
	}
	return problems
}

const rowFormat = "%8s  %-11s  %-9s  %7v  %6v  %8v  %6v  %9s  %9s\n"

func main() { os.Exit(run()) }

// run is the whole demo. It returns the exit status rather than calling
// os.Exit itself, so that its deferred clean-up runs first.
func run() int {
	goroutinesBefore := runtime.NumGoroutine()
	// The server's script and the timeline's ticks share one origin, so the
	// rows' boundaries fall on the phases' boundaries.
	start := time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	since := func() time.Duration { return time.Since(start) }
	st := &stats{}

	// The servers: real listeners on the loopback interface only.
	flakySrv, flaky, err := serve(newHandler(since, st))
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		return 1
	}
	steadySrv, steady, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		return 1
	}
	flakyName := "demo/" + strings.TrimPrefix(strings.TrimSuffix(flaky, "/"), "http://")

	var history transitionLog
	var transitions observe.Transitions // for /metrics: transitions by reason
	logTransition := transitions.Listener(slogbreaker.Listener(slog.New(slog.NewTextHandler(os.Stdout, nil)), slogbreaker.Options{}))
	cfg := core.Config{
		Name:                     "demo",
		WindowType:               core.CountBased,
		WindowSize:               20,
		FailureRateThreshold:     50,
		MinimumNumberOfCalls:     10,
		OpenDuration:             500 * time.Millisecond,
		OpenDurationBackoff:      2, // 0.5 s, 1 s, 2 s, 2 s... while the probes keep failing
		MaxOpenDuration:          2 * time.Second,
		PermittedCallsInHalfOpen: 2,
		MaxRetryAfter:            2 * time.Second, // honour Retry-After, up to 2 s
		CollectMetrics:           true,            // the counters on /metrics
		// Clock left nil: the breaker uses the system's monotonic clock,
		// which also gives each transition its wall-clock Time.
		OnStateChange: func(t core.Transition) {
			history.add(transition{at: since(), host: t.Name, from: t.From, to: t.To, reason: t.Reason, gen: t.Generation})
			logTransition(t)
		},
	}
	// The client: its own base Transport, so no global default is touched,
	// with enough idle connections per host for every worker to keep its
	// own, under a breaker per host.
	base := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConns:        4 * workers,
		MaxIdleConnsPerHost: 2 * workers,
		IdleConnTimeout:     30 * time.Second,
	}
	tr, err := httpbreaker.New(httpbreaker.Options{Base: base, Config: cfg})
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		return 1
	}
	client := &http.Client{Transport: tr}
	metricsSrv, metricsURL, err := serveMetrics(tr.Registry(), &transitions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		return 1
	}
	state := func() core.State {
		for _, b := range tr.Registry().All() {
			if b.Settings().Name == flakyName {
				return b.State()
			}
		}
		return core.Closed // no call yet
	}

	fmt.Printf("outage demo: %d workers -> flaky %s and steady %s, %v timeout per call\n", workers, flaky, steady, callTimeout)
	fmt.Printf("breakers, one per host: %v window of %d calls, trips at %d%% failures once it holds %d, open %v (x%v up to %v), %d probes, Retry-After up to %v\n",
		cfg.WindowType, cfg.WindowSize, cfg.FailureRateThreshold, cfg.MinimumNumberOfCalls,
		cfg.OpenDuration, cfg.OpenDurationBackoff, cfg.MaxOpenDuration, cfg.PermittedCallsInHalfOpen, cfg.MaxRetryAfter)
	fmt.Printf("metrics: %s (Prometheus text; curl it while the demo runs)\n", metricsURL)
	fmt.Printf("script: healthy %v, 429s (Retry-After: %s) from %v, 503s from %v, hangs from %v, healthy from %v, stop at %v\n\n",
		time.Duration(0), retryAfter, limitedStart, outageAStart, outageBStart, recoveryStart, runFor)
	fmt.Printf(rowFormat, "elapsed", "phase", "state", "reached", "ok", "rejected", "failed", "rej mean", "fail mean")

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { worker(ctx, start, client, flaky, steady, st) })
	}

	// The timeline: one row per tick, from the main goroutine, as the
	// difference between two snapshots of the running totals. A Ticker
	// drops ticks when the machine is too busy to take them, so each row
	// is labelled and the loop ended by the clock, not by counting ticks.
	prev, prevAt := st.total.snapshot(), time.Duration(0)
	for prevAt < runFor {
		<-ticker.C
		now, at := st.total.snapshot(), since()
		d := now.sub(prev)
		fmt.Printf(rowFormat, fmt.Sprintf("%.2fs", at.Seconds()), phaseAt((prevAt+at)/2), state(),
			d.reached, d.ok, d.rejected, d.failed,
			latency(d.meanRejected(), d.rejected), latency(d.meanFailed(), d.failed))
		prev, prevAt = now, at
	}

	// Shut down in dependency order: the workers first (their last calls
	// end within callTimeout), then the servers, then the idle connections.
	stop()
	wg.Wait()
	final := state()
	// The scrape goes through its own client: the demo's would put the
	// metrics server behind a breaker too.
	scraper := &http.Client{Timeout: 2 * time.Second}
	scraped, scrapeErr := scrape(scraper, metricsURL, flakyName)
	for _, srv := range []*server{flakySrv, steadySrv, metricsSrv} {
		srv.shutdown()
	}
	client.CloseIdleConnections()
	scraper.CloseIdleConnections()

	events := history.all()
	var flakyEvents, steadyEvents []transition
	for _, e := range events {
		if e.host == flakyName {
			flakyEvents = append(flakyEvents, e)
		} else {
			steadyEvents = append(steadyEvents, e)
		}
	}
	printSummary(st, flakyEvents, final)
	fmt.Printf("\nscraped from %s at the end (the flaky host's non-zero series):\n", metricsURL)
	for _, line := range scraped {
		fmt.Println("  " + line)
	}

	// Connection goroutines notice their closed sockets asynchronously;
	// give them a moment before counting what is left.
	left := goroutinesSettled(goroutinesBefore, time.Second)
	fmt.Printf("goroutines at exit: %d (at start: %d)\n", left, goroutinesBefore)

	problems := verdict(flakyEvents, final)
	if len(steadyEvents) > 0 {
		problems = append(problems, fmt.Sprintf("the steady host's breaker changed state %d times", len(steadyEvents)))
	}
	if !slices.ContainsFunc(flakyEvents, func(t transition) bool { return t.reason == core.ReasonRetryAfter }) {
		problems = append(problems, "no 429's Retry-After opened the breaker")
	}
	switch {
	case scrapeErr != nil:
		problems = append(problems, "the /metrics scrape failed: "+scrapeErr.Error())
	case !slices.ContainsFunc(scraped, func(l string) bool { return strings.HasPrefix(l, "casbreaker_transitions_total{") }):
		problems = append(problems, "the /metrics scrape showed no transition of the flaky host")
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "\nFAIL: "+strings.Join(problems, "; "))
		return 1
	}
	fmt.Println("\nOK: the flaky host's breaker opened during the outages (for as long as Retry-After asked), shed the load, and closed again after recovery; the steady host's never opened")
	return 0
}

// server is a running HTTP server and what its shutdown waits for.
type server struct {
	srv    *http.Server
	served chan error
}

// serve starts h on a loopback listener and returns its server and URL.
func serve(h http.Handler) (*server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	s := &server{srv: &http.Server{Handler: h, ReadHeaderTimeout: time.Second}, served: make(chan error, 1)}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, "http://" + ln.Addr().String() + "/", nil
}

// shutdown stops the server, reporting anything unexpected.
func (s *server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "outage: server shutdown:", err)
	}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "outage: server:", err)
	}
}

// printSummary prints one row per phase and the breaker's history.
func printSummary(st *stats, events []transition, final core.State) {
	const format = "%-11s  %-7s  %6v  %7v  %6v  %8v  %6v  %8s  %9s  %9s\n"
	fmt.Printf("\nsummary per phase (calls by start time, server arrivals by arrival time):\n")
	fmt.Printf(format, "phase", "span", "calls", "reached", "ok", "rejected", "failed", "shed", "rej mean", "fail mean")
	for p := range numPhases {
		s := st.byPhase[p].snapshot()
		shed := "-"
		if s.calls() > 0 {
			shed = fmt.Sprintf("%.1f%%", 100*float64(s.rejected)/float64(s.calls()))
		}
		fmt.Printf(format, p, p.span(), s.calls(), s.reached, s.ok, s.rejected, s.failed, shed,
			latency(s.meanRejected(), s.rejected), latency(s.meanFailed(), s.failed))
	}

	opens := 0
	for _, t := range events {
		if t.to == core.Open {
			opens++
		}
	}
	fmt.Printf("\nflaky host: transitions: %d (%d into open), final state: %v\n", len(events), opens, final)
	fmt.Printf("steady host: %d ok, %d rejected, %d failed\n", st.steady[succeeded].Load(), st.steady[rejected].Load(), st.steady[failed].Load())
	fmt.Printf("workers told to wait: %v in total, instead of retrying at once\n", time.Duration(st.waited.Load()).Round(time.Millisecond))
}

// goroutinesSettled waits up to within for the number of goroutines to fall
// back to want, and returns the last count it saw.
func goroutinesSettled(want int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}
