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
