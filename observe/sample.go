package observe

import (
	"errors"
	"fmt"

	"github.com/casbreaker/casbreaker/core"
)

// Sample is one breaker as one read found it.
type Sample struct {
	// Name is the breaker's Settings().Name: the breaker label.
	Name string
	// State is State(): time-aware, so an open breaker whose open
	// duration has elapsed reads HalfOpen before any call commits it.
	State core.State
	// Counts is Counts(): the current window and the half-open probes.
	Counts core.Counts
	// Windowed is true when the breaker has a sliding window
	// (Settings().WindowSize > 0); the window series exist only then.
	Windowed bool
	// Collecting is true when the breaker keeps cumulative counters
	// (Config.CollectMetrics); the counter series exist only then.
	Collecting bool
	// Metrics is Metrics(): all zero unless Collecting.
	Metrics core.Metrics
	// Transitions are the breaker's committed transitions, each pair of
	// states with a count: by reason too when the read had a
	// Transitions listener (Read's tr), otherwise from Metrics with a
	// zero Reason (none when not Collecting). Ordered by From, To and
	// Reason.
	Transitions []TransitionCount
}

// TransitionCount is how many transitions from From to To, for Reason,
// a breaker committed (Reason zero: not told apart).
type TransitionCount struct {
	From, To core.State
	Reason   core.Reason
	Count    uint64
}

// FailureRatio is the window's failures over its calls, 0..1, and false
// when the window holds no call (no window, open, half-open, or a fresh
// window), where a ratio would say nothing. It is the figure the
// failure-rate threshold is judged on, shown whether or not the window
// holds the minimum number of calls yet.
func (s Sample) FailureRatio() (float64, bool) {
	return ratio(s.Counts.Failures, s.Counts.Calls)
}

// SlowCallRatio is the window's slow calls over its calls, 0..1, and false
// when the window holds no call, as for FailureRatio.
func (s Sample) SlowCallRatio() (float64, bool) {
	return ratio(s.Counts.SlowCalls, s.Counts.Calls)
}

func ratio(n, of uint64) (float64, bool) {
	if of == 0 {
		return 0, false
	}
	return float64(n) / float64(of), true
}

// Read calls fn with a Sample of each breaker src yields, in src's order,
// on the calling goroutine. With tr non-nil the samples' Transitions come
// from it (by reason), and tr forgets the breakers this read did not find
// (see Transitions). Each breaker's figures are read one after another
// while calls go on, so a sample is not one instant (core.Metrics says
// what that allows); each figure on its own is what the breaker reported.
//
// Two breakers with the same name cannot be told apart: fn sees the first
// only, and Read returns an error naming the name, for each name yielded
// more than once. Read may run concurrently with itself and with the
// breakers' calls.
func Read(src Source, tr *Transitions, fn func(Sample)) error {
	if src == nil {
		return nil
	}
	var read uint64
	if tr != nil {
		read = tr.begin()
	}
	seen := make(map[string]bool)
	var errs []error
	for b := range src {
		set := b.Settings()
		name := set.Name
		if seen[name] {
			errs = append(errs, fmt.Errorf("observe: two breakers are named %q: give each its own core.Config.Name to tell them apart", name))
			continue
		}
		seen[name] = true
		s := Sample{
			Name:       name,
			State:      b.State(),
			Counts:     b.Counts(),
			Windowed:   set.WindowSize > 0,
			Collecting: set.CollectMetrics,
		}
		if s.Collecting {
			s.Metrics = b.Metrics()
		}
		switch {
		case tr != nil:
			s.Transitions = tr.counts(name)
		case s.Collecting:
			s.Transitions = fromMetrics(&s.Metrics)
		}
		fn(s)
	}
	if tr != nil {
		tr.forget(seen, read)
	}
	return errors.Join(errs...)
}

// fromMetrics lists the non-zero transition counts of m, ordered.
func fromMetrics(m *core.Metrics) []TransitionCount {
	var out []TransitionCount
	for from := range m.Transitions {
		for to, n := range m.Transitions[from] {
			if n > 0 {
				out = append(out, TransitionCount{From: core.State(from), To: core.State(to), Count: n})
			}
		}
	}
	return out
}
