package httpbreaker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
	"github.com/casbreaker/casbreaker/slogbreaker"
)

// A client with a breaker per host: a server that answers 429 with
// Retry-After opens its host's breaker for as long as it asks (capped by
// MaxRetryAfter), and the next request is refused without being sent,
// with an error that says when to try again.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)) // transitions go to stderr

	tr, err := httpbreaker.New(httpbreaker.Options{
		Config: core.Config{
			Name:                 "api",
			WindowSize:           20,
			FailureRateThreshold: 50,
			MinimumNumberOfCalls: 10,
			OpenDuration:         5 * time.Second,
			MaxRetryAfter:        time.Minute, // honour Retry-After, up to a minute
			OnStateChange:        slogbreaker.Listener(logger, slogbreaker.Options{}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL) // 429, Retry-After: 30: the host's breaker opens for 30 s
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	_, err = client.Get(srv.URL)
	fmt.Println(errors.Is(err, core.ErrOpen))
	fmt.Println(core.RetryAfterOf(err).Round(time.Second)) // a worker sleeps this long
	// Output:
	// 429
	// true
	// 30s
}
