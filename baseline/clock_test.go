package baseline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// The mutex breaker reads a SystemClock (the default, the zero one, one
// with its own base) by a direct call and any other clock through the
// interface; either way it reads the clock it was given.
func TestReadsTheClockItWasGiven(t *testing.T) {
	for _, c := range []core.Clock{nil, core.SystemClock{}, core.NewSystemClock()} {
		b, err := New(core.Config{Clock: c, ConsecutiveFailures: 5})
		require.NoError(t, err)
		require.True(t, b.sysClock, "%T %v is read directly", c, c)
		before := b.cfg.Clock.Now()
		got := b.read()
		require.LessOrEqual(t, before, got)
		require.LessOrEqual(t, got, b.cfg.Clock.Now())
	}
	b, err := New(core.Config{Clock: core.NewManualClock(5 * time.Second), ConsecutiveFailures: 5})
	require.NoError(t, err)
	require.False(t, b.sysClock)
	require.Equal(t, 5*time.Second, b.read())
}
