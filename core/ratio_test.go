package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// Half-open judged by a ratio: four probes may be in flight, three
// successes close, the second failure re-opens. Half-open admits no more
// probes than outcomes can still count (3 + 2 - 1 = 4), a tolerated
// failure returns its slot without a transition, and the verdict comes at
// whichever count is reached first.
func TestHalfOpenByRatio(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 4,
		SuccessesToClose: 3, FailuresToReopen: 2, MaxRetryAfter: time.Minute}
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("closes after three successes and a failure tolerated", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.X(F)
			r.At(1)
			p := []core.Permit{r.A(), r.A(), r.A(), r.A()}
			r.Reject(core.ErrHalfOpenFull)
			r.D(p[0], F)
			r.Is(core.HalfOpen)
			c := r.B.Counts()
			require.Equal(t, [3]int{3, 0, 1}, [3]int{c.ProbesInFlight, c.ProbeSuccesses, c.ProbeFailures})
			// The slot came back, but 3 in flight + 1 failure is every
			// outcome that can still count: no fifth probe.
			r.Reject(core.ErrHalfOpenFull)
			r.D(p[1], S)
			r.D(p[2], S)
			r.Is(core.HalfOpen)
			r.D(p[3], S)
			r.Is(core.Closed)
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>C@1"}, r.CBs())
		})
		t.Run("re-opens at the second failure", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.X(F)
			r.At(1)
			p := []core.Permit{r.A(), r.A(), r.A()}
			r.D(p[0], S)
			r.D(p[1], F)
			r.Is(core.HalfOpen)
			// One success and one failure counted, one in flight: one more
			// probe may go (3 + 2 - 1 = 4 outcomes at most).
			p = append(p, r.A())
			r.Reject(core.ErrHalfOpenFull)
			r.D(p[2], F)
			r.Is(core.Open)
			r.D(p[3], S) // stale: the generation re-opened
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@0", "O>H@1", "H>O@1"}, r.CBs())
		})
		t.Run("a failure with a retry-after hint re-opens at once", func(t *testing.T) {
			r := mk.build(t, cfg)
			r.X(F)
			r.At(1)
			p := r.A()
			r.B.RecordHint(p, 10*time.Second)
			r.Is(core.Open)
			ftWait(r, 10*time.Second)
		})
	})
}
