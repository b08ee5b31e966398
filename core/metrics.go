package core

import "go.uber.org/atomic"

// Metrics is a snapshot of a breaker's cumulative counters, kept only with
// Config.CollectMetrics (all zero otherwise). Every count is in calls (or
// transitions) since construction and only grows; none is reset by a
// transition or a manual control.
//
// The lock-free breaker reads each counter with one atomic load while
// writers go on, so a snapshot is not one instant: counters read later may
// include events that happened after ones read earlier missed, and
// Admitted may briefly lag the outcomes of the calls it admitted. Each
// counter on its own is exact once the calls it counts have returned. The
// baseline's snapshot is one instant (taken under its mutex).
type Metrics struct {
	// Admitted counts permits granted by Allow, probes included.
	Admitted uint64
	// RejectedOpen, RejectedHalfOpenFull, RejectedForcedOpen and
	// RejectedRampUp count Allow's rejections by their error: ErrOpen,
	// ErrHalfOpenFull, ErrForcedOpen and ErrRampingUp.
	RejectedOpen, RejectedHalfOpenFull, RejectedForcedOpen, RejectedRampUp uint64
	// Successes, Failures and Ignored count outcomes of current permits the
	// breaker acted on: a success or failure counted in the closed or
	// metrics-only window (or by the run of consecutive failures), an
	// ignored outcome of a current closed or metrics-only permit (it touches
	// no window), or a probe's outcome (an ignored probe returns
	// its slot). A retry-after hint counts as a failure.
	Successes, Failures, Ignored uint64
	// SlowCalls counts the window outcomes among Successes and Failures
	// that were slow (probes are not judged slow).
	SlowCalls uint64
	// Dropped counts outcomes that changed nothing: stale permits of a
	// passed generation, outcomes recorded while Disabled, and probe
	// outcomes with no probe in flight.
	Dropped uint64
	// Capped counts trips that Config.OpenGate refused: each is also one
	// Closed -> Closed in Transitions.
	Capped uint64
	// Transitions counts committed transitions by [from][to], self
	// transitions included: HalfOpen -> HalfOpen is a max-wait restart,
	// MetricsOnly -> MetricsOnly a "would have opened", Closed -> Closed a
	// capped trip (Capped) or a Reset, and a manual control counts even
	// when it keeps the state.
	Transitions [NumStates][NumStates]uint64
}

// counters are the lock-free breaker's Metrics: one atomic word each. They
// exist only with CollectMetrics, so a breaker without them pays one nil
// check per call and no shared write.
type counters struct {
	admitted, rejOpen, rejHalf, rejForced, rejRamp atomic.Uint64
	success, failure, ignored, slow, dropped       atomic.Uint64
	capped                                         atomic.Uint64
	transitions                                    [NumStates][NumStates]atomic.Uint64
}

func (m *counters) snapshot() Metrics {
	s := Metrics{
		Admitted:             m.admitted.Load(),
		RejectedOpen:         m.rejOpen.Load(),
		RejectedHalfOpenFull: m.rejHalf.Load(),
		RejectedForcedOpen:   m.rejForced.Load(),
		RejectedRampUp:       m.rejRamp.Load(),
		Successes:            m.success.Load(),
		Failures:             m.failure.Load(),
		Ignored:              m.ignored.Load(),
		SlowCalls:            m.slow.Load(),
		Dropped:              m.dropped.Load(),
		Capped:               m.capped.Load(),
	}
	for i := range m.transitions {
		for j := range m.transitions[i] {
			s.Transitions[i][j] = m.transitions[i][j].Load()
		}
	}
	return s
}

// outcome counts one outcome the breaker acted on.
func (m *counters) outcome(o Outcome, slow bool) {
	switch o {
	case Success:
		m.success.Inc()
	case Failure:
		m.failure.Inc()
	default:
		m.ignored.Inc()
	}
	if slow {
		m.slow.Inc()
	}
}

// rejected counts one rejection by its reason (rejectOpen and the rest).
func (m *counters) rejected(reason int) {
	switch reason {
	case rejectOpen:
		m.rejOpen.Inc()
	case rejectHalfOpenFull:
		m.rejHalf.Inc()
	case rejectForcedOpen:
		m.rejForced.Inc()
	default:
		m.rejRamp.Inc()
	}
}
