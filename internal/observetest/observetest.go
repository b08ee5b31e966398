// Package observetest is what the tests of observe and of the exporters
// built on it (prombreaker, otelbreaker) share: a breaker tripped in a
// known way, one call through a breaker, traffic from goroutines, two
// breakers of one name, a breaker under a name of the test's choosing, a
// breaker with a fleet member's figures, and many breakers for the scrape
// benchmarks.
package observetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/registry"
)

// ErrDown is the error of a failing call.
var ErrDown = errors.New("down")

// Call makes one call through b that ends with err, and returns the
// rejection if b refused it.
func Call(b core.Guard, err error) error {
	p, rej := b.Allow()
	if rej != nil {
		return rej
	}
	b.Done(p, err)
	return nil
}

// Tripped returns a breaker named "api" with CollectMetrics, a count
// window of 4 that trips at 50 % failures once it holds 2, open for 1 s on
// a manual clock, and listener as its OnStateChange, after one success,
// one failure (which trips it: closed -> open for failure-rate) and one
// call it refused.
func Tripped(listener func(core.Transition)) (*core.Breaker, error) {
	b, err := core.New(core.Config{Name: "api", WindowSize: 4, MinimumNumberOfCalls: 2, FailureRateThreshold: 50,
		OpenDuration: time.Second, CollectMetrics: true, Clock: core.NewManualClock(0), OnStateChange: listener})
	if err != nil {
		return nil, err
	}
	if err := Call(b, nil); err != nil {
		return nil, err
	}
	if err := Call(b, ErrDown); err != nil {
		return nil, err
	}
	if err := Call(b, nil); !errors.Is(err, core.ErrOpen) {
		return nil, errors.New("observetest: the breaker did not trip")
	}
	return b, nil
}

// Traffic runs calls through the breakers of reg for keys 0..keys-1 from
// four goroutines until the returned stop is called (which waits for
// them): the calls of every third key, key 0 among them, fail. With clock
// non-nil it advances the clock by a millisecond every 50 calls of a
// goroutine, so that open breakers probe. A key the registry is too full
// for is skipped.
func Traffic(reg *registry.Registry[int], keys int, clock *core.ManualClock) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				k := (w + i) % keys
				b, err := reg.Get(k)
				if err != nil {
					continue
				}
				var e error
				if k%3 == 0 {
					e = ErrDown
				}
				_ = Call(b, e)
				if clock != nil && i%50 == 0 {
					clock.Advance(time.Millisecond)
				}
			}
		})
	}
	return func() { close(quit); wg.Wait() }
}

// SameName returns a Source of two breakers both named name, which a read
// cannot tell apart.
func SameName(name string) (observe.Source, error) {
	a, err := core.New(core.Config{Name: name, ConsecutiveFailures: 1})
	if err != nil {
		return nil, err
	}
	b, err := core.New(core.Config{Name: name, ConsecutiveFailures: 1})
	if err != nil {
		return nil, err
	}
	return observe.Breakers(a, b)
}

// Named is a breaker that a Source reports under a name of the test's
// choosing: core.New refuses a name that is not valid UTF-8, but a Source
// of the user's own breakers may yield any observe.Breaker, and the
// exporters must still survive such a name.
type Named struct {
	*core.Breaker
	Name string
}

// Settings is the breaker's, under Name.
func (n Named) Settings() core.Settings {
	s := n.Breaker.Settings()
	s.Name = n.Name
	return s
}

// Fleet is a breaker that reports Stats as a fleet member's figures
// (observe.FleetMember), for the exporters' tests of the fleet series: a
// fleet.Member, in a module of its own, needs a Redis to run; the fleet
// module's own tests read real members.
type Fleet struct {
	*core.Breaker
	Stats observe.FleetStats
}

// FleetStats is Stats.
func (f Fleet) FleetStats() observe.FleetStats { return f.Stats }

// FleetFigures are the figures of FleetAndPlain's member: local, and each
// count its own number, 1 to 7 in FleetStats' order.
var FleetFigures = observe.FleetStats{Local: true, StoreErrors: 1, Published: 2, AdoptedOpen: 3, AdoptedClosed: 4,
	LeasesGranted: 5, LeasesRefused: 6, DroppedReports: 7}

// FleetAndPlain returns a Source of a fleet member named "pay" whose
// figures are FleetFigures and of a breaker named "plain" that is no
// member, both tripping at one failure, without CollectMetrics or a
// window.
func FleetAndPlain() (observe.Source, error) {
	member, err := core.New(core.Config{Name: "pay", ConsecutiveFailures: 1})
	if err != nil {
		return nil, err
	}
	plain, err := core.New(core.Config{Name: "plain", ConsecutiveFailures: 1})
	if err != nil {
		return nil, err
	}
	return observe.Breakers(Fleet{Breaker: member, Stats: FleetFigures}, plain)
}

// ScrapeSizes are the numbers of breakers the exporters' scrape
// benchmarks read.
var ScrapeSizes = []int{1000, 10000, 100000}

// ManyBreakers returns a Source of n breakers, each with a count window of
// 10 calls and no cumulative counters, so 10 series each (6 states, 4
// window counts): the exporters' scrape benchmarks read them. It fails tb
// if a breaker cannot be made.
func ManyBreakers(tb testing.TB, n int) observe.Source {
	tb.Helper()
	bs := make([]observe.Breaker, n)
	for i := range bs {
		br, err := core.New(core.Config{Name: "host-" + strconv.Itoa(i) + ".example", WindowSize: 10, FailureRateThreshold: 50})
		if err != nil {
			tb.Fatal(err)
		}
		bs[i] = br
	}
	src, err := observe.Breakers(bs...)
	if err != nil {
		tb.Fatal(err)
	}
	return src
}
