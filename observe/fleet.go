package observe

// FleetMember is implemented by a Breaker that is one replica's member of
// a fleet sharing one open state and one probe budget through a store
// (fleet.Member, in the nested module github.com/casbreaker/casbreaker/fleet):
// a read takes its FleetStats beside its breaker's figures, and
// Sample.Each reports the families of FleetMetrics for it. FleetStats must
// be safe to call concurrently with the breaker's calls and should not
// allocate, as the Breaker methods.
type FleetMember interface {
	FleetStats() FleetStats
}

// FleetStats is what a fleet member has done with the fleet: the figures
// of the fleet families. Counts are since the member was made and only
// grow; each is one atomic read, so a FleetStats is not one instant. The
// zero value is a member in fleet mode that has done nothing yet.
type FleetStats struct {
	// Local is true while the member runs as a plain local breaker
	// because its last store call failed (or after it was closed); false
	// while it shares the fleet's state.
	Local bool
	// StoreErrors counts store calls that failed or timed out.
	StoreErrors uint64
	// Published counts the member's trips the store recorded.
	Published uint64
	// AdoptedOpen counts the open shared states the member adopted (a
	// quorum's trip, or the fleet's verdict to re-open), AdoptedClosed the
	// closed ones (the fleet's verdict to close), each once per version of
	// the shared state, whether or not the breaker moved (an operator's
	// forced open, disabled or metrics-only breaker stays where it is).
	AdoptedOpen, AdoptedClosed uint64
	// LeasesGranted counts the probe leases the store granted the member;
	// LeasesRefused the probes of a fleet open period refused without one
	// (the store had none left, the wait of an earlier refusal had not
	// passed, or the store could not be reached and the member fails
	// closed).
	LeasesGranted, LeasesRefused uint64
	// DroppedReports counts probe outcomes not reported to the store (the
	// report queue was full, or the store could not be reached): their
	// leases run out after their time-to-live.
	DroppedReports uint64
}

// The fleet families, in the order FleetMetrics lists them. Apart from
// Metrics, so that the breaker metric set stays what every breaker
// reports.
var (
	metricFleetMode = &Metric{Name: "fleet_mode", Unit: "1", Labels: []string{"mode"},
		Help: "1 for the mode the fleet member runs in, 0 for the other: fleet (it shares the fleet's open state and probe budget) or local (its last store call failed: a plain local breaker)"}
	metricFleetStoreErrors = &Metric{Name: "fleet_store_errors", Counter: true, Unit: "{call}",
		Help: "store calls of the fleet member that failed or timed out"}
	metricFleetPublishedTrips = &Metric{Name: "fleet_published_trips", Counter: true, Unit: "{trip}",
		Help: "trips of the fleet member's breaker that the store recorded"}
	metricFleetAdoptions = &Metric{Name: "fleet_adoptions", Counter: true, Unit: "{state}", Labels: []string{"state"},
		Help: "shared states the fleet member adopted, by state: open (a quorum's trip or the fleet's re-open) or closed (the fleet's close)"}
	metricFleetLeases = &Metric{Name: "fleet_leases", Counter: true, Unit: "{lease}", Labels: []string{"result"},
		Help: "half-open probes of a fleet open period, by result: granted a lease by the store, or refused without one (with a wait)"}
	metricFleetDroppedReports = &Metric{Name: "fleet_dropped_reports", Counter: true, Unit: "{outcome}",
		Help: "probe outcomes the fleet member could not report to the store: their leases run out after their time-to-live"}
)

var fleetSet = [...]*Metric{metricFleetMode, metricFleetStoreErrors, metricFleetPublishedTrips,
	metricFleetAdoptions, metricFleetLeases, metricFleetDroppedReports}

// FleetMetrics returns the families of a fleet member's figures, which
// Sample.Each reports for a breaker that is a FleetMember (Sample.Fleet)
// and for no other: an exporter makes its instruments from Metrics and
// from these. Like Metrics, a new slice on every call holding the same
// pointers, shared by every exporter of the process: read them, never
// modify them. The counters among them are always reported for a fleet
// member, with or without core.Config.CollectMetrics.
func FleetMetrics() []*Metric { return append([]*Metric(nil), fleetSet[:]...) }

// eachFleet calls one with every fleet series of s.
func (s *Sample) eachFleet(one func(m *Metric, v Point, labels ...string)) {
	f := &s.FleetStats
	local := uint64(0)
	if f.Local {
		local = 1
	}
	one(metricFleetMode, Point{Count: 1 - local}, "fleet")
	one(metricFleetMode, Point{Count: local}, "local")
	one(metricFleetStoreErrors, Point{Count: f.StoreErrors})
	one(metricFleetPublishedTrips, Point{Count: f.Published})
	one(metricFleetAdoptions, Point{Count: f.AdoptedOpen}, "open")
	one(metricFleetAdoptions, Point{Count: f.AdoptedClosed}, "closed")
	one(metricFleetLeases, Point{Count: f.LeasesGranted}, "granted")
	one(metricFleetLeases, Point{Count: f.LeasesRefused}, "refused")
	one(metricFleetDroppedReports, Point{Count: f.DroppedReports})
}
