package core

import (
	"errors"
	"testing"
	"time"
)

// ConsecutiveFailures above the word's saturation point would be a
// threshold the lock-free run of failures could never reach (R3: nothing
// clamped silently). New rejects it with a ConfigError naming the field; at
// the limit the breaker must still trip.
func TestConsecutiveFailuresAboveSaturationRejected(t *testing.T) {
	limit := MaxConsecutiveFailures
	_, err := New(Config{ConsecutiveFailures: limit + 1, OpenDuration: time.Second, Clock: NewManualClock(0)})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "ConsecutiveFailures" {
		t.Fatalf("ConsecutiveFailures %d: want a ConfigError naming the field, got %v", limit+1, err)
	}
	// At the limit the run still reaches the threshold.
	b, err := New(Config{ConsecutiveFailures: limit, OpenDuration: time.Second, Clock: NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	b.state.Store(pack(word{state: Closed, consec: maxConsec - 1}))
	p, _ := b.Allow()
	b.Record(p, Failure)
	if s := b.State(); s != Open {
		t.Fatalf("after %d consecutive failures: state %v", limit, s)
	}
}
