package fleet

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
)

// TestOptionsRejected: every bad option is refused by New with an error
// matching ErrInvalidOptions that names it, and New makes no member.
func TestOptionsRejected(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { good.Close() })
	noDeadline := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { noDeadline.Close() })
	cfg := core.Config{ConsecutiveFailures: 1}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no client", Options{Key: "k"}, "Client is nil"},
		{"client without context deadlines", Options{Client: noDeadline, Key: "k"}, "ContextTimeoutEnabled"},
		{"no key", Options{Client: good}, "Key"},
		{"key with a brace", Options{Client: good, Key: "a{b"}, "Key"},
		{"key not UTF-8", Options{Client: good, Key: "\xff"}, "Key"},
		{"negative quorum", Options{Client: good, Key: "k", Quorum: -1}, "Quorum -1"},
		{"quorum too large", Options{Client: good, Key: "k", Quorum: 1001}, "Quorum 1001"},
		{"probes too many", Options{Client: good, Key: "k", Probes: 128}, "Probes 128"},
		{"negative probes", Options{Client: good, Key: "k", Probes: -1}, "Probes -1"},
		{"lease ttl below a millisecond", Options{Client: good, Key: "k", LeaseTTL: time.Microsecond}, "LeaseTTL"},
		{"negative store timeout", Options{Client: good, Key: "k", StoreTimeout: -time.Second}, "StoreTimeout"},
		{"negative poll interval", Options{Client: good, Key: "k", PollInterval: -1}, "PollInterval"},
		{"backoff bounds crossed", Options{Client: good, Key: "k", MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MinBackoff 1s is above MaxBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(cfg, tc.o)
			if m != nil || !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an ErrInvalidOptions naming %q", m, err, tc.want)
			}
		})
	}
	// The breaker's own configuration errors come through as core's.
	if _, err := New(core.Config{}, Options{Client: good, Key: "k"}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New with a Config that has no trip rule: %v, want core.ErrInvalidConfig", err)
	}
}

// TestZeroMember: the fleet's own methods of a zero or nil Member panic
// with a message naming New, and a zero or nil Group's one naming NewGroup.
func TestZeroMember(t *testing.T) {
	for name, f := range map[string]func(){
		"Close of a zero Member":      func() { (&Member{}).Close() },
		"Close of a nil Member":       func() { (*Member)(nil).Close() },
		"Stats of a nil Member":       func() { (*Member)(nil).Stats() },
		"FleetStats of a zero Member": func() { (&Member{}).FleetStats() },
		"Source of a nil Group":       func() { (*Group)(nil).Source() },
		"Get of a zero Group":         func() { _, _ = (&Group{}).Get("k") },
		"Name of a zero Member":       func() { (&Member{}).Name() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "fleet.New") {
					t.Errorf("%s: panic %v, want one naming fleet.New", name, r)
				}
			}()
			f()
		}()
	}
	// The breaker's own methods, which a Member has by embedding, panic
	// on a zero Member too (a nil dereference: naming New there would cost
	// every call a check).
	for name, f := range map[string]func(){
		"Allow of a zero Member": func() { _, _ = (&Member{}).Allow() },
		"Done of a zero Member":  func() { (&Member{}).Done(core.Permit{}, nil) },
		"State of a zero Member": func() { (&Member{}).State() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
