package fleet

import "go.uber.org/atomic"

// Stats is what a member has done with the fleet so far. Counts are since
// New.
type Stats struct {
	// Local is true while the member runs as a plain local breaker
	// because its last store call failed (or after Close).
	Local bool
	// Version is the version of the fleet's shared state the member
	// adopted last (0: none yet); FleetOpen says whether that state is
	// open (an open period or its half-open part).
	Version   uint64
	FleetOpen bool
	// StoreErrors counts store calls that failed or timed out.
	StoreErrors uint64
	// Published counts the member's trips the store recorded.
	Published uint64
	// Adopted counts shared states the member adopted (open and closed).
	Adopted uint64
	// LeasesGranted and LeasesRefused count the probe leases the store
	// granted the member and the probes refused without one.
	LeasesGranted, LeasesRefused uint64
	// DroppedReports counts probe outcomes not reported to the store (its
	// queue was full, or the store could not be reached): their leases
	// run out after their TTL.
	DroppedReports uint64
}

type counters struct {
	storeErrors, published, adopted, granted, refused, dropped atomic.Uint64
}

// Stats returns the member's Stats. It allocates nothing.
func (m *Member) Stats() Stats {
	m.breaker()
	return Stats{
		Local:          m.local.Load(),
		Version:        m.version.Load(),
		FleetOpen:      m.period.Load() != nil,
		StoreErrors:    m.stats.storeErrors.Load(),
		Published:      m.stats.published.Load(),
		Adopted:        m.stats.adopted.Load(),
		LeasesGranted:  m.stats.granted.Load(),
		LeasesRefused:  m.stats.refused.Load(),
		DroppedReports: m.stats.dropped.Load(),
	}
}
