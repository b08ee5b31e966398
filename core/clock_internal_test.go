package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The breaker reads a SystemClock, the default, by a direct call and any
// other clock through the interface; either way it must read the clock it
// was given, base included.
func TestBreakerReadsTheClockItWasGiven(t *testing.T) {
	own := NewSystemClock()
	for _, c := range []Clock{nil, SystemClock{}, own} {
		b, err := New(Config{Clock: c, ConsecutiveFailures: 5})
		require.NoError(t, err)
		require.True(t, b.sysClock, "%T %v is read directly", c, c)
		sc := b.cfg.Clock.(SystemClock)
		before := sc.Now()
		got := b.now()
		require.LessOrEqual(t, before, got)
		require.LessOrEqual(t, got, sc.Now())
	}
	m := NewManualClock(5 * time.Second)
	b, err := New(Config{Clock: m, ConsecutiveFailures: 5})
	require.NoError(t, err)
	require.False(t, b.sysClock)
	require.Equal(t, 5*time.Second, b.now())
}
