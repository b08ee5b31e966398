package core

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Once a backlog deeper than the ring has been delivered, the dispatcher
// holds no map of parked events: a storm's memory does not stay with the
// breaker for the rest of its life. The first event's listener blocks while
// this goroutine commits 299 more Resets, most of which overflow the ring.
func TestDispatcherDropsParkedMapOnceCaughtUp(t *testing.T) {
	const n = 300
	first, release, last := make(chan struct{}), make(chan struct{}), make(chan struct{})
	b, err := New(Config{ConsecutiveFailures: 1, OnStateChange: func(tr Transition) {
		switch tr.Generation {
		case 1:
			close(first)
			<-release // fall behind
		case n:
			close(last)
		}
	}})
	require.NoError(t, err)
	go b.Reset() // delivers generation 1, then blocks in the listener
	<-first
	for range n - 1 {
		b.Reset()
	}
	close(release)
	<-last
	require.Nil(t, b.dispatch.parked)
}
