package race_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/casbreaker/casbreaker/core"
)

// linFamily is one kind of history: a config, how many clients run how many
// operations per phase, and how the clock moves.
type linFamily struct {
	name    string
	cfg     core.Config
	clients int
	ops     int // operations per client per phase (plus the Done calls of held permits)
	phases  int
	// stepping: two clients also step the clock, concurrently with the
	// others; otherwise the clock only moves between phases.
	stepping bool
	steps    []time.Duration
	// view is what the history keeps of Counts results; nil keeps all.
	view countsView
	// reconfigs are the configs a third client of a stepping family
	// reconfigures the breaker to, concurrently with the others
	// (docs/semantics.md R18); none: no Reconfigure. reconfigurable
	// derives them from cfg.
	reconfigs []core.Config
}

// reconfigurable is f with a few configs to reconfigure to, each a
// change of cfg: the probes (fewer, so that kept counts reach a verdict
// at once, or more), and change, which changes the family's trip rule,
// keeping or dropping the window and the run of failures. Each keeps the
// model's classifier, so that a reconfiguration changes no outcome's
// class.
func (f linFamily) reconfigurable(change func(*core.Config)) linFamily {
	alt := func(edit func(*core.Config)) core.Config {
		c := f.cfg
		c.Classifier = classify
		edit(&c)
		return c
	}
	f.reconfigs = []core.Config{
		alt(func(c *core.Config) { c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.FailuresToReopen = 1, 1, 1 }),
		alt(func(c *core.Config) { c.PermittedCallsInHalfOpen, c.SuccessesToClose = 4, 3 }),
		alt(change),
		alt(func(*core.Config) {}),
	}
	return f
}

func (f linFamily) countsView() countsView {
	if f.view == nil {
		return fullCounts
	}
	return f.view
}

var linFamilies = []linFamily{
	linFamily{
		name: "count-window/stepping",
		cfg: core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
			OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, SuccessesToClose: 2},
		clients: 5, ops: 4, phases: 3, stepping: true,
		steps: []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond, time.Second},
	}.reconfigurable(func(c *core.Config) { c.WindowSize, c.MinimumNumberOfCalls, c.FailureRateThreshold = 2, 2, 100 }),
	linFamily{
		name: "consecutive/backoff/stepping",
		cfg: core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, OpenDurationBackoff: 2,
			MaxOpenDuration: 4 * time.Second, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2},
		clients: 5, ops: 4, phases: 3, stepping: true,
		steps: []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second},
	}.reconfigurable(func(c *core.Config) {
		c.ConsecutiveFailures, c.OpenDuration, c.MaxOpenDuration = 1, 700*time.Millisecond, time.Second
	}),
	linFamily{
		// A count window that never decides (100 % of 4 calls needs a run
		// of 4 failures, and 2 in a row trip first): every Record takes the
		// two-step path of a windowed breaker, window add then CAS, but only
		// the state word decides. Counts results keep the state word's
		// fields only (wordCounts): the run of failures and the window are
		// two words, and a trip by the run does not close the window
		// (docs/design.md, Known limits).
		name: "count-window/consecutive-decides/stepping",
		cfg: core.Config{WindowSize: 4, FailureRateThreshold: 100, ConsecutiveFailures: 2,
			OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, SuccessesToClose: 2},
		clients: 5, ops: 4, phases: 3, stepping: true,
		steps: []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond, time.Second},
		view:  wordCounts,
	}.reconfigurable(func(c *core.Config) { c.ConsecutiveFailures = 3 }),
	linFamily{
		// A cap that refuses every trip (an OpenGate of no slots, as a
		// registry's share when others hold it): every trip commits
		// closed -> closed, capped, a new generation with a fresh window,
		// so stale permits and the window's reset are what is checked.
		name: "count-window/capped/stepping",
		cfg: core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
			OpenDuration: time.Second, OpenGate: noSlots{}},
		clients: 5, ops: 4, phases: 3, stepping: true,
		steps: []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond, time.Second},
	}.reconfigurable(func(c *core.Config) { c.WindowSize, c.MinimumNumberOfCalls = 3, 3 }),
	linFamily{
		// The open duration from a function of the re-open count and the
		// error, and jitter: the function runs before the trip's claim in
		// the lock-free breaker, under the mutex in the model. With the run
		// of failures deciding and no window, every trip is committed by
		// the call that decided it (docs/design.md, Open duration from a
		// function, and jitter). Half-open by a ratio: the second probe
		// failure re-opens, so up to three probe outcomes count.
		name: "consecutive/open-duration-function/jitter/ratio/stepping",
		cfg: core.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, MaxOpenDuration: 3 * time.Second,
			OpenDurationJitter: 0.5, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2, FailuresToReopen: 2,
			OpenDurationFunc: func(reopens int, _ error) time.Duration {
				return time.Duration(reopens+1) * 700 * time.Millisecond // bounded at 3 s
			}},
		clients: 5, ops: 4, phases: 3, stepping: true,
		steps: []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second},
	}.reconfigurable(func(c *core.Config) { c.FailuresToReopen, c.OpenDurationJitter = 1, 0 }),
	{
		name: "time-window/500ms-buckets/slow/frozen-phases",
		cfg: core.Config{WindowType: core.TimeBased, WindowSize: 2, BucketWidth: 500 * time.Millisecond, FailureCountThreshold: 2,
			SlowCallRateThreshold: 50, SlowCallDurationThreshold: 400 * time.Millisecond, MinimumNumberOfCalls: 3,
			OpenDuration: 800 * time.Millisecond, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2},
		clients: 6, ops: 4, phases: 4,
		steps: []time.Duration{0, 500 * time.Millisecond, 900 * time.Millisecond, 2 * time.Second},
	},
}

// noSlots is an OpenGate with no slot to give: every trip is capped. It
// keeps no state, so the model's replays and the real breaker see the same
// gate.
type noSlots struct{}

func (noSlots) TryAcquire() bool { return false }
func (noSlots) Acquire()         {}
func (noSlots) Release()         {}

// Linearizability (R13, and through it R1-R12). Real goroutines run small
// random programs of Allow, Done (success, failure, cancellation, an ignored
// error; often on a permit held across other operations), State, Counts and
// clock steps against one breaker; the history of calls and returns is then
// checked with porcupine against the sequential model (the baseline replayed
// by one goroutine, model_test.go). A history is accepted only if some
// order of its operations, consistent with real time, gives every operation
// exactly the output it really returned: every permit with its generation,
// probe flag and start, every rejection kind and wait, every state and
// every Counts snapshot field by field.
//
// Porcupine's search is exponential in concurrency, so histories are small
// (5 or 6 clients, 3 or 4 phases of 4 operations each, 60 to 100 operations)
// and many, and the model's states are the breaker's fingerprint, so that
// orders reaching the same breaker are one state (model_test.go): a check
// takes milliseconds, and even the exhaustive search of a history with no
// valid order ends in about a second, far inside the minute after which
// porcupine answers Unknown, which fails the test as Illegal does
// (docs/verification.md has the figures under load). The clock moves either concurrently, as an operation of two
// clients (count window, consecutive failures: every operation there reads
// the clock at most once, which is what makes a concurrent step atomic with
// respect to it), or between phases (time window with slow calls, whose
// Record reads the clock twice).
func TestLinearizable(t *testing.T) {
	procs(t, 4)
	histories := size(400, 50)
	for _, fam := range linFamilies {
		t.Run(fam.name, func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, newB newFunc) {
				var ops, steps, reconfigs atomic.Int64
				var kinds [4]int // histories that saw open, half-open, a capped trip
				// Each history is checked on a goroutine of its own while
				// the next one is recorded, one check at a time: recording
				// keeps about one core busy, and so does a check.
				var check sync.Mutex // held by the check in flight
				var checks sync.WaitGroup
				var slowest time.Duration // the longest check, under check
				slowestRound := 0
				var illegal atomic.Pointer[string]
				for round := range histories {
					if illegal.Load() != nil {
						break
					}
					seed := uint64(round)
					hist, reached := recordHistory(t, newB, fam, seed)
					ops.Add(int64(len(hist)))
					for _, op := range hist {
						if op.Input.(linIn).kind == linReconfig {
							reconfigs.Add(1)
						}
					}
					for s := range reached {
						if reached[s] {
							kinds[s]++
						}
					}
					cfg := fam.cfg
					cfg.Classifier = classify
					check.Lock()
					checks.Go(func() {
						defer check.Unlock()
						began := time.Now()
						res := porcupine.CheckOperationsTimeout(linModel(cfg, 0, fam.countsView(), &steps), hist, time.Minute)
						took := time.Since(began)
						if took > slowest {
							slowest, slowestRound = took, round
						}
						if res != porcupine.Ok {
							msg := fmt.Sprintf("history %d (seed %d) is %s against the sequential model (checked in %v):\n%s", round, seed, res, took.Round(time.Microsecond), describeHistory(hist))
							illegal.CompareAndSwap(nil, &msg)
						}
					})
				}
				checks.Wait()
				if msg := illegal.Load(); msg != nil {
					t.Fatal(*msg)
				}
				t.Logf("%d histories, %d operations (%d reconfigurations), %d model steps; histories that saw open: %d, half-open: %d, a capped trip: %d; slowest check %v (history %d)",
					histories, ops.Load(), reconfigs.Load(), steps.Load(), kinds[core.Open], kinds[core.HalfOpen], kinds[reachedCapped], slowest.Round(time.Microsecond), slowestRound)
				if fam.cfg.OpenGate != nil {
					// Every trip is capped: none opens, and enough happen.
					if kinds[core.Open] > 0 || kinds[reachedCapped] < histories/4 {
						t.Fatalf("%d of %d histories saw open, %d a capped trip: the gate let a trip open, or the histories are too tame", kinds[core.Open], histories, kinds[reachedCapped])
					}
				} else if kinds[core.HalfOpen] < histories/4 {
					t.Fatalf("only %d of %d histories reached half-open: too tame", kinds[core.HalfOpen], histories)
				}
			})
		})
	}
}

// reachedCapped indexes recordHistory's reached: a capped trip happened (a
// closed permit of a later generation, under a gate that opens nothing).
const reachedCapped = 3

// recordHistory runs one history of fam on a fresh breaker and returns it,
// with which states (by core.State) some operation observed, and whether
// a capped trip happened.
func recordHistory(t *testing.T, newB newFunc, fam linFamily, seed uint64) ([]porcupine.Operation, [4]bool) {
	cfg := fam.cfg
	clk := core.NewManualClock(0)
	// Both the clock and the classifier yield the processor: a goroutine is
	// then often descheduled between an implementation's load and its CAS
	// (the lock-free Allow reads the clock in between in open state, Record
	// on the way to a trip) and in the middle of Done, so operations really
	// overlap instead of running one after another.
	cfg.Clock = yieldingClock{clk}
	cfg.Classifier = func(err error) core.Outcome {
		runtime.Gosched()
		return classify(err)
	}
	b := mustNew(t, newB, cfg)
	h := newHistorian(b, clk, fam.countsView(), fam.clients+1)
	coord := fam.clients // the client that steps the clock between phases
	rng := rand.New(rand.NewPCG(seed, 99))
	for phase := range fam.phases {
		seeds := make([]uint64, fam.clients)
		for i := range seeds {
			seeds[i] = rng.Uint64()
		}
		parallel(fam.clients, func(i int) {
			crng := rand.New(rand.NewPCG(seeds[i], uint64(phase)))
			var held []core.Permit
			for range fam.ops {
				switch r := crng.IntN(20); {
				case r < 7 && len(held) > 0:
					k := crng.IntN(len(held))
					h.do(i, linIn{kind: linDone, p: held[k], err: pickErr(crng)})
					held = append(held[:k], held[k+1:]...)
				case r < 13:
					if out := h.do(i, linIn{kind: linAllow}); out.rej == rejNone {
						held = append(held, out.p)
					}
				case r < 15:
					h.do(i, linIn{kind: linState})
				case r < 17:
					h.do(i, linIn{kind: linCounts})
				case fam.stepping && i < 2:
					h.do(i, linIn{kind: linAdvance, d: fam.steps[crng.IntN(len(fam.steps))]})
				case len(fam.reconfigs) > 0 && i == 2:
					// In place of a State: the family's operation count,
					// and so its checks' time, stays as it was.
					h.do(i, linIn{kind: linReconfig, c: &fam.reconfigs[crng.IntN(len(fam.reconfigs))]})
				default:
					h.do(i, linIn{kind: linState})
				}
			}
			for _, p := range held {
				h.do(i, linIn{kind: linDone, p: p, err: pickErr(crng)})
			}
		})
		h.do(coord, linIn{kind: linAdvance, d: fam.steps[rng.IntN(len(fam.steps))]})
	}
	hist := h.history()
	var reached [4]bool
	for _, op := range hist {
		in, out := op.Input.(linIn), op.Output.(linOut)
		switch {
		case fam.cfg.OpenGate != nil && in.kind == linAllow && out.rej == rejNone && !out.p.Probe && out.p.Generation > 0:
			reached[reachedCapped] = true
		case in.kind == linState && out.st <= core.HalfOpen:
			reached[out.st] = true
		case in.kind == linAllow && out.rej == rejOpen:
			reached[core.Open] = true
		case in.kind == linAllow && out.p.Probe:
			reached[core.HalfOpen] = true
		}
	}
	return hist, reached
}

// yieldingClock is a manual clock whose every reading yields the processor
// first.
type yieldingClock struct{ *core.ManualClock }

func (c yieldingClock) Now() time.Duration {
	runtime.Gosched()
	return c.ManualClock.Now()
}

// pickErr draws a Done error: failures are the most common, so the
// breaker trips and re-opens often.
func pickErr(rng *rand.Rand) int {
	switch r := rng.IntN(10); {
	case r < 5:
		return 1 // failure
	case r < 8:
		return 0 // success
	case r < 9:
		return 2 // cancelled: ignored
	}
	return 3 // ignored by the classifier
}

// The checker can fail: hand-made histories that no sequential order
// explains are rejected, and their one-operation repairs are accepted.
// Config: one failure trips, open 1 s, one probe.
func TestLinearizabilityCheckerRejects(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Classifier: classify}
	g0 := core.Permit{Generation: 0}
	probe := core.Permit{Generation: 2, Probe: true}
	op := func(client int, call, ret int64, in linIn, out linOut) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	// The prefix: a failure trips the breaker at t=0; the clock reaches the
	// deadline.
	prefix := []porcupine.Operation{
		op(0, 1, 2, linIn{kind: linAllow}, linOut{p: g0}),
		op(0, 3, 4, linIn{kind: linDone, p: g0, err: 1}, linOut{}),
		op(0, 5, 6, linIn{kind: linAdvance, d: time.Second}, linOut{}),
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"two concurrent callers both get the one probe (R6)", []porcupine.Operation{
			op(1, 7, 10, linIn{kind: linAllow}, linOut{p: probe}),
			op(2, 8, 11, linIn{kind: linAllow}, linOut{p: probe}),
		}, porcupine.Illegal},
		// The refusal carries the default half-open-full wait, a tenth of
		// the open duration: 100 ms, shorter than the time left of the
		// default max wait (61.006 s - 1 s).
		{"one probe, one refusal", []porcupine.Operation{
			op(1, 7, 10, linIn{kind: linAllow}, linOut{p: probe}),
			op(2, 8, 11, linIn{kind: linAllow}, linOut{p: core.Permit{RetryAfter: 100 * time.Millisecond}, rej: rejHalfOpenFull}),
		}, porcupine.Ok},
		{"one probe, one refusal without the half-open-full wait", []porcupine.Operation{
			op(1, 7, 10, linIn{kind: linAllow}, linOut{p: probe}),
			op(2, 8, 11, linIn{kind: linAllow}, linOut{rej: rejHalfOpenFull}),
		}, porcupine.Illegal},
		{"a stale failure re-opens a closed breaker (R8)", []porcupine.Operation{
			op(1, 7, 8, linIn{kind: linAllow}, linOut{p: probe}),
			op(1, 9, 10, linIn{kind: linDone, p: probe, err: 0}, linOut{}),
			op(1, 11, 12, linIn{kind: linDone, p: g0, err: 1}, linOut{}),
			op(2, 13, 14, linIn{kind: linState}, linOut{st: core.Open}),
		}, porcupine.Illegal},
		{"a stale failure changes nothing", []porcupine.Operation{
			op(1, 7, 8, linIn{kind: linAllow}, linOut{p: probe}),
			op(1, 9, 10, linIn{kind: linDone, p: probe, err: 0}, linOut{}),
			op(1, 11, 12, linIn{kind: linDone, p: g0, err: 1}, linOut{}),
			op(2, 13, 14, linIn{kind: linState}, linOut{st: core.Closed}),
		}, porcupine.Ok},
		{"a read sees the probe's success before the probe was granted", []porcupine.Operation{
			op(2, 7, 8, linIn{kind: linState}, linOut{st: core.Closed}),
			op(1, 9, 10, linIn{kind: linAllow}, linOut{p: probe}),
			op(1, 11, 12, linIn{kind: linDone, p: probe, err: 0}, linOut{}),
		}, porcupine.Illegal},
		{"the same read overlapping the probe", []porcupine.Operation{
			op(2, 7, 13, linIn{kind: linState}, linOut{st: core.Closed}),
			op(1, 9, 10, linIn{kind: linAllow}, linOut{p: probe}),
			op(1, 11, 12, linIn{kind: linDone, p: probe, err: 0}, linOut{}),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps atomic.Int64
			hist := append(append([]porcupine.Operation(nil), prefix...), tc.ops...)
			res := porcupine.CheckOperationsTimeout(linModel(cfg, 0, fullCounts, &steps), hist, time.Minute)
			if res != tc.want {
				t.Fatalf("checker says %s, want %s, for:\n%s", res, tc.want, describeHistory(hist))
			}
		})
	}
}
