// Package observe reads circuit breakers for metrics exporters: a Source
// of breakers (a fixed list, or every breaker of a registry), a Sample of
// each taken when the exporter reads it, the metric set every exporter
// shares (Metrics, Sample.Each) and the families of a fleet member's
// figures (FleetMetrics), and Transitions, a listener that counts
// transitions by breaker, from, to and reason.
//
// The exporters prombreaker (Prometheus) and otelbreaker (OpenTelemetry)
// live in nested modules of their own and are built on it, so that the
// names and meanings of their series agree. Nothing here runs in a
// breaker's Allow or Done: a Reader calls Settings, State, Counts and
// Metrics (and a FleetMember's FleetStats), and Transitions runs only
// when a transition is delivered.
package observe

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// Breaker is what a read takes of a breaker: *core.Breaker and
// *registry.Breaker have these methods, safe to call concurrently with the
// breaker's calls and allocation-free. Settings().Name names the breaker
// in every series (the breaker label), so every breaker a Source yields
// should have its own name: of breakers that share one, a read reports
// the first only (DuplicateNamesError). A Breaker that is also a
// FleetMember has the fleet series too.
type Breaker interface {
	Settings() core.Settings
	State() core.State
	Counts() core.Counts
	Metrics() core.Metrics
}

// Source yields the breakers of one read, each once; a Reader calls it
// once per read, so a Source over a registry sees the breakers of that
// moment. Make one with Breakers or Registry, and join several (an HTTP
// and a gRPC registry, say) into one with Join, for one exporter. NewReader
// and the exporters (prombreaker.New, otelbreaker.Register) refuse a nil
// Source with an error: an exporter of nothing is most often a mistake.
type Source func(yield func(Breaker) bool)

// Breakers returns a Source of the given breakers, in that order, for
// breakers made with core.New. It returns an error matching
// core.ErrInvalidArgument, naming the position, if one of them is nil.
func Breakers(bs ...Breaker) (Source, error) {
	for i, b := range bs {
		if isNil(b) {
			return nil, fmt.Errorf("%w: observe.Breakers: breaker %d of %d is nil", core.ErrInvalidArgument, i, len(bs))
		}
	}
	bs = append([]Breaker(nil), bs...) // the caller's slice may change later
	return func(yield func(Breaker) bool) {
		for _, b := range bs {
			if !yield(b) {
				return
			}
		}
	}, nil
}

// Registry returns a Source of every breaker r holds at each read (its
// All), so breakers made later are read and evicted ones are not: the
// number of breakers a read sees is the registry's MaxBreakers at most,
// plus those made while the read runs (registry.Registry.All).
// It returns an error matching core.ErrInvalidArgument if r is nil.
func Registry[K comparable](r *registry.Registry[K]) (Source, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: observe.Registry: the registry is nil", core.ErrInvalidArgument)
	}
	return func(yield func(Breaker) bool) {
		for _, b := range r.All() {
			if !yield(b) {
				return
			}
		}
	}, nil
}

// Join returns a Source of the breakers of each of srcs, in that order,
// so that one exporter reads them all (a service's HTTP and gRPC
// registries, say). Their breakers should have names of their own across
// the sources, as within one. It returns an error matching
// core.ErrInvalidArgument, naming the position, if one of srcs is nil.
func Join(srcs ...Source) (Source, error) {
	for i, src := range srcs {
		if src == nil {
			return nil, fmt.Errorf("%w: observe.Join: Source %d of %d is nil", core.ErrInvalidArgument, i, len(srcs))
		}
	}
	srcs = slices.Clone(srcs) // the caller's slice may change later
	return func(yield func(Breaker) bool) {
		for _, src := range srcs {
			for b := range src {
				if !yield(b) {
					return
				}
			}
		}
	}, nil
}

// isNil reports whether b is nil or a nil pointer in an interface, which
// would panic at the first read.
func isNil(b Breaker) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
