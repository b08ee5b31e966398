package fleet

import (
	"testing"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// TestObserve: a member is an observe.Breaker, so the exporters read its
// breaker's series; the state they read follows the fleet's adoption.
func TestObserve(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, srv, 2, func(int) Options { return Options{Quorum: 2} })
	r, err := observe.NewReader(mustBreakers(t, f.members[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.trip(0)
	f.trip(1)
	f.waitVersion(1)
	open := false
	if err := r.Read(func(s observe.Sample) { open = s.State == core.Open }); err != nil {
		t.Fatal(err)
	}
	if !open {
		t.Fatal("the reader did not see the member open")
	}
}

func mustBreakers(t *testing.T, bs ...observe.Breaker) observe.Source {
	t.Helper()
	src, err := observe.Breakers(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
