package core_test

// Do releases its permit however fn ends.

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// runtime.Goexit inside fn (t.FailNow in a test helper, for example): Do's
// deferred Record runs and records a Failure, like a panic; both
// implementations agree and no probe slot leaks.
func TestDoGoexitReleasesProbe(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second})
		r.X(core.Failure)
		r.At(1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = core.Do(context.Background(), r.B, func(context.Context) (int, error) {
				runtime.Goexit()
				return 0, nil
			})
		}()
		<-done
		t.Logf("after Goexit in a probe: %v %v", r.B.State(), r.CBs())
		require.Equal(t, core.Open, r.B.State()) // recorded as a failure
	})
}
