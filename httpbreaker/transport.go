// Package httpbreaker puts circuit breakers in front of an HTTP client: a
// Transport (an http.RoundTripper) that wraps a base transport with one
// breaker per host, or per any key of the request, from a registry made
// from one template core.Config.
//
// A request whose breaker refuses is not sent: RoundTrip returns the
// rejection, which an http.Client wraps in a *url.Error; errors.Is(err,
// core.ErrOpen) and the other reasons see through it, and
// core.RetryAfterOf(err) says when to try again. Nor is a request whose
// context is done before it starts, which takes no permit. Every other
// request is sent, and its outcome is recorded when the response headers
// arrive (or, with Options.RecordBodyErrors, when the body has been read):
// by default 5xx and 429 responses and transport errors are failures,
// timeouts included, other responses successes, and a request that its
// caller cancelled is ignored. With Config.MaxRetryAfter set, a failure
// response's Retry-After header, in either form (seconds or an HTTP
// date), keeps the host's breaker open at least that long, capped at
// MaxRetryAfter.
package httpbreaker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// Options configures a Transport. Only Config is required.
type Options struct {
	// Base sends the requests. Zero: http.DefaultTransport.
	Base http.RoundTripper
	// Config is the template of every host's breaker (see registry.Options:
	// each breaker is named Config.Name + "/" + key, or the key alone).
	// Set MaxRetryAfter to honour Retry-After headers. Its Classifier
	// must be nil: the transport classifies by Options.Classifier, which sees
	// the response, so New refuses a Config that sets one rather than
	// ignore it.
	Config core.Config
	// Key picks the breaker of a request; the key is also the breaker's
	// name (after Config.Name and a "/"), so it must be printable UTF-8
	// to be exported as a metric label. Zero: HostKey, the URL's host and
	// port in a canonical form.
	Key func(*http.Request) string
	// Classifier maps what a request ended with to an outcome: the response
	// (nil on a transport error) and the error (nil with a response, or
	// the body's read error with RecordBodyErrors). Zero: DefaultClassifier.
	// A panic in it propagates; the request's permit is then released as
	// Ignored.
	Classifier func(req *http.Request, resp *http.Response, err error) core.Outcome
	// RecordBodyErrors moves the recording of a response that Classifier
	// calls a success from the arrival of its headers to the end of its
	// body: a read error other than io.EOF is classified again, with the
	// error, and io.EOF or Close is a success. The caller must then read
	// the body to the end or close it, as net/http asks anyway, or the
	// permit stays out: a half-open probe's slot is then only freed by the
	// half-open max wait. Zero: recorded at the headers, body unread.
	RecordBodyErrors bool
	// MaxBreakers bounds the number of breakers, so that a client sent to
	// ever new hosts (one that fetches URLs it is given) does not grow
	// without limit: at the bound, a new host's breaker replaces one not
	// used lately (an approximation of least recently used) that is
	// neither open nor forced open and has no request in flight (a
	// half-open one between probes may go, and its host starts over
	// closed); if every breaker is open or busy the request fails with
	// registry.ErrFull unsent (see registry.Options). An evicted host
	// starts over with a fresh window, so keep the bound above the number
	// of hosts in use. Zero: DefaultMaxBreakers. Negative (NoLimit): no
	// bound.
	MaxBreakers int
	// IdleAfter is how long a breaker that is not open may go unused
	// before the registry may evict it (see registry.Options.IdleAfter).
	// Zero: DefaultIdleAfter. Negative (NoLimit): never idle.
	IdleAfter time.Duration
	// MaxOpenPercent caps the share of the hosts' breakers that may be
	// open (or half-open, or forced open) at once, in percent, 1..100,
	// as Envoy's max_ejection_percent: past it a host's trip is refused
	// and its breaker stays closed (core.ReasonCapped), so that a fault of
	// the client's own (its network, its credentials), which fails every
	// host, cannot cut it off from all of them. At least one host may
	// always open. See registry.Options.MaxOpenPercent. Zero: no cap.
	// Outside 0..100: New's error.
	MaxOpenPercent int
	// Extension adds a part of its own to each host's breaker, such as
	// the fleet module's membership, so that replicas share the host's open
	// state and probe budget (see registry.Options.Extension). Zero: none.
	Extension registry.Extension
	// Now is the wall clock an HTTP-date Retry-After is measured against.
	// Zero: time.Now.
	Now func() time.Time
}

// The bounds of the registry when Options leaves them zero. 10,000
// breakers are more hosts than a service calls in the usual case, and
// take about 4 MB with no window, 15 MB with the default count window of
// 100 calls and up to 72 MB with a 60-second time window (measured on
// linux/amd64, registry entries included); a crawler that needs more
// sets its own bound. A breaker unused for 10 minutes has outlived any
// sensible time window, and its count window says little about the
// host's health now.
const (
	DefaultMaxBreakers = 10_000
	DefaultIdleAfter   = 10 * time.Minute
)

// NoLimit, as Options.MaxBreakers or Options.IdleAfter, turns that bound
// off: the registry then grows by one breaker per host for as long as the
// Transport lives.
const NoLimit = -1

// Transport is an http.RoundTripper with a circuit breaker per key. Make
// one with New; it is safe for concurrent use, as an http.RoundTripper
// must be.
type Transport struct {
	base       http.RoundTripper
	reg        *registry.Registry[string]
	key        func(*http.Request) string
	classify   func(*http.Request, *http.Response, error) core.Outcome
	now        func() time.Time
	bodyErrors bool
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport. It returns the registry's error for a bad
// template Config, and a *core.ConfigError for a Config.Classifier (both
// matching core.ErrInvalidConfig); it never panics.
func New(o Options) (*Transport, error) {
	if o.Config.Classifier != nil {
		return nil, &core.ConfigError{Field: "Classifier", Problem: "not used by httpbreaker, which classifies by Options.Classifier (request, response and error): set that instead"}
	}
	reg, err := registry.New(registry.Options[string]{Config: o.Config, MaxBreakers: bound(o.MaxBreakers, DefaultMaxBreakers),
		IdleAfter: bound(o.IdleAfter, DefaultIdleAfter), MaxOpenPercent: o.MaxOpenPercent, Extension: o.Extension})
	if err != nil {
		return nil, err
	}
	t := &Transport{base: o.Base, reg: reg, key: o.Key, classify: o.Classifier, now: o.Now, bodyErrors: o.RecordBodyErrors}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.key == nil {
		t.key = HostKey
	}
	if t.classify == nil {
		t.classify = DefaultClassifier
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t, nil
}

// bound is the registry's option for v: def for zero, 0 (no bound) for a
// negative v.
func bound[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return max(v, 0)
}

// DefaultClassifier is the default Options.Classifier: an error that matches
// context.Canceled, or any error of a request whose context was cancelled,
// is Ignored (the caller gave up, which says nothing about the server), and
// so is one that matches core.ErrIgnored (a local limit in the base
// transport refused the request: another breaker's rejection, a full
// registry, a full bulkhead); every other error is a Failure, timeouts (context.DeadlineExceeded)
// included; a response with status 429 or 500..599 is a Failure and any
// other response a Success; no response and no error (a base transport
// that breaks http.RoundTripper's contract) is a Failure.
func DefaultClassifier(req *http.Request, resp *http.Response, err error) core.Outcome {
	// If statements, not a switch: Go's coverage, and so mutation
	// testing, does not see the conditions of case clauses.
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, core.ErrIgnored) || errors.Is(req.Context().Err(), context.Canceled) {
			return core.Ignored
		}
		return core.Failure
	}
	if resp == nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && resp.StatusCode <= 599 {
		return core.Failure
	}
	return core.Success
}

// Registry returns the breakers, by key, for metrics and manual controls.
func (t *Transport) Registry() *registry.Registry[string] { return t.reg }

// RoundTrip sends req through its key's breaker. A request whose context
// is done already is not sent and takes no permit: it says nothing about
// the server. RoundTrip returns the context's error then (its cause, as
// net/http does). A request with no URL, or a URL with no host, is not
// sent and takes no permit either, and gets an error that says so. A
// refused request is not sent either, and the error is the breaker's
// rejection (see the package doc), or the registry's registry.ErrFull. A
// request not sent has its body, if any, closed, as http.RoundTripper
// requires. Otherwise RoundTrip returns what the base transport returns,
// after recording the outcome. A request whose context holds a permit of
// its key's breaker already (a resilience.Stack's breaker layer given the
// breaker from Registry: see core.HeldPermit) is sent under that permit
// without taking its own, and its classification, with the Retry-After
// hint of a failure, is reported to the holder, which records it; its
// body is not watched. A zero Transport, or a nil one, panics with a
// message that names New.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t == nil {
		panic("httpbreaker: RoundTrip on a nil *Transport: make one with httpbreaker.New and check its error")
	}
	if t.reg == nil {
		panic("httpbreaker: Transport used without New")
	}
	if ctx := req.Context(); ctx.Err() != nil {
		return unsent(req, context.Cause(ctx))
	}
	// A request with no server to send to is the caller's mistake, which
	// net/http's transport would refuse before dialling: not a verdict on
	// any server's breaker.
	if req.URL == nil {
		return unsent(req, errors.New("httpbreaker: request has no URL (nil Request.URL): not sent, no breaker asked"))
	}
	if req.URL.Host == "" {
		return unsent(req, fmt.Errorf("httpbreaker: request URL %q has no host: not sent, no breaker asked", req.URL.Redacted()))
	}
	b, err := t.reg.Get(t.key(req))
	if err != nil {
		return unsent(req, err)
	}
	if held := core.HeldPermitOf(req.Context(), b); held != nil {
		resp, err := t.base.RoundTrip(req)
		o := t.classify(req, resp, err)
		held.Report(o, t.hint(b, o, resp))
		return resp, err
	}
	p, err := b.Allow()
	if err != nil {
		return unsent(req, err)
	}
	return t.send(b, p, req)
}

// unsent closes the body of req, which is not sent, and returns err.
func unsent(req *http.Request, err error) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, err
}

// send makes the admitted call with permit p of b and records its outcome.
func (t *Transport) send(b *registry.Breaker, p core.Permit, req *http.Request) (resp *http.Response, err error) {
	recorded := false
	defer func() {
		if !recorded {
			// The base transport or the classifier panicked: release the
			// permit without judging the server, and let the panic go on.
			b.Record(p, core.Ignored)
		}
	}()
	resp, err = t.base.RoundTrip(req)
	o := t.classify(req, resp, err)
	recorded = true
	// A 101's body is the upgraded connection, which net/http hands back
	// as an io.ReadWriteCloser: recorded at the headers, and left
	// unwrapped so that it stays writable. A nil response with no error,
	// or a nil Body, breaks http.RoundTripper's contract; a custom
	// Classifier may still call the first a success, and http.Client mends
	// the second with an empty body, which a wrapper would hide from it.
	if err != nil || o != core.Success || !t.bodyErrors || resp == nil || resp.Body == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.record(b, p, o, resp)
		return resp, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, t: t, b: b, p: p, req: req, resp: resp}
	return resp, err
}

// record records o for p, with the response's Retry-After as the hint of a
// failure when the breaker honours hints.
func (t *Transport) record(b *registry.Breaker, p core.Permit, o core.Outcome, resp *http.Response) {
	if d := t.hint(b, o, resp); d > 0 {
		b.RecordHint(p, d) // bounded by MaxRetryAfter there
		return
	}
	b.Record(p, o)
}

// hint is the response's Retry-After if o is a failure and b honours
// hints, and 0 otherwise.
func (t *Transport) hint(b *registry.Breaker, o core.Outcome, resp *http.Response) time.Duration {
	if o == core.Failure && resp != nil && b.Settings().MaxRetryAfter > 0 {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), t.now()); ok {
			return d
		}
	}
	return 0
}

// CloseIdleConnections closes the base transport's idle connections, if
// it has a CloseIdleConnections method (http.Client.CloseIdleConnections
// calls this).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
