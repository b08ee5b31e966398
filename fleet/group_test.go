package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// TestGroup: two replicas, each a Group over the keys "a" and "b": the
// trips of key a on both open key a on both, and key b stays closed.
func TestGroup(t *testing.T) {
	srv := startRedis(t)
	var groups []*Group
	var clocks []*core.ManualClock
	for range 2 {
		clock := core.NewManualClock(time.Hour)
		g, err := NewGroup(testConfig(clock), Options{Client: srv.client(t), Key: t.Name(), Quorum: 2, StoreTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		groups, clocks = append(groups, g), append(clocks, clock)
	}
	members := func(key string) *fleet {
		f := &fleet{t: t, srv: srv, clocks: clocks}
		for _, g := range groups {
			m, err := g.Get(key)
			if err != nil {
				t.Fatal(err)
			}
			f.members = append(f.members, m)
		}
		f.waitSubscribed()
		return f
	}
	a, b := members("a"), members("b")
	if again, _ := groups[0].Get("a"); again != a.members[0] {
		t.Fatal("a second Get of a key made another member")
	}
	if name := a.members[0].Settings().Name; name != "dep/a" {
		t.Fatalf("key a's breaker is named %q, want dep/a", name)
	}
	a.trip(0)
	a.trip(1)
	a.waitVersion(1)
	for i := range 2 {
		if a.members[i].State() != core.Open || b.members[i].State() != core.Closed {
			t.Fatalf("replica %d: key a %v, key b %v; want open and closed", i, a.members[i].State(), b.members[i].State())
		}
	}
	// The group's Source yields both of its members, each with its
	// breaker's and its fleet's series.
	r, err := observe.NewReader(groups[0].Source(), nil)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]observe.Sample{}
	if err := r.Read(func(s observe.Sample) { read[s.Name] = s }); err != nil {
		t.Fatal(err)
	}
	if len(read) != 2 || read["dep/a"].State != core.Open || !read["dep/a"].Fleet || read["dep/a"].FleetStats.AdoptedOpen != 1 ||
		read["dep/b"].State != core.Closed || !read["dep/b"].Fleet {
		t.Fatalf("the group's Source read %+v; want dep/a open with an adopted open state and dep/b closed, both fleet members", read)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = groups[0].Get("a") }); a != 0 {
		t.Fatalf("Get of a made key allocates %v times, want 0", a)
	}
	if _, err := groups[0].Get("c{"); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Get of a key with a brace: %v, want ErrInvalidOptions", err)
	}
	groups[0].Close()
	if _, err := groups[0].Get("d"); !errors.Is(err, ErrGroupClosed) {
		t.Fatalf("Get of a new key after Close: %v, want ErrGroupClosed", err)
	}
	if _, err := NewGroup(core.Config{ConsecutiveFailures: 1}, Options{Key: "x"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("NewGroup without a client: %v, want ErrInvalidOptions", err)
	}
}
