package fleet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
)

// redisCluster is a Redis Cluster the test started on loopback: three
// redis-server masters, no replicas, each serving one range of
// clusterSlots. The test's cleanup kills them and removes their cluster
// configuration files.
type redisCluster struct {
	nodes []*redisServer
}

// clusterSlots is each node's slot range, first and last: the 16384 slots
// split in three.
var clusterSlots = [...][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}

// startRedisCluster starts the nodes, gives each its config epoch and its
// slots (what redis-cli --cluster create does, so that no epoch collision
// is left to resolve and each node's slots spread with its handshake),
// joins them with CLUSTER MEET and waits until every node reports
// cluster_state:ok, which each master does no sooner than 2 s after its
// start.
func startRedisCluster(t *testing.T) *redisCluster {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	c := &redisCluster{}
	var admins []*redis.Client
	for i, slots := range clusterSlots {
		n := startRedisNode(t, dir)
		c.nodes = append(c.nodes, n)
		a := n.client(t)
		admins = append(admins, a)
		if err := a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("CLUSTER SET-CONFIG-EPOCH on node %d: %v", i, err)
		}
		if err := a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", slots[0], slots[1]).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d on node %d: %v", slots[0], slots[1], i, err)
		}
	}
	// Every pair meets, so that no node waits to hear of another through
	// a third's gossip, whose pings go to peers picked at random about
	// once a second: with node 0 meeting the other two alone, the nodes
	// reported ok 1.9 to 4.9 s after meeting in 20 runs under -race (and
	// one test of 20 others took 10.5 s, its cluster's join unlogged);
	// with every pair, 1.9 s in each of 20.
	for i, a := range admins {
		for _, n := range c.nodes[i+1:] {
			host, port, _ := net.SplitHostPort(n.addr)
			if err := a.Do(ctx, "CLUSTER", "MEET", host, port, n.busPort).Err(); err != nil {
				t.Fatalf("CLUSTER MEET %s (bus port %s) on node %d: %v", n.addr, n.busPort, i, err)
			}
		}
	}
	start := time.Now()
	eventually(t, "cluster_state:ok on every node", func() bool {
		for _, a := range admins {
			info, err := a.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	t.Logf("the cluster's three nodes reported cluster_state:ok %v after they met", time.Since(start).Round(time.Millisecond))
	return c
}

// client returns a new cluster client, closed at the test's end, with the
// context deadlines a member needs.
func (c *redisCluster) client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// connect is client, as the store interface wants it.
func (c *redisCluster) connect(t testing.TB) redis.UniversalClient { return c.client(t) }

// subscriptions is what the store interface says, summed over the nodes:
// in a cluster each node counts only the subscriptions made on it.
func (c *redisCluster) subscriptions(t testing.TB) func(channel string) int64 {
	count := make([]func(string) int64, len(c.nodes))
	for i, n := range c.nodes {
		count[i] = n.subscriptions(t)
	}
	return func(channel string) int64 {
		var sum int64
		for _, f := range count {
			sum += f(channel)
		}
		return sum
	}
}

// slotOf is the slot of key, as the cluster computes it (CLUSTER
// KEYSLOT), and the node serving it.
func (c *redisCluster) slotOf(t *testing.T, key string) (slot, node int) {
	t.Helper()
	s, err := c.nodes[0].client(t).ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
	}
	for i, r := range clusterSlots {
		if int(s) >= r[0] && int(s) <= r[1] {
			return int(s), i
		}
	}
	t.Fatalf("CLUSTER KEYSLOT %s is %d, outside 0..16383", key, s)
	return 0, 0
}

// fleetKey returns a fleet Key (prefix and a number) whose store keys
// hash, by their tag, to a slot of node. The channel, "casbreaker:" and
// the Key, hashes as the tag does, so the members' subscriptions are on
// that node too.
func (c *redisCluster) fleetKey(t *testing.T, prefix string, node int) string {
	t.Helper()
	for i := range 100 { // a third of the names fit: 100 misses in a row do not happen
		key := fmt.Sprintf("%s-%d", prefix, i)
		if _, n := c.slotOf(t, "{casbreaker:"+key+"}:state"); n == node {
			return key
		}
	}
	t.Fatalf("no fleet key %s-N in 100 hashes to node %d", prefix, node)
	return ""
}

// holder says which node holds key: the one that has it (EXISTS 1), while
// every other node answers with a MOVED redirection.
func (c *redisCluster) holder(t *testing.T, key string) int {
	t.Helper()
	holder := -1
	for i, n := range c.nodes {
		has, err := n.client(t).Exists(context.Background(), key).Result()
		switch {
		case err == nil && has == 1 && holder == -1:
			holder = i
		case err != nil && strings.HasPrefix(err.Error(), "MOVED "):
		default:
			t.Fatalf("EXISTS %s on node %d: %d, %v (held by node %d so far)", key, i, has, err, holder)
		}
	}
	if holder == -1 {
		t.Fatalf("no node holds %s", key)
	}
	return holder
}

// TestCluster: the fleet on a Redis Cluster of three redis-server
// masters, every member with a *redis.ClusterClient of its own, each
// fleet's keys on the node chosen for it. Polling is off (an hour), so
// adoption goes through publish/subscribe alone, each member's
// subscription made by its cluster client on the node of the channel's
// slot.
func TestCluster(t *testing.T) {
	c := startRedisCluster(t)
	ctx := context.Background()

	// The hash tag puts a fleet's four keys in one slot, which is what
	// lets one script take them all. Without it they hash to different
	// slots and the cluster refuses the script with a CROSSSLOT error
	// ("Keys in request don't hash to the same slot").
	t.Run("hash tags", func(t *testing.T) {
		key := c.fleetKey(t, t.Name(), 0)
		tag := "{casbreaker:" + key + "}"
		var tagged, bare []string
		for _, k := range []string{":state", ":trips", ":gens", ":lease"} {
			tagged = append(tagged, tag+k)
			bare = append(bare, "casbreaker:"+key+k)
		}
		slots := map[int]bool{}
		for _, k := range tagged {
			s, _ := c.slotOf(t, k)
			slots[s] = true
		}
		if len(slots) != 1 {
			t.Fatalf("the tagged keys %v are in slots %v, want one", tagged, slots)
		}
		clear(slots)
		for _, k := range bare {
			s, _ := c.slotOf(t, k)
			slots[s] = true
		}
		if len(slots) < 2 {
			t.Fatalf("the untagged keys %v are in one slot: they show nothing", bare)
		}
		cc := c.client(t)
		args := []any{"m", "i", 1, openDuration.Milliseconds(), 1, "casbreaker:" + key}
		if err := tripScript.Run(ctx, cc, bare, args...).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("the trip script on untagged keys: %v, want a CROSSSLOT error", err)
		}
		refused := false // by a node, not by the client, which has an error of that text too
		for _, n := range c.nodes {
			stats, err := n.client(t).Info(ctx, "errorstats").Result()
			refused = refused || err == nil && strings.Contains(stats, "errorstat_CROSSSLOT:count=")
		}
		if !refused {
			t.Fatal("no node counted a CROSSSLOT error: the client refused the script, not the cluster")
		}
		if err := tripScript.Run(ctx, cc, tagged, args...).Err(); err != nil {
			t.Fatalf("the trip script on the tagged keys: %v", err)
		}
	})

	// Two fleets whose keys are on two different nodes: each opens on its
	// own quorum, and neither's trips reach the other.
	t.Run("quorum", func(t *testing.T) {
		const n = 5
		opts := func(key string) func(int) Options {
			return func(int) Options { return Options{Key: key, Quorum: 2, PollInterval: time.Hour} }
		}
		a := newFleet(t, c, n, opts(c.fleetKey(t, t.Name()+"/a", 0)))
		b := newFleet(t, c, n, opts(c.fleetKey(t, t.Name()+"/b", 1)))

		a.trip(0)
		eventually(t, "fleet a's first trip to be recorded", func() bool { return a.members[0].Stats().Published == 1 })
		for i, m := range a.members[1:] {
			if m.State() != core.Closed || m.Stats().FleetOpen {
				t.Fatalf("fleet a's member %d is %v (fleet open %v) after another member's lone trip", i+1, m.State(), m.Stats().FleetOpen)
			}
		}
		a.tripWithinBound(1)
		for i, m := range a.members {
			if m.State() != core.Open || !m.Stats().FleetOpen || call(m) {
				t.Fatalf("fleet a's member %d is %v (fleet open %v) after its quorum's trip", i, m.State(), m.Stats().FleetOpen)
			}
		}
		for i, m := range b.members {
			if m.State() != core.Closed || m.Stats().FleetOpen || m.Stats().Version != 0 {
				t.Fatalf("fleet b's member %d is %v (fleet open %v, version %d) after fleet a opened",
					i, m.State(), m.Stats().FleetOpen, m.Stats().Version)
			}
		}
		b.trip(0)
		b.trip(1)
		b.waitVersion(1)
		for i, m := range b.members {
			if m.State() != core.Open || !m.Stats().FleetOpen {
				t.Fatalf("fleet b's member %d is %v (fleet open %v) after its quorum's trip", i, m.State(), m.Stats().FleetOpen)
			}
		}

		for name, f := range map[string]*fleet{"a": a, "b": b} {
			keys := f.members[0].keys[:3] // state, trips, generations: the lease is made by a probe
			s, want := c.slotOf(t, keys[0])
			for _, k := range keys {
				if got := c.holder(t, k); got != want {
					t.Fatalf("fleet %s's key %s is on node %d, want node %d, which serves slot %d", name, k, got, want, s)
				}
			}
			t.Logf("fleet %s: keys %v in slot %d on node %d", name, keys, s, want)
		}
	})

	// A fleet on the third node, with a budget of two probes: each
	// half-open period leases two probes across the five members, and
	// every member follows the verdict, a re-open and then a close.
	t.Run("probe budget", func(t *testing.T) {
		const n, probes = 5, 2
		key := c.fleetKey(t, t.Name(), 2)
		// The lease outlives any delay of a loaded machine: the test holds
		// the probes while it counts them.
		f := newFleet(t, c, n, func(int) Options {
			return Options{Key: key, Quorum: 2, Probes: probes, LeaseTTL: openDuration, PollInterval: time.Hour}
		})
		for i := range n {
			f.trip(i)
		}
		f.waitVersion(1)
		for period, verdict := range []error{errDown, errDown, nil} {
			version := f.members[0].Stats().Version
			f.advance(openDuration)
			var held []core.Permit
			var holders []*Member
			for range 3 {
				for _, m := range f.members {
					if p, err := m.Allow(); err == nil {
						held, holders = append(held, p), append(holders, m)
					}
				}
			}
			if len(held) != probes {
				t.Fatalf("half-open period %d: %d probes across the fleet, want %d (the budget)", period, len(held), probes)
			}
			for i, p := range held {
				holders[i].Done(p, verdict)
			}
			f.waitVersion(version + 1)
			for i, m := range f.members {
				if open := verdict != nil; m.Stats().FleetOpen != open || (m.State() == core.Open) != open {
					t.Fatalf("half-open period %d: member %d is %v (fleet open %v) after the verdict %v",
						period, i, m.State(), m.Stats().FleetOpen, verdict)
				}
			}
		}
		for i, m := range f.members {
			p, err := m.Allow()
			if err != nil {
				t.Fatalf("member %d refused a call after the fleet closed: %v", i, err)
			}
			m.Done(p, nil)
		}
	})
}
