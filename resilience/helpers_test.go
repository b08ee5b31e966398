package resilience_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/resilience"
)

var errDown = errors.New("dependency down")

// dep is a scripted dependency: it counts its calls and returns the error
// of fail (nil: success) for each.
type dep struct {
	calls int
	fail  func(call int) error
}

func (d *dep) call(context.Context) (int, error) {
	d.calls++
	if d.fail != nil {
		if err := d.fail(d.calls); err != nil {
			return 0, err
		}
	}
	return d.calls, nil
}

func always(err error) func(int) error { return func(int) error { return err } }

// failFirst fails the first n calls with errDown.
func failFirst(n int) func(int) error {
	return func(call int) error {
		if call <= n {
			return errDown
		}
		return nil
	}
}

// must takes a constructor's results and returns a function that fails t
// if the error is not nil and returns the value otherwise:
// must(resilience.NewRetry(c))(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

func mustStack(t testing.TB, layers ...resilience.Layer) *resilience.Stack {
	t.Helper()
	s, err := resilience.NewStack(layers...)
	require.NoError(t, err)
	return s
}

// forEachImpl runs fn once per breaker implementation (the lock-free core
// and the mutex baseline); newBreaker builds one from a Config.
func forEachImpl(t *testing.T, fn func(t *testing.T, newBreaker func(core.Config) breakers.Breaker)) {
	t.Helper()
	for _, im := range breakers.All {
		t.Run("impl="+im.Name, func(t *testing.T) {
			fn(t, func(c core.Config) breakers.Breaker {
				b, err := im.New(c)
				require.NoError(t, err)
				return b
			})
		})
	}
}

// tripConfig trips after two failures in a row and stays open for a second.
func tripConfig(clock core.Clock) core.Config {
	return core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, Clock: clock}
}

// storm starts n goroutines running fn at once and waits for them all.
func storm(n int, fn func()) {
	var start, wg sync.WaitGroup
	start.Add(1)
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			start.Wait()
			fn()
		}()
	}
	start.Done()
	wg.Wait()
}

// done reports whether ch is closed or holds a value.
func done[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
