package prombreaker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/prombreaker"
	"github.com/casbreaker/casbreaker/registry"
	"github.com/casbreaker/casbreaker/resilience"
)

// Putting it together: a service whose HTTP client has a breaker per host
// (httpbreaker), calls one host through the retry stack with that same
// breaker as the stack's breaker layer, so each call takes one permit, not
// two; keeps breakers of its own by tenant in a second registry; and
// serves every breaker of both registries on /metrics through one
// Collector. The payments host is down (503). A manual clock and a
// stepping timer let the retries' backoff pass in no time; a service
// leaves Clock and Timer unset.
func Example_service() {
	clock := core.NewManualClock(0)
	timer := resilience.NewSteppingTimer(clock)
	var transitions observe.Transitions // one listener for both registries

	payments := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer payments.Close()
	hostNames := map[string]string{strings.TrimPrefix(payments.URL, "http://"): "payments"}

	transport, err := httpbreaker.New(httpbreaker.Options{
		Config: core.Config{
			Name:                "http",
			ConsecutiveFailures: 2,
			OpenDuration:        30 * time.Second,
			CollectMetrics:      true,
			OnStateChange:       transitions.Listener(nil),
			Clock:               clock,
		},
		// The breaker of a request, and its name: here the dependency's
		// name for the test server's address; by default the host.
		Key: func(r *http.Request) string { return hostNames[httpbreaker.HostKey(r)] },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: transport}
	defer client.CloseIdleConnections()

	tenants, err := registry.New(registry.Options[string]{
		Config: core.Config{
			Name:                "tenant",
			ConsecutiveFailures: 5,
			CollectMetrics:      true,
			OnStateChange:       transitions.Listener(nil),
			Clock:               clock,
		},
		MaxBreakers: 10000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The retry stack around the payments host's own breaker: the
	// transport finds the stack's permit in the request's context and
	// takes none of its own.
	paymentsBreaker, err := transport.Registry().Get("payments")
	if err != nil {
		fmt.Println(err)
		return
	}
	budget, _ := resilience.NewBudget(resilience.BudgetConfig{Percent: 10, Clock: clock})
	retry, _ := resilience.NewRetry(resilience.RetryConfig{MaxAttempts: 4, Budget: budget, Timer: timer, Seed: 1})
	bulkhead, _ := resilience.NewBulkhead(resilience.BulkheadConfig{MaxConcurrent: 16})
	limiter, _ := resilience.NewTimeLimiter(resilience.TimeLimiterConfig{Timeout: 2 * time.Second, Timer: timer})
	stack, err := resilience.DefaultStack(retry, paymentsBreaker, bulkhead, limiter)
	if err != nil {
		fmt.Println(err)
		return
	}
	charge := func(ctx context.Context) (int, error) {
		// The request carries the context Do passes: the stack's permit
		// and the time limiter's deadline.
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, payments.URL+"/charge", nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 500 {
			return resp.StatusCode, fmt.Errorf("payments: %s", resp.Status) // retried
		}
		return resp.StatusCode, nil
	}

	// One Collector over both registries.
	httpSource, _ := observe.Registry(transport.Registry())
	tenantSource, _ := observe.Registry(tenants)
	both, err := observe.Join(httpSource, tenantSource)
	if err != nil {
		fmt.Println(err)
		return
	}
	collector, err := prombreaker.New(both, prombreaker.Options{Transitions: &transitions})
	if err != nil {
		fmt.Println(err)
		return
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collector)
	srv := httptest.NewServer(promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	defer srv.Close()

	// A request for tenant acme: its tenant breaker around the charge.
	acme, err := tenants.Get("acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	status, err := core.Do(context.Background(), acme, func(ctx context.Context) (int, error) {
		return resilience.Do(ctx, stack, charge)
	})
	// Two attempts failed and tripped the payments breaker; the third was
	// refused by it, which ends the retries. The tenant's breaker counts
	// that refusal as neutral (ignored): the tenant did nothing wrong.
	// Each attempt took one permit of the payments breaker (2 permitted,
	// 2 failed), the stack's, not a second one in the transport.
	fmt.Printf("status %d, open: %v, retry in %v\n", status, errors.Is(err, core.ErrOpen), core.RetryAfterOf(err).Round(time.Second))

	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if line := sc.Text(); strings.HasPrefix(line, "casbreaker_") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// status 0, open: true, retry in 30s
	// casbreaker_calls_total{breaker="http/payments",kind="failed"} 2
	// casbreaker_calls_total{breaker="tenant/acme",kind="ignored"} 1
	// casbreaker_not_permitted_calls_total{breaker="http/payments",reason="open"} 1
	// casbreaker_permitted_calls_total{breaker="http/payments"} 2
	// casbreaker_permitted_calls_total{breaker="tenant/acme"} 1
	// casbreaker_state{breaker="http/payments",state="open"} 1
	// casbreaker_state{breaker="tenant/acme",state="closed"} 1
	// casbreaker_transitions_total{breaker="http/payments",from="closed",reason="consecutive_failures",to="open"} 1
}
