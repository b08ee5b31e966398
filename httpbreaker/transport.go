// Package httpbreaker puts circuit breakers in front of an HTTP client: a
// Transport (an http.RoundTripper) that wraps a base transport with one
// breaker per host, or per any key of the request, from a registry made
// from one template core.Config.
//
// A request whose breaker refuses is not sent: RoundTrip returns the
// rejection, which an http.Client wraps in a *url.Error; errors.Is(err,
// core.ErrOpen) and the other reasons see through it, and
// core.RetryAfterOf(err) says when to try again. Every other request is
// sent, and its outcome is recorded when the response headers arrive (or,
// with Options.RecordBodyErrors, when the body has been read): by default
// 5xx and 429 responses and transport errors are failures, other responses
// successes, and a request whose context was cancelled is neutral. With
// Config.MaxRetryAfter set, a failure response's Retry-After header, in
// either form (seconds or an HTTP date), keeps the host's breaker open at
// least that long, capped at MaxRetryAfter.
package httpbreaker

import (
	"context"
	"errors"
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
	// Set MaxRetryAfter to honour Retry-After headers.
	Config core.Config
	// Key picks the breaker of a request. Zero: the request's URL.Host
	// (host and port as written in the URL).
	Key func(*http.Request) string
	// Classify maps what a request ended with to an outcome: the response
	// (nil on a transport error) and the error (nil with a response, or
	// the body's read error with RecordBodyErrors). Zero: DefaultClassify.
	// A panic in it propagates; the request's permit is then released as
	// Ignored.
	Classify func(req *http.Request, resp *http.Response, err error) core.Outcome
	// RecordBodyErrors moves the recording of a response that Classify
	// calls a success from the arrival of its headers to the end of its
	// body: a read error other than io.EOF is classified again, with the
	// error, and io.EOF or Close is a success. The caller must then read
	// the body to the end or close it, as net/http asks anyway, or the
	// permit stays out: a half-open probe's slot is then only freed by the
	// half-open max wait. Zero: recorded at the headers, body unread.
	RecordBodyErrors bool
	// MaxBreakers and IdleAfter bound the registry of breakers; an evicted
	// host starts over with a fresh window, so keep the bound above the
	// number of hosts in use (see registry.Options). Zero: no bound, no
	// idle eviction.
	MaxBreakers int
	IdleAfter   time.Duration
	// Now is the wall clock an HTTP-date Retry-After is measured against.
	// Zero: time.Now.
	Now func() time.Time
}

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

// New returns a Transport. It returns the registry's errors for a bad
// template Config (matching core.ErrInvalidConfig) or bad bounds (matching
// registry.ErrInvalidOptions), and never panics.
func New(o Options) (*Transport, error) {
	reg, err := registry.New(registry.Options[string]{Config: o.Config, MaxBreakers: o.MaxBreakers, IdleAfter: o.IdleAfter})
	if err != nil {
		return nil, err
	}
	t := &Transport{base: o.Base, reg: reg, key: o.Key, classify: o.Classify, now: o.Now, bodyErrors: o.RecordBodyErrors}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.key == nil {
		t.key = func(r *http.Request) string { return r.URL.Host }
	}
	if t.classify == nil {
		t.classify = DefaultClassify
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t, nil
}

// DefaultClassify is the default Options.Classify: an error that matches
// context.Canceled, or any error of a request whose context was cancelled,
// is Ignored (the caller gave up, which says nothing about the server);
// every other error is a Failure, timeouts (context.DeadlineExceeded)
// included; a response with status 429 or 500..599 is a Failure and any
// other response a Success; no response and no error (a base transport
// that breaks http.RoundTripper's contract) is a Failure.
func DefaultClassify(req *http.Request, resp *http.Response, err error) core.Outcome {
	switch {
	case err != nil:
		if errors.Is(err, context.Canceled) || errors.Is(req.Context().Err(), context.Canceled) {
			return core.Ignored
		}
		return core.Failure
	case resp == nil: // a base transport that broke RoundTripper's contract
		return core.Failure
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && resp.StatusCode <= 599:
		return core.Failure
	}
	return core.Success
}

// Registry returns the breakers, by key, for metrics and manual controls.
func (t *Transport) Registry() *registry.Registry[string] { return t.reg }

// RoundTrip sends req through its key's breaker. A refused request is not
// sent: its body, if any, is closed, as http.RoundTripper requires, and
// the error is the breaker's rejection (see the package doc). Otherwise it
// returns what the base transport returns, after recording the outcome. A
// full registry (registry.ErrFull) is returned as the error too. A request
// whose context holds a permit of its key's breaker already (a
// resilience.Stack's breaker layer given the breaker from Registry: see
// core.HeldPermit) is sent under that permit without taking its own, and
// its classification, with the Retry-After hint of a failure, is reported
// to the holder, which records it; its body is not watched.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.reg == nil {
		panic("httpbreaker: Transport used without New")
	}
	b, err := t.reg.Get(t.key(req))
	if err == nil {
		if held := core.HeldPermitOf(req.Context(), b.Breaker); held != nil {
			resp, err := t.base.RoundTrip(req)
			o := t.classify(req, resp, err)
			held.Report(o, t.hint(b, o, resp))
			return resp, err
		}
		var p core.Permit
		if p, err = b.Allow(); err == nil {
			return t.send(b, p, req)
		}
	}
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
	switch {
	case err != nil || o != core.Success || !t.bodyErrors || resp.StatusCode == http.StatusSwitchingProtocols:
		// A 101's body is the upgraded connection, which net/http hands
		// back as an io.ReadWriteCloser: recorded at the headers, and
		// left unwrapped so that it stays writable.
		t.record(b, p, o, resp)
	default:
		resp.Body = &watchedBody{ReadCloser: resp.Body, t: t, b: b, p: p, req: req, resp: resp}
	}
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
