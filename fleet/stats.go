package fleet

import (
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/observe"
)

// Stats is what a member has done with the fleet so far. Counts are since
// New; each figure is one atomic read, so a Stats is not one instant.
type Stats struct {
	// FleetStats are the figures the metrics exporters report for the
	// member (observe.FleetMetrics): its mode (Local), store errors,
	// published trips, adopted states, probe leases and dropped reports.
	observe.FleetStats
	// Version is the version of the fleet's shared state the member
	// adopted last (0: none yet); FleetOpen says whether that state is
	// open (an open period or its half-open part).
	Version   uint64
	FleetOpen bool
}

type counters struct {
	storeErrors, published, adoptedOpen, adoptedClosed, granted, refused, dropped atomic.Uint64
}

// Stats returns the member's Stats. It allocates nothing.
func (m *Member) Stats() Stats {
	return Stats{
		FleetStats: m.FleetStats(),
		Version:    m.version.Load(),
		FleetOpen:  m.period.Load() != nil,
	}
}

// FleetStats returns the member's figures for the metrics exporters,
// Stats without the version: with Settings, State, Counts and Metrics it
// makes a Member an observe.FleetMember, so that observe.Breakers(member)
// exports them (the fleet families, casbreaker_fleet_mode and the rest)
// beside its breaker's series through prombreaker or otelbreaker. It
// allocates nothing.
func (m *Member) FleetStats() observe.FleetStats {
	m.breaker()
	return observe.FleetStats{
		Local:          m.local.Load(),
		StoreErrors:    m.stats.storeErrors.Load(),
		Published:      m.stats.published.Load(),
		AdoptedOpen:    m.stats.adoptedOpen.Load(),
		AdoptedClosed:  m.stats.adoptedClosed.Load(),
		LeasesGranted:  m.stats.granted.Load(),
		LeasesRefused:  m.stats.refused.Load(),
		DroppedReports: m.stats.dropped.Load(),
	}
}

var _ observe.FleetMember = (*Member)(nil)
