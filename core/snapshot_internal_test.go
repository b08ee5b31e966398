package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/window/atomicring"
)

// A snapshot is a state the breaker was in: an outcome that closed the
// count window has decided a trip that its recorder may not have committed
// yet, and Snapshot commits it (as Counts does) rather than show a closed
// breaker whose window trips the rule. The window is closed here by the
// ring alone, as a recorder paused between its claim and its trip leaves
// it.
func TestSnapshot_FinishesADecidedTrip(t *testing.T) {
	for _, withWindow := range []bool{false, true} {
		b, err := New(Config{FailureCountThreshold: 2, WindowSize: 4, OpenDuration: time.Second, Clock: NewManualClock(0)})
		require.NoError(t, err)
		b.ring.RecordTrip(0, true, false, &b.cfg.rule)
		_, v := b.ring.RecordTrip(0, true, false, &b.cfg.rule)
		require.Equal(t, atomicring.Tripped, v)
		require.Equal(t, Closed, b.peek().state(), "the trip is decided, not committed")
		wall := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
		s, err := b.Snapshot(wall, withWindow)
		require.NoError(t, err)
		require.True(t, Snapshot{Fingerprint: b.cfg.Fingerprint(), State: Open, Taken: wall, OpenUntil: wall.Add(time.Second)}.Equal(s),
			"with window %v: %+v", withWindow, s)
	}
}
