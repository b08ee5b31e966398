package observe_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/observetest"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/registry"
)

// newBreaker returns a breaker named name, with metrics, that trips at
// 50 % failures of a window of 4 once it holds 2, and its clock.
func newBreaker(t *testing.T, name string, listener func(core.Transition)) (*core.Breaker, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(0)
	b, err := core.New(core.Config{
		Name: name, WindowSize: 4, MinimumNumberOfCalls: 2, FailureRateThreshold: 50,
		OpenDuration: time.Second, CollectMetrics: true, Clock: clock, OnStateChange: listener,
	})
	require.NoError(t, err)
	return b, clock
}

// reader returns a Reader of src with tr.
func reader(t *testing.T, src observe.Source, tr *observe.Transitions) *observe.Reader {
	t.Helper()
	r, err := observe.NewReader(src, tr)
	require.NoError(t, err)
	return r
}

// series renders every series of a read as "name{labels} value" lines.
func series(t *testing.T, src observe.Source, tr *observe.Transitions) []string {
	t.Helper()
	var out []string
	require.NoError(t, reader(t, src, tr).Read(func(s observe.Sample) {
		s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
			require.Len(t, labels, len(m.Labels), m.Name)
			kv := []string{"breaker=" + s.Name}
			for i, l := range m.Labels {
				kv = append(kv, l+"="+labels[i])
			}
			val := fmt.Sprint(v.Count)
			if m.Ratio {
				val = fmt.Sprint(v.Ratio)
			}
			out = append(out, m.Name+"{"+strings.Join(kv, ",")+"} "+val)
		})
	}))
	return out
}

func TestReadSeries(t *testing.T) {
	var tr observe.Transitions
	b, err := observetest.Tripped(tr.Listener(nil))
	require.NoError(t, err)
	src, err := observe.Breakers(b)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"state{breaker=api,state=closed} 0",
		"state{breaker=api,state=open} 1",
		"state{breaker=api,state=half_open} 0",
		"state{breaker=api,state=forced_open} 0",
		"state{breaker=api,state=disabled} 0",
		"state{breaker=api,state=metrics_only} 0",
		"calls{breaker=api,kind=successful} 1",
		"calls{breaker=api,kind=failed} 1",
		"calls{breaker=api,kind=ignored} 0",
		"permitted_calls{breaker=api} 2",
		"not_permitted_calls{breaker=api,reason=open} 1",
		"not_permitted_calls{breaker=api,reason=half_open_full} 0",
		"not_permitted_calls{breaker=api,reason=forced_open} 0",
		"not_permitted_calls{breaker=api,reason=ramping_up} 0",
		"slow_calls{breaker=api} 0",
		"dropped_outcomes{breaker=api} 0",
		"transitions{breaker=api,from=closed,to=open,reason=failure_rate} 1",
		// open: the window starts fresh, so no ratio
		"buffered_calls{breaker=api,kind=successful} 0",
		"buffered_calls{breaker=api,kind=failed} 0",
		"buffered_slow_calls{breaker=api,kind=successful} 0",
		"buffered_slow_calls{breaker=api,kind=failed} 0",
	}, series(t, src, &tr))
}

// A fleet member has the fleet series after its breaker's, whether or not
// it collects metrics; a breaker that is no member has none.
func TestFleetSeries(t *testing.T) {
	src, err := observetest.FleetAndPlain()
	require.NoError(t, err)
	var fleet []string
	for _, l := range series(t, src, nil) {
		if !strings.HasPrefix(l, "state{") {
			fleet = append(fleet, l)
		}
	}
	assert.Equal(t, []string{
		"fleet_mode{breaker=pay,mode=fleet} 0",
		"fleet_mode{breaker=pay,mode=local} 1",
		"fleet_store_errors{breaker=pay} 1",
		"fleet_published_trips{breaker=pay} 2",
		"fleet_adoptions{breaker=pay,state=open} 3",
		"fleet_adoptions{breaker=pay,state=closed} 4",
		"fleet_leases{breaker=pay,result=granted} 5",
		"fleet_leases{breaker=pay,result=refused} 6",
		"fleet_dropped_reports{breaker=pay} 7",
	}, fleet, "the fleet series, and none for the breaker that is no member")
	var samples []observe.Sample
	require.NoError(t, reader(t, src, nil).Read(func(s observe.Sample) { samples = append(samples, s) }))
	require.Len(t, samples, 2)
	assert.True(t, samples[0].Fleet)
	assert.Equal(t, observetest.FleetFigures, samples[0].FleetStats)
	assert.False(t, samples[1].Fleet)
	assert.Zero(t, samples[1].FleetStats)
}

func TestRatiosWhileTheWindowHoldsCalls(t *testing.T) {
	clock := core.NewManualClock(0)
	b, err := core.New(core.Config{Name: "db", WindowSize: 10, FailureRateThreshold: 90,
		SlowCallDurationThreshold: time.Second, Clock: clock})
	require.NoError(t, err)
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	p, err := b.Allow()
	require.NoError(t, err)
	clock.Advance(2 * time.Second) // slow
	b.Done(p, nil)
	require.NoError(t, observetest.Call(b, nil))
	require.NoError(t, observetest.Call(b, nil))
	p, err = b.Allow()
	require.NoError(t, err)
	clock.Advance(2 * time.Second) // slow and failed
	b.Done(p, observetest.ErrDown)

	var got observe.Sample
	require.NoError(t, reader(t, src, nil).Read(func(s observe.Sample) { got = s }))
	r, ok := got.FailureRatio()
	assert.True(t, ok)
	assert.Equal(t, 0.4, r)
	r, ok = got.SlowCallRatio()
	assert.True(t, ok)
	assert.Equal(t, 0.4, r)
	assert.False(t, got.Collecting, "no CollectMetrics: no counter series")
	assert.Empty(t, got.Transitions)
	lines := series(t, src, nil)
	assert.Contains(t, lines, "failure_ratio{breaker=db} 0.4")
	assert.Contains(t, lines, "slow_call_ratio{breaker=db} 0.4")
	assert.Contains(t, lines, "buffered_calls{breaker=db,kind=successful} 3")
	assert.Contains(t, lines, "buffered_calls{breaker=db,kind=failed} 2")
	assert.Contains(t, lines, "buffered_slow_calls{breaker=db,kind=successful} 1")
	assert.Contains(t, lines, "buffered_slow_calls{breaker=db,kind=failed} 1")
	for _, l := range lines {
		assert.NotRegexp(t, `^(calls|permitted_calls|not_permitted_calls|slow_calls|dropped_outcomes|transitions)\{`, l)
	}
}

// A breaker without a window has no window series, whatever its calls.
func TestNoWindowNoWindowSeries(t *testing.T) {
	b, err := core.New(core.Config{Name: "c", ConsecutiveFailures: 2, CollectMetrics: true})
	require.NoError(t, err)
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	var got observe.Sample
	require.NoError(t, reader(t, src, nil).Read(func(s observe.Sample) { got = s }))
	assert.False(t, got.Windowed)
	for _, l := range series(t, src, nil) {
		assert.NotRegexp(t, `^(buffered_calls|buffered_slow_calls|failure_ratio|slow_call_ratio)\{`, l)
	}
	assert.Contains(t, series(t, src, nil), "calls{breaker=c,kind=failed} 1")
}

func TestTransitionsFromMetricsWithoutAListener(t *testing.T) {
	b, clock := newBreaker(t, "api", nil)
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	require.NoError(t, observetest.Call(b, observetest.ErrDown))
	clock.Advance(time.Second)
	require.NoError(t, observetest.Call(b, nil)) // the probe closes it
	src, err := observe.Breakers(b)
	require.NoError(t, err)
	var got []observe.TransitionCount
	require.NoError(t, reader(t, src, nil).Read(func(s observe.Sample) { got = s.Transitions }))
	assert.Equal(t, []observe.TransitionCount{
		{From: core.Closed, To: core.Open, Count: 1},
		{From: core.Open, To: core.HalfOpen, Count: 1},
		{From: core.HalfOpen, To: core.Closed, Count: 1},
	}, got)
	assert.Contains(t, series(t, src, nil), "transitions{breaker=api,from=closed,to=open,reason=} 1")
}

// Breakers that share a label value: the first of each name is read, the
// others are counted by name, and the read goes on.
func TestDuplicateNamesAreAnError(t *testing.T) {
	var bs []observe.Breaker
	for _, name := range []string{"same", "other", "same", "\xff", "same", "\xff.x", "\xff.x", "\xff", "\xff.x"} {
		if utf8.ValidString(name) {
			b, _ := newBreaker(t, name, nil)
			bs = append(bs, b)
			continue
		}
		// core.New refuses such a name; a Source may still yield one.
		b, _ := newBreaker(t, "bad", nil)
		bs = append(bs, observetest.Named{Breaker: b, Name: name})
	}
	src, err := observe.Breakers(bs...)
	require.NoError(t, err)
	var names []string
	err = reader(t, src, nil).Read(func(s observe.Sample) { names = append(names, s.Name) })
	assert.Equal(t, []string{"same", "other", `\xff`, `\xff.x`}, names, "the first of each name, in the Source's order")
	assert.EqualError(t, err, `observe: 2 breakers are named "\\xff": give each its own core.Config.Name to tell them apart; `+
		`observe: 3 breakers are named "\\xff.x": give each its own core.Config.Name to tell them apart; `+
		`observe: 3 breakers are named "same": give each its own core.Config.Name to tell them apart`)
	assert.Equal(t, map[string]int{"same": 2, `\xff`: 1, `\xff.x`: 2}, observe.Duplicates(err))
	assert.Nil(t, observe.Duplicates(errors.New("other")))
	assert.Nil(t, observe.Duplicates(nil))
}

func TestLabelValue(t *testing.T) {
	for name, want := range map[string]string{
		"api":                "api",
		"":                   "",
		"h\u00e9llo/\u4e16":  "h\u00e9llo/\u4e16",
		"\xff.example":       `\xff.example`,
		"a\xc3":              `a\xc3`,         // a sequence cut short
		"\xed\xa0\x80z":      `\xed\xa0\x80z`, // a surrogate
		"\x80\u00e9\x0a\xfe": `\x80` + "\u00e9\n" + `\xfe`,
	} {
		got := observe.LabelValue(name)
		assert.Equal(t, want, got, "%q", name)
		assert.True(t, utf8.ValidString(got), "%q", name)
	}
}

func TestBadSources(t *testing.T) {
	var nilBreaker *core.Breaker
	a, _ := newBreaker(t, "a", nil)
	_, err := observe.Breakers(a, nil)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "breaker 1 of 2 is nil")
	_, err = observe.Breakers(nilBreaker)
	assert.ErrorContains(t, err, "breaker 0 of 1 is nil")
	_, err = observe.Registry[string](nil)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = observe.NewReader(nil, nil)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "the Source is nil")
	assert.NoError(t, new(observe.Reader).Read(func(observe.Sample) { t.Fatal("the zero Reader reads nothing") }))
	var nilReader *observe.Reader
	assert.PanicsWithValue(t, "observe: Read on a nil *Reader: make one with observe.NewReader and check its error", func() {
		_ = nilReader.Read(func(observe.Sample) {})
	})
	var nilTransitions *observe.Transitions
	assert.PanicsWithValue(t, "observe: Listener of a nil *Transitions: declare a Transitions value (its zero value is ready) and take its address", func() {
		nilTransitions.Listener(nil)
	})
}

func TestBreakersCopiesItsArguments(t *testing.T) {
	a, _ := newBreaker(t, "a", nil)
	b, _ := newBreaker(t, "b", nil)
	list := []observe.Breaker{a}
	src, err := observe.Breakers(list...)
	require.NoError(t, err)
	list[0] = b
	var names []string
	require.NoError(t, reader(t, src, nil).Read(func(s observe.Sample) { names = append(names, s.Name) }))
	assert.Equal(t, []string{"a"}, names)
}

// A registry's evicted breakers leave the reads, and Transitions forgets
// their counts, so the names kept are bounded by the registry's.
func TestTransitionsForgetEvictedBreakers(t *testing.T) {
	var tr observe.Transitions
	clock := core.NewManualClock(0)
	reg, err := registry.New(registry.Options[string]{
		Config:      core.Config{Name: "t", ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clock, OnStateChange: tr.Listener(nil)},
		MaxBreakers: 2,
	})
	require.NoError(t, err)
	src, err := observe.Registry(reg)
	require.NoError(t, err)
	r := reader(t, src, &tr)
	names := func() []string {
		var out []string
		require.NoError(t, r.Read(func(s observe.Sample) {
			if len(s.Transitions) > 0 {
				out = append(out, s.Name)
			}
		}))
		return out
	}
	for _, k := range []string{"a", "b"} {
		b, err := reg.Get(k)
		require.NoError(t, err)
		require.NoError(t, observetest.Call(b, observetest.ErrDown))
		require.ErrorIs(t, observetest.Call(b, nil), core.ErrOpen)
		b.Reset()
		clock.Advance(time.Second) // a is the least recently used
	}
	assert.ElementsMatch(t, []string{"t/a", "t/b"}, names())
	clock.Advance(time.Minute)
	_, err = reg.Get("c") // evicts the least recently used: a
	require.NoError(t, err)
	assert.Equal(t, []string{"t/b"}, names())
	_, err = reg.Get("a") // back, from zero
	require.NoError(t, err)
	assert.Empty(t, names(), "b was evicted for a; a came back with no transitions")
}

// A name counted after a read began is kept even if that read missed its
// breaker, which may have been made while the read ran.
func TestTransitionsKeepNamesCountedDuringARead(t *testing.T) {
	var tr observe.Transitions
	listen := tr.Listener(nil)
	a, _ := newBreaker(t, "a", nil)
	yielded := []observe.Breaker{a}
	r := reader(t, func(yield func(observe.Breaker) bool) {
		for _, b := range yielded {
			if !yield(b) {
				return
			}
		}
	}, &tr)
	require.NoError(t, r.Read(func(observe.Sample) {
		listen(core.Transition{Name: "late", From: core.Closed, To: core.Open, Reason: core.ReasonManual})
	}))
	yielded = []observe.Breaker{observetest.Named{Breaker: a, Name: "late"}}
	var got []observe.TransitionCount
	require.NoError(t, r.Read(func(s observe.Sample) { got = s.Transitions }))
	assert.Equal(t, []observe.TransitionCount{{From: core.Closed, To: core.Open, Reason: core.ReasonManual, Count: 1}}, got)
}

func TestListenerChains(t *testing.T) {
	var tr observe.Transitions
	var heard []core.Reason
	b, _ := newBreaker(t, "a", tr.Listener(func(t core.Transition) { heard = append(heard, t.Reason) }))
	b.Disable()
	assert.Equal(t, []core.Reason{core.ReasonManual}, heard)
}

func TestLabels(t *testing.T) {
	assert.Equal(t, "half_open", observe.StateLabel(core.HalfOpen))
	assert.Equal(t, "state(9)", observe.StateLabel(core.State(9)))
	assert.Equal(t, fmt.Sprintf("state(%d)", core.NumStates), observe.StateLabel(core.State(core.NumStates)), "the first state past the known")
	assert.Equal(t, fmt.Sprintf("reason(%d)", core.ReasonReconfigured+1), observe.ReasonLabel(core.ReasonReconfigured+1), "the first reason past the known")
	assert.Equal(t, "reconfigured", observe.ReasonLabel(core.ReasonReconfigured))
	assert.Equal(t, "capped", observe.ReasonLabel(core.ReasonCapped))
	assert.Equal(t, "open_duration_elapsed", observe.ReasonLabel(core.ReasonOpenDurationElapsed))
	assert.Equal(t, "", observe.ReasonLabel(0))
	assert.Equal(t, "reason(99)", observe.ReasonLabel(core.Reason(99)))
	for _, m := range slices.Concat(observe.Metrics(), observe.FleetMetrics()) {
		assert.Regexp(t, `^[a-z]+(_[a-z]+)*$`, m.Name)
		assert.NotEmpty(t, m.Help, m.Name)
		assert.NotEmpty(t, m.Unit, m.Name)
	}
}

// The metric set is handed out, not shared: a caller that edits its slice
// changes nothing for the exporters. The families keep their pointers.
func TestMetricSetCannotBeReplaced(t *testing.T) {
	set := observe.Metrics()
	first, last := set[0], set[len(set)-1]
	set[0], set = nil, nil
	again := observe.Metrics()
	assert.Same(t, first, again[0])
	assert.Same(t, observe.DuplicateBreakers(), last, "the duplicates' family is the last")

	fleet := observe.FleetMetrics()
	first = fleet[0]
	fleet[0] = nil
	assert.Same(t, first, observe.FleetMetrics()[0])
	for _, m := range observe.FleetMetrics() {
		assert.NotContains(t, again, m, "a fleet family in the breaker metric set")
	}
}

// Reads while calls and transitions go on, under the race detector.
func TestReadsDuringTraffic(t *testing.T) {
	var tr observe.Transitions
	reg, err := registry.New(registry.Options[int]{
		Config:      core.Config{Name: "r", ConsecutiveFailures: 2, OpenDuration: time.Millisecond, CollectMetrics: true, OnStateChange: tr.Listener(nil)},
		MaxBreakers: 4,
	})
	require.NoError(t, err)
	src, err := observe.Registry(reg)
	require.NoError(t, err)
	r := reader(t, src, &tr)
	stop := observetest.Traffic(reg, 6, nil)
	for range 200 {
		n := 0
		require.NoError(t, r.Read(func(s observe.Sample) {
			n++
			states, in := 0, 0
			s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
				if m.Name == "state" {
					states++
					in += int(v.Count)
				}
			})
			assert.Equal(t, core.NumStates, states)
			assert.Equal(t, 1, in, "a breaker is in exactly one state")
		}))
		// A breaker made while the read runs may be read beside the one
		// its making evicted: at most one per key.
		assert.LessOrEqual(t, n, 6)
	}
	stop()
	n := 0
	require.NoError(t, r.Read(func(observe.Sample) { n++ }))
	assert.LessOrEqual(t, n, 4, "with nothing made meanwhile, a read sees at most MaxBreakers")
}

// sliceSource is a Source of the breakers *bs holds at each read.
func sliceSource(bs *[]observe.Breaker) observe.Source {
	return func(yield func(observe.Breaker) bool) {
		for _, b := range *bs {
			if !yield(b) {
				return
			}
		}
	}
}

// One Transitions shared by Readers of other breakers: each read keeps
// the other's names; a name no Source yields is forgotten once every
// Reader has read without finding it, and a Reader that never reads
// keeps every name until it is freed.
func TestTransitionsSharedByReaders(t *testing.T) {
	var tr observe.Transitions
	listen := tr.Listener(nil)
	a, _ := newBreaker(t, "a", listen)
	b, _ := newBreaker(t, "b", listen)
	yielded := []observe.Breaker{a}
	ra := reader(t, sliceSource(&yielded), &tr)
	srcB, err := observe.Breakers(b)
	require.NoError(t, err)
	rb := reader(t, srcB, &tr)
	counted := func(r *observe.Reader) map[string]int {
		out := map[string]int{}
		require.NoError(t, r.Read(func(s observe.Sample) { out[s.Name] = len(s.Transitions) }))
		return out
	}
	a.Disable()
	b.Disable()
	listen(core.Transition{Name: "gone", From: core.Closed, To: core.Open, Reason: core.ReasonManual})
	for range 3 {
		assert.Equal(t, map[string]int{"a": 1}, counted(ra))
		assert.Equal(t, map[string]int{"b": 1}, counted(rb))
	}
	yielded = append(yielded, observetest.Named{Breaker: a, Name: "gone"})
	assert.Equal(t, map[string]int{"a": 1, "gone": 0}, counted(ra), "read by neither after it was counted: forgotten")

	idle := reader(t, srcB, &tr)
	listen(core.Transition{Name: "kept", From: core.Closed, To: core.Open, Reason: core.ReasonManual})
	yielded = []observe.Breaker{a}
	counted(ra)
	counted(rb)
	yielded = append(yielded, observetest.Named{Breaker: a, Name: "kept"})
	assert.Equal(t, map[string]int{"a": 1, "kept": 1}, counted(ra), "a Reader that has not read yet may hold it")
	runtime.KeepAlive(idle)
	idle = nil
	runtime.GC() // frees idle, and its place among the readers
	yielded = []observe.Breaker{a}
	counted(ra)
	counted(rb)
	yielded = append(yielded, observetest.Named{Breaker: a, Name: "kept"})
	assert.Equal(t, map[string]int{"a": 1, "kept": 0}, counted(ra), "the idle Reader is gone: forgotten")
}

func TestJoin(t *testing.T) {
	a, _ := newBreaker(t, "a", nil)
	b, _ := newBreaker(t, "b", nil)
	c, _ := newBreaker(t, "c", nil)
	srcA, err := observe.Breakers(a, b)
	require.NoError(t, err)
	srcC, err := observe.Breakers(c)
	require.NoError(t, err)
	srcs := []observe.Source{srcA, srcC}
	src, err := observe.Join(srcs...)
	require.NoError(t, err)
	srcs[1] = srcA
	var names []string
	for b := range src {
		names = append(names, b.Settings().Name)
		if len(names) == 3 {
			break
		}
	}
	assert.Equal(t, []string{"a", "b", "c"}, names)
	names = nil
	for b := range src {
		names = append(names, b.Settings().Name)
		if len(names) == 1 {
			break // stops the first Source
		}
	}
	assert.Equal(t, []string{"a"}, names)
	_, err = observe.Join(srcA, nil)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "Source 1 of 2 is nil")
}
