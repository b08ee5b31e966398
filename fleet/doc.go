// Package fleet makes the breakers of a service's replicas one breaker
// across the fleet, on Redis (or Valkey, or Redis Cluster), without a
// store call on the call path of a closed or open breaker.
//
// Each replica runs a Member (New) per shared breaker: a core.Breaker
// (embedded: its Allow and Done are the breaker's own) that keeps
// detecting with its own window, with the member as its listener and its
// core.ProbeGate. For the breakers of a registry (and so of httpbreaker's
// hosts and grpcbreaker's keys), Keys is the registry.Extension that
// makes each of them a member of its own fleet. A member's trip is published to the store,
// versioned and fenced by its breaker generation; once Options.Quorum
// distinct members reported a trip within the open duration, on the
// store's clock, the fleet is open, and every member adopts the open state
// for what is left of it (pushed over publish/subscribe, read every
// Options.PollInterval as the fallback). When the fleet's open period
// ends, each member's half-open probe first takes a lease from the store
// (the one store call on the call path, bounded by Options.StoreTimeout):
// at most Options.Probes leases per half-open period across the fleet,
// each expiring after Options.LeaseTTL on the store's clock so that a dead
// holder cannot wedge the fleet. Members without a lease refuse with a
// wait (ErrLeaseRefused, which matches core.ErrHalfOpenFull). The probes'
// outcomes go to the store, which publishes the verdict (close, or open
// again), and every member follows it.
//
// If the store is slow, down or partitioned, each store call gives up at
// its deadline, the member runs as a plain local breaker and tries the
// store again with a capped, jittered backoff, and on its return adopts
// the shared state. Options.FailClosed refuses half-open probes instead
// while the store is out of reach; it is off by default.
//
// A Member is an observe.Breaker and an observe.FleetMember, so
// prombreaker and otelbreaker export its breaker's series and the fleet's
// (mode fleet or local, store errors, published trips, adoptions, probe
// leases granted and refused): observe.Breakers(member), or a Group's or
// a Keys' Source for every member it has made.
//
// docs/fleet.md gives the design, what it guarantees and what not, and
// each failure mode.
package fleet
