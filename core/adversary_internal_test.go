package core

import (
	"testing"
	"time"
)

// ConsecutiveFailures >= 2^36 used to validate although the lock-free run of
// failures saturates at 2^36-1 and could never reach it (R3: nothing clamped
// silently). It is rejected now; if it ever validates again, the breaker must
// still trip.
func TestAdvInternal_ConsecutiveFailuresAboveSaturationValidates(t *testing.T) {
	threshold := 1 << 36 // 2^36 failures in a row
	b, err := New(Config{ConsecutiveFailures: threshold, OpenDuration: time.Second, Clock: NewManualClock(0)})
	if err != nil {
		t.Logf("rejected (good): %v", err)
		return
	}
	// Fast-forward the run to 2^36-2 failures instead of recording them.
	b.state.Store(pack(word{state: Closed, payload: maxConsec - 1}))
	for i := 0; i < 4; i++ { // failures number 2^36-1 .. 2^36+2
		p, _ := b.Allow()
		b.Record(p, Failure)
	}
	if s := b.State(); s != Open {
		t.Fatalf("after %d+ consecutive failures with ConsecutiveFailures=%d: state %v, run %d",
			threshold, threshold, s, b.Counts().ConsecutiveFailures)
	}
}
