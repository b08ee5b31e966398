package core

import (
	"errors"
	"math"
	"testing"
	"time"
)

// ConsecutiveFailures >= 2^36 used to validate although the lock-free run of
// failures saturates at 2^36-1 and could never reach it (R3: nothing clamped
// silently). It is rejected now; if it ever validates again, the breaker must
// still trip.
func TestAdvInternal_ConsecutiveFailuresAboveSaturationValidates(t *testing.T) {
	limit := MaxConsecutiveFailures // a variable: on 32-bit, int(constant) would not compile
	threshold := limit + 1
	if threshold > math.MaxInt {
		t.Skip("an int cannot hold 2^36 on this platform, so no Config can ask for it")
	}
	_, err := New(Config{ConsecutiveFailures: int(threshold), OpenDuration: time.Second, Clock: NewManualClock(0)})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "ConsecutiveFailures" {
		t.Fatalf("ConsecutiveFailures %d: want a ConfigError naming the field, got %v", threshold, err)
	}
	// At the limit the run still reaches the threshold.
	b, err := New(Config{ConsecutiveFailures: int(limit), OpenDuration: time.Second, Clock: NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	b.state.Store(pack(word{state: Closed, payload: maxConsec - 1}))
	p, _ := b.Allow()
	b.Record(p, Failure)
	if s := b.State(); s != Open {
		t.Fatalf("after %d consecutive failures: state %v", limit, s)
	}
}
