package fleet_test

import (
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/fleet"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

// An HTTP client whose breaker per host is shared by every replica of the
// service: a host's breaker opens on all replicas once two of them
// tripped, and when its open duration ends one probe goes to the host
// from the whole fleet. Redis down, slow or partitioned changes nothing a
// caller sees: each breaker then runs as a local one. (Compiled, not run:
// it needs a Redis.)
func ExampleKeys() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	keys, err := fleet.NewKeys(fleet.Options{Client: rdb, Key: "checkout", Quorum: 2, Probes: 1,
		LeaseTTL: 10 * time.Second, // above the longest probe: the client's Timeout below
	})
	if err != nil {
		log.Fatal(err)
	}
	defer keys.Close()
	tr, err := httpbreaker.New(httpbreaker.Options{
		Config:    core.Config{Name: "api", ConsecutiveFailures: 5, OpenDuration: 10 * time.Second},
		Extension: keys, // each host's breaker a fleet member of its own
	})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	_ = client
}
