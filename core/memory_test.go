package core_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// memoryConfigs are the window kinds and sizes whose memory per breaker
// docs/design.md states: no window (consecutive failures only), count
// windows up to the largest, time windows of 10 s, 1 min and 5 min.
var memoryConfigs = []struct {
	name string
	cfg  core.Config
}{
	{"none", core.Config{ConsecutiveFailures: 5}},
	{"count10", core.Config{WindowSize: 10, FailureRateThreshold: 50}},
	{"count100", core.Config{WindowSize: 100, FailureRateThreshold: 50}},
	{"count255", core.Config{WindowSize: core.MaxCountWindow, FailureRateThreshold: 50}},
	{"time10", core.Config{WindowType: core.TimeBased, WindowSize: 10, FailureRateThreshold: 50}},
	{"time60", core.Config{WindowType: core.TimeBased, WindowSize: 60, FailureRateThreshold: 50}},
	{"time300", core.Config{WindowType: core.TimeBased, WindowSize: 300, FailureRateThreshold: 50}},
}

// withListener is cfg with a listener that does nothing.
func withListener(cfg core.Config) core.Config {
	cfg.OnStateChange = func(core.Transition) {}
	return cfg
}

// cycle commits two transitions (forced open, then closed), so that memory
// a breaker takes only when it first notifies is counted too.
func cycle(tb testing.TB, b breakers.Breaker) {
	require.NoError(tb, b.ForceOpen(0))
	b.Reset()
}

// heldPerBreaker is the heap one breaker holds, in bytes: n breakers built
// by newB from cfg, each then driven by drive when it is not nil, kept
// alive, measured as the growth of runtime.MemStats.HeapAlloc between two
// garbage collections, divided by n. Unlike B/op it leaves out what New
// allocates and drops, and it counts what the breaker allocates later
// (drive).
func heldPerBreaker(tb testing.TB, newB func(core.Config) (breakers.Breaker, error), cfg core.Config, n int,
	drive func(testing.TB, breakers.Breaker)) float64 {
	tb.Helper()
	keep := make([]breakers.Breaker, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		b, err := newB(cfg)
		require.NoError(tb, err)
		if drive != nil {
			drive(tb, b)
		}
		keep[i] = b
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// A listener costs a breaker less than 1 KiB, in both implementations,
// before and after its first notifications: 1,000 breakers with a listener
// hold at most 1,024 B each more than 1,000 without. (The lock-free
// dispatcher once held 256 event slots, 10.9 KB per breaker.)
func TestListenerCostsUnderOneKiB(t *testing.T) {
	const n = 1000
	for _, c := range memoryConfigs[:3] { // the listener's cost does not depend on the window
		for _, drive := range []struct {
			name string
			fn   func(testing.TB, breakers.Breaker)
		}{{"new", nil}, {"notified", cycle}} {
			t.Run("window="+c.name+"/"+drive.name, func(t *testing.T) {
				forEachImpl(t, func(t *testing.T, mk maker) {
					plain := heldPerBreaker(t, mk.new, c.cfg, n, drive.fn)
					listening := heldPerBreaker(t, mk.new, withListener(c.cfg), n, drive.fn)
					t.Logf("%.0f B without a listener, %.0f B with", plain, listening)
					require.LessOrEqual(t, listening-plain, 1024.0, "the listener's cost per breaker")
				})
			})
		}
	}
}

// BenchmarkBreakerMemory measures the memory of one breaker for each
// window kind and size, with and without a listener, in both
// implementations: B/breaker is the heap one breaker holds after two
// notifications (heldPerBreaker over 1,000 breakers), B/op what New
// allocates, size classes included. A time window's success stripes grow
// with GOMAXPROCS up to 8, so its rows run at GOMAXPROCS 2 (the project's
// VM) and 8 (the most stripes), set inside the benchmark: under -cpu the
// first run of a sub-benchmark can run at the previous setting.
// docs/design.md records the figures.
func BenchmarkBreakerMemory(b *testing.B) {
	for _, c := range memoryConfigs {
		procs := []int{0} // GOMAXPROCS does not matter
		if c.cfg.WindowType == core.TimeBased {
			procs = []int{2, 8}
		}
		for _, p := range procs {
			for _, listen := range []bool{false, true} {
				cfg := c.cfg
				if listen {
					cfg = withListener(cfg)
				}
				name := "window=" + c.name
				if p != 0 {
					name += fmt.Sprintf("/gomaxprocs=%d", p)
				}
				name += "/listener=" + map[bool]string{false: "no", true: "yes"}[listen]
				for _, im := range impls {
					b.Run(name+"/impl="+im.Name, func(b *testing.B) {
						if p != 0 {
							defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
						}
						b.ReportAllocs()
						for b.Loop() {
							if _, err := im.New(cfg); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(heldPerBreaker(b, im.New, cfg, 1000, cycle), "B/breaker")
					})
				}
			}
		}
	}
}
