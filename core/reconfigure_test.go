package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// A listener may call Reconfigure, from any notification, that of a
// reconfiguration included: nothing waits on itself, and the notifications
// come in order, each reconfiguration after the transition that caused it.
func TestReconfigureFromListener(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		c := core.Config{ConsecutiveFailures: 3, OpenDuration: time.Second}
		var r *rig
		r = mk.build(t, c, func(tr core.Transition) {
			switch {
			case tr.From == core.Closed && tr.To == core.Open:
				next := c
				next.OpenDuration = 2 * time.Second // after a trip, back off more
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			case tr.Reason == core.ReasonReconfigured && strings.HasPrefix(tr.Changed, "OpenDuration,"):
				next := c
				next.OpenDuration, next.ConsecutiveFailures = 2*time.Second, 2
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			case tr.Reason == core.ReasonReconfigured && tr.Changed == "MaxRetryAfter":
				next := c
				next.OpenDuration, next.ConsecutiveFailures, next.MaxRetryAfter = 2*time.Second, 4, time.Minute
				require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
			}
		})
		for range 3 {
			r.B.Record(r.A(), core.Failure)
		}
		require.Equal(t, []string{"C>O@0", "O>O@0", "O>O@0"}, r.CBs())
		require.Equal(t, 2, r.B.(reconfigurer).Settings().ConsecutiveFailures)
		require.Equal(t, 2*time.Second, r.B.(reconfigurer).Settings().OpenDuration)

		// From outside a listener, whose notification the listener hears
		// on this goroutine, and reconfigures again from.
		next := c
		next.OpenDuration, next.ConsecutiveFailures, next.MaxRetryAfter = 2*time.Second, 2, time.Minute
		require.NoError(t, r.B.(reconfigurer).Reconfigure(next))
		require.Equal(t, []string{"C>O@0", "O>O@0", "O>O@0", "O>O@0", "O>O@0"}, r.CBs())
		require.Equal(t, 4, r.B.(reconfigurer).Settings().ConsecutiveFailures)
	})
}

// A listener that panics on a reconfiguration's notification must not
// cost the transition the reconfiguration's verdict committed: kept
// probe counts that close the breaker under the new rules still release
// its OpenGate slot and are notified, in order, and the notifications
// after them still come. (With the verdict's part run after the
// reconfiguration's delivery, the panic skipped it: the slot leaked, the
// half-open -> closed was never published, and every later notification
// waited behind it for good.)
func TestReconfigureListenerPanicKeepsTheVerdict(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		gate := &slots{capacity: 1}
		c := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3,
			SuccessesToClose: 3, MaxWaitInHalfOpen: core.WaitForever, OpenGate: gate}
		r := mk.build(t, c, func(tr core.Transition) {
			if tr.Reason == core.ReasonReconfigured {
				panic("listener")
			}
		})
		r.B.Record(r.A(), core.Failure)
		r.Clock.Advance(time.Second)
		p1, p2, p3 := r.A(), r.A(), r.A()
		r.B.Record(p1, core.Success)
		r.B.Record(p2, core.Success)
		requireHeld(t, gate, 1, "half-open")

		c.SuccessesToClose = 2
		require.PanicsWithValue(t, "listener", func() { _ = r.B.(reconfigurer).Reconfigure(c) })
		require.Equal(t, core.Closed, r.B.State(), "2 successes close under the new rule")
		requireHeld(t, gate, 0, "closed by the verdict")
		r.B.Record(p3, core.Success) // stale now
		require.NoError(t, r.B.ForceOpen(time.Second))
		require.Equal(t, []string{"C>O@0", "O>H@1", "H>H@1", "H>C@1", "C>O@1"}, r.CBs())
		requireHeld(t, gate, 1, "forced open")
	})
}
