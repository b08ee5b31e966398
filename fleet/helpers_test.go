package fleet

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/casbreaker/casbreaker/core"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	goleak.VerifyTestMain(m)
}

// openDuration is every test breaker's open duration, on its manual clock.
const openDuration = 10 * time.Second

// errDown is the failing dependency's error.
var errDown = errors.New("dependency down")

// testConfig is a breaker that trips on three failures in a row, with a
// manual clock.
func testConfig(clock core.Clock) core.Config {
	return core.Config{
		Name:                "dep",
		ConsecutiveFailures: 3,
		OpenDuration:        openDuration,
		Clock:               clock,
	}
}

// store is where a test's fleet keeps its shared state: one
// redis-server (redisServer) or a Redis Cluster (redisCluster).
type store interface {
	// connect returns a new client of the store, closed at the test's
	// end, with the context deadlines a member needs.
	connect(t testing.TB) redis.UniversalClient
	// subscriptions returns a function that counts the subscriptions to
	// a channel on the store's servers (0 where they do not answer),
	// through clients closed at the test's end.
	subscriptions(t testing.TB) func(channel string) int64
}

// fleet is n members of one fleet on srv, each with its own client and
// manual clock, closed at the test's end.
type fleet struct {
	t       *testing.T
	srv     store
	members []*Member
	clocks  []*core.ManualClock
}

// newFleet makes n members with the options opts returns (Client and Key
// filled in when unset).
func newFleet(t *testing.T, srv store, n int, opts func(i int) Options) *fleet {
	t.Helper()
	f := &fleet{t: t, srv: srv}
	for i := range n {
		o := opts(i)
		if o.Client == nil {
			o.Client = srv.connect(t)
		}
		if o.Key == "" {
			o.Key = t.Name()
		}
		if o.StoreTimeout == 0 {
			// Generous, so that a store call slowed by a loaded machine
			// (the race detector, other tests) does not make a member
			// local in a test that is not about outages.
			o.StoreTimeout = 5 * time.Second
		}
		clock := core.NewManualClock(time.Hour)
		m, err := New(testConfig(clock), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		f.members = append(f.members, m)
		f.clocks = append(f.clocks, clock)
	}
	f.waitSubscribed()
	return f
}

// waitSubscribed waits until every member's channel subscription is on
// the server, so that no publish can miss one.
func (f *fleet) waitSubscribed() {
	f.t.Helper()
	count := f.srv.subscriptions(f.t)
	ch := f.members[0].channel
	eventually(f.t, "every member subscribed", func() bool {
		return count(ch) >= int64(len(f.members))
	})
}

// advance moves every member's clock by d.
func (f *fleet) advance(d time.Duration) {
	for _, c := range f.clocks {
		c.Advance(d)
	}
}

// trip fails calls on member i until its breaker opens.
func (f *fleet) trip(i int) {
	f.t.Helper()
	m := f.members[i]
	for range 3 {
		p, err := m.Allow()
		if err != nil {
			f.t.Fatalf("member %d: %v before it tripped", i, err)
		}
		m.Done(p, errDown)
	}
	if s := m.State(); s != core.Open {
		f.t.Fatalf("member %d is %v after three failures, want open", i, s)
	}
}

// waitVersion waits until every member adopted version v or a later one.
func (f *fleet) waitVersion(v uint64) {
	f.t.Helper()
	eventually(f.t, "every member to adopt the shared state's version", func() bool {
		for _, m := range f.members {
			if m.Stats().Version < v {
				return false
			}
		}
		return true
	})
}

// call makes one call of member m to the failing dependency and reports
// whether it was admitted (reached the dependency).
func call(m *Member) bool {
	p, err := m.Allow()
	if err != nil {
		return false
	}
	m.Done(p, errDown)
	return true
}

// eventually polls cond on loopback until it holds, for at most 10 s: it
// waits for the members' background loops and the server, never to move
// a breaker's time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
