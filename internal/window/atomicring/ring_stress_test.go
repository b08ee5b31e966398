package atomicring

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/window"
)

// The tests here run many goroutines against one ring. Under any
// interleaving the ring must behave as if the calls had happened one at a
// time in the order of their commits; each test picks outcomes so that the
// result of that order can be checked without knowing it.

var goroutineCounts = []int{8, 64}

// mix is the outcome of call i of goroutine g: a spread of all four kinds.
func mix(g, i int) (fail, slow bool) {
	k := (g*7 + i*3) % 4
	return k&1 != 0, k&2 != 0
}

// unit is one outcome as Counts, to add up.
func unit(fail, slow bool) window.Counts {
	c := window.Counts{Calls: 1}
	if fail {
		c.Failures = 1
	}
	if slow {
		c.SlowCalls = 1
	}
	if fail && slow {
		c.SlowFailures = 1
	}
	return c
}

func plus(a, b window.Counts) window.Counts {
	return window.Counts{
		Calls:        a.Calls + b.Calls,
		Failures:     a.Failures + b.Failures,
		SlowCalls:    a.SlowCalls + b.SlowCalls,
		SlowFailures: a.SlowFailures + b.SlowFailures,
	}
}

// contains reports whether c can be a window that holds the outcome
// (fail, slow): the result of Record always includes the call's own outcome.
func contains(c window.Counts, fail, slow bool) bool {
	u := unit(fail, slow)
	return c.Calls >= 1 && c.Failures >= u.Failures && c.SlowCalls >= u.SlowCalls &&
		c.SlowFailures >= u.SlowFailures &&
		(fail || c.Failures < c.Calls) && (slow || c.SlowCalls < c.Calls)
}

// firstError keeps the first failure a goroutine reports, so that a broken
// ring gives one readable message instead of thousands.
type firstError struct {
	once sync.Once
	msg  string
}

func (e *firstError) set(format string, args ...any) {
	e.once.Do(func() { e.msg = fmt.Sprintf(format, args...) })
}

// run starts n goroutines that wait on one start signal, so that they
// collide, and waits for all of them.
func run(n int, f func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(g)
		}()
	}
	close(start)
	wg.Wait()
}

// TestConcurrent_FirstLapIsLinearizable: until the window is full, Calls in
// a result is the position of that call in the commit order, which makes
// the order observable. Every result must then equal the sum of the
// outcomes committed up to it. Each round starts a new generation, so the
// goroutines also race the lazy reset.
func TestConcurrent_FirstLapIsLinearizable(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 15
	}
	for _, gs := range goroutineCounts {
		t.Run(fmt.Sprintf("G=%d", gs), func(t *testing.T) {
			r := mustNew(t, MaxSize)
			per := MaxSize / gs
			type call struct {
				fail, slow bool
				got        window.Counts
				ok         bool
			}
			for round := 1; round <= rounds; round++ {
				gen := uint32(round)
				calls := make([][]call, gs)
				run(gs, func(g int) {
					for i := 0; i < per; i++ {
						fail, slow := mix(g+round, i)
						got, ok := r.Record(gen, fail, slow)
						calls[g] = append(calls[g], call{fail, slow, got, ok})
					}
				})
				var all []call
				for _, cs := range calls {
					all = append(all, cs...)
				}
				sort.Slice(all, func(i, j int) bool { return all[i].got.Calls < all[j].got.Calls })
				var sum window.Counts
				for i, c := range all {
					require.True(t, c.ok, "round %d", round)
					sum = plus(sum, unit(c.fail, c.slow))
					require.Equal(t, sum, c.got, "round %d, commit %d", round, i+1)
				}
				require.Equal(t, sum, r.Snapshot(gen), "round %d", round)
			}
		})
	}
}

// TestConcurrent_InvariantsHold: writers record a mix while a reader checks
// every snapshot and every writer checks its own result: the invariants of
// window.Counts, and that the result includes the call's own outcome (for
// W = 1, is exactly it). Then two phases whose result does not depend on
// the order: at least W successes leave an all-success full window, then at
// least W slow failures an all-slow-failure one.
func TestConcurrent_InvariantsHold(t *testing.T) {
	total := 40_000
	if testing.Short() {
		total = 4_000
	}
	for _, size := range []int{1, 3, 100, MaxSize} {
		for _, gs := range goroutineCounts {
			t.Run(fmt.Sprintf("W=%d/G=%d", size, gs), func(t *testing.T) {
				r := mustNew(t, size)
				var bad firstError
				check := func(c window.Counts, what string) {
					if v := violation(c, size); v != "" {
						bad.set("%s: %s", what, v)
					}
				}

				stop := make(chan struct{})
				buf := make([]uint8, size)
				var reads atomic.Uint64
				var reader sync.WaitGroup
				reader.Add(1)
				first := make(chan struct{}) // the writers start after the reader's first read
				go func() {
					defer reader.Done()
					for {
						check(r.Snapshot(1), "snapshot")
						n, _ := r.Calls(1, buf)
						check(sumOf(buf[:n]), "calls")
						if reads.Inc() == 1 {
							close(first)
						}
						select {
						case <-stop:
							return
						default:
						}
					}
				}()
				<-first

				per := total / gs
				run(gs, func(g int) {
					for i := 0; i < per; i++ {
						fail, slow := mix(g, i)
						c, ok := r.Record(1, fail, slow)
						switch {
						case !ok:
							bad.set("Record of the current generation reported stale")
						case !contains(c, fail, slow):
							bad.set("result %+v misses its own outcome fail=%v slow=%v", c, fail, slow)
						case size == 1 && c != unit(fail, slow):
							bad.set("W=1: result %+v is not just its own outcome", c)
						}
						check(c, "record")
					}
				})
				close(stop)
				reader.Wait()
				require.Empty(t, bad.msg)
				require.NotZero(t, reads.Load())
				full := window.Counts{Calls: uint64(size)}
				if per*gs >= size {
					require.Equal(t, full.Calls, r.Snapshot(1).Calls)
				}

				perPhase := size/gs + 1
				run(gs, func(int) {
					for i := 0; i < perPhase; i++ {
						r.Record(1, false, false)
					}
				})
				assert.Equal(t, full, r.Snapshot(1), "after W successes")

				run(gs, func(int) {
					for i := 0; i < perPhase; i++ {
						r.Record(1, true, true)
					}
				})
				w := uint64(size)
				assert.Equal(t, window.Counts{Calls: w, Failures: w, SlowCalls: w, SlowFailures: w}, r.Snapshot(1), "after W slow failures")
				assert.Equal(t, strings.Repeat("\x03", size), callsOf(r, 1), "Calls after W slow failures")
			})
		}
	}
}

// TestConcurrent_StaleGenerationNeverCounts: writers of generation 1 record
// only failures while writers of generation 2 record only successes. Once
// the ring holds generation 2, no failure may ever show in it, a generation
// 1 call must never be accepted again, and every generation 2 call counts.
func TestConcurrent_StaleGenerationNeverCounts(t *testing.T) {
	perWriter := 2_000
	if testing.Short() {
		perWriter = 300
	}
	for _, gs := range goroutineCounts {
		t.Run(fmt.Sprintf("G=%d", gs), func(t *testing.T) {
			r := mustNew(t, MaxSize)
			var bad firstError
			var newCalls atomic.Uint64
			run(gs, func(g int) {
				if g%2 == 0 {
					rejected := false
					for i := 0; i < perWriter; i++ {
						c, ok := r.Record(1, true, i%2 == 0)
						switch {
						case rejected && ok:
							bad.set("generation 1 accepted after it was rejected: %+v", c)
						case !ok:
							rejected = true
						}
					}
					return
				}
				for i := 0; i < perWriter; i++ {
					c, ok := r.Record(2, false, i%2 == 0)
					if !ok {
						bad.set("a generation 2 call was rejected")
					}
					newCalls.Inc()
					if c.Failures != 0 {
						bad.set("generation 1 failure counted in generation 2: %+v", c)
					}
					if s := r.Snapshot(2); s.Failures != 0 {
						bad.set("snapshot of generation 2 has failures: %+v", s)
					}
				}
			})
			require.Empty(t, bad.msg)
			c := r.Snapshot(2)
			assert.Equal(t, min(newCalls.Load(), MaxSize), c.Calls)
			assert.Zero(t, c.Failures)
			assert.Zero(t, r.Snapshot(1))
			_, ok := r.Record(1, true, true)
			assert.False(t, ok)
		})
	}
}

// TestConcurrent_GenerationChurn: the writers keep moving the generation
// on, across the 16-bit wrap, and record under the generation they saw
// before, which may already be superseded, so that resets, stale calls and
// claims of two generations interleave. Afterwards the ring must still be
// live and exact: W calls of a newer generation make a full window of them.
func TestConcurrent_GenerationChurn(t *testing.T) {
	per := 5_000
	if testing.Short() {
		per = 500
	}
	for _, size := range []int{1, 3, MaxSize} {
		for _, gs := range goroutineCounts {
			t.Run(fmt.Sprintf("W=%d/G=%d", size, gs), func(t *testing.T) {
				r := mustNew(t, size)
				// Walk the ring from generation 0 to 0xFFF0 in steps of
				// less than 2^15, so that each is newer, to cross the 16-bit
				// wrap soon. The churn adds at most gs*per/37 < 2^15, so no
				// writer's view falls 2^15 behind.
				for _, gen := range []uint32{0x7FFF, 0xFFF0} {
					_, ok := r.Record(gen, false, false)
					require.True(t, ok)
				}
				var cur atomic.Uint32
				cur.Store(0xFFF0)
				var bad firstError
				run(gs, func(g int) {
					for i := 0; i < per; i++ {
						gen := cur.Load()
						if (g+i)%37 == 0 {
							cur.CompareAndSwap(gen, gen+1)
						}
						fail, slow := mix(g, i)
						c, ok := r.Record(gen, fail, slow)
						if ok && !contains(c, fail, slow) {
							bad.set("result %+v misses its own outcome", c)
						}
						if v := violation(c, size); v != "" {
							bad.set("record: %s", v)
						}
						if v := violation(r.Snapshot(gen), size); v != "" {
							bad.set("snapshot: %s", v)
						}
					}
				})
				require.Empty(t, bad.msg)
				require.Greater(t, cur.Load(), uint32(0xFFFF), "the churn must cross the 16-bit wrap")

				next := cur.Load() + 1
				for i := 0; i < size; i++ {
					_, ok := r.Record(next, i%2 == 0, false)
					require.True(t, ok)
				}
				w := uint64(size)
				assert.Equal(t, window.Counts{Calls: w, Failures: (w + 1) / 2}, r.Snapshot(next))
			})
		}
	}
}

// TestConcurrent_CallsAreOneWindow: one writer records a known sequence
// of pseudo-random calls while readers take Calls; every read must be the
// last n calls, in order, of the sequence up to some point the writer
// passed during the read: one committed state of the window, never a mix
// of two (a slot rewritten under the reader, or A's pend paired with older
// slots).
func TestConcurrent_CallsAreOneWindow(t *testing.T) {
	total := 200_000
	if testing.Short() {
		total = 40_000
	}
	seq := make([]uint8, total)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range seq {
		seq[i] = uint8(rng.IntN(4))
	}
	for _, size := range []int{1, 3, 100, MaxSize} {
		t.Run(fmt.Sprintf("W=%d", size), func(t *testing.T) {
			r := mustNew(t, size)
			var written atomic.Int64 // calls recorded: raised after each Record returns
			var bad firstError
			var reads atomic.Uint64
			done := make(chan struct{})
			var readers, started sync.WaitGroup
			for range 2 {
				readers.Add(1)
				started.Add(1)
				go func() {
					defer readers.Done()
					buf := make([]uint8, size)
					for first := true; ; first = false {
						lo := int(written.Load())
						n, _ := r.Calls(1, buf)
						hi := min(int(written.Load())+1, total) // a Record may have committed, not yet counted
						reads.Inc()
						if !windowAt(seq, buf[:n], size, lo, hi) {
							bad.set("Calls %v (between %d and %d calls recorded) is no window of the sequence then", buf[:n], lo, hi)
						}
						if first {
							started.Done() // the writer starts after each reader's first read
						}
						select {
						case <-done:
							return
						default:
						}
					}
				}()
			}
			started.Wait()
			for i, c := range seq {
				r.Record(1, c&1 != 0, c&2 != 0)
				written.Store(int64(i + 1))
			}
			close(done)
			readers.Wait()
			require.Empty(t, bad.msg)
			require.NotZero(t, reads.Load())
		})
	}
}

// windowAt reports whether calls is the window of size after the first k
// calls of seq, for some k in lo..hi: its last min(k, size) calls.
func windowAt(seq, calls []uint8, size, lo, hi int) bool {
	for k := lo; k <= hi; k++ {
		if n := min(k, size); n == len(calls) && string(seq[k-n:k]) == string(calls) {
			return true
		}
	}
	return false
}

// TestConcurrent_SealKeepsEveryRecordedOutcome: goroutines record into a
// ring (never filling it) while another seals it. Every Record that
// reported true is in what Seal copied, in each of its classes, and none
// that reported false is; every Record after the seal reports false, as
// does a claim of any of the 2^14-1 generations before the sealed one; and
// a second Seal copies the same.
func TestConcurrent_SealKeepsEveryRecordedOutcome(t *testing.T) {
	const size, per = 255, 7
	for _, n := range goroutineCounts {
		n := min(n, size/per)
		for round := range 200 {
			r, err := New(size)
			require.NoError(t, err)
			const gen = 40000 // near the 16-bit wrap of the sealed generation
			r.Reset(gen)
			var kept [4]atomic.Int64 // recorded outcomes by class
			var start, done sync.WaitGroup
			start.Add(1)
			done.Add(n + 1)
			calls := make([]uint8, size)
			var sealed int
			go func() {
				defer done.Done()
				start.Wait()
				for range round % 16 {
					r.Snapshot(gen) // let the writers get going first, by a varying amount
				}
				sealed, _ = r.Seal(gen, calls)
			}()
			for g := range n {
				go func() {
					defer done.Done()
					start.Wait()
					for i := range per {
						fail, slow := mix(g, i)
						if _, ok := r.Record(gen, fail, slow); ok {
							kept[b2i(fail)|b2i(slow)<<1].Inc()
						}
					}
				}()
			}
			start.Done()
			done.Wait()
			var copied [4]int64
			for _, c := range calls[:sealed] {
				copied[c&3]++
			}
			for k := range kept {
				require.Equal(t, kept[k].Load(), copied[k], "class %d, round %d, %d writers", k, round, n)
			}
			again := make([]uint8, size)
			m, _ := r.Seal(gen, again)
			require.Equal(t, calls[:sealed], again[:m], "a second Seal")
			for _, g := range []uint32{gen, gen - 1, gen - 1<<14 + 1} {
				_, ok := r.Record(g, true, false)
				require.False(t, ok, "a claim of generation %d after the seal", g)
			}
			r.Advance(gen)
			m, _ = r.Seal(gen, again)
			require.Equal(t, sealed, m, "an Advance of the sealed generation undid the seal")
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A Reset to the sealed generation, from a record that found it current
// just before the seal, leaves the seal and its window as they were.
func TestSeal_ResetToTheSealedGenerationKeepsIt(t *testing.T) {
	r, err := New(4)
	require.NoError(t, err)
	r.Reset(7)
	_, ok := r.Record(7, true, false)
	require.True(t, ok)
	calls := make([]uint8, 4)
	n, _ := r.Seal(7, calls)
	require.Equal(t, 1, n)
	r.Reset(7)
	m, _ := r.Seal(7, calls)
	require.Equal(t, 1, m, "the Reset undid the seal")
	_, ok = r.Record(7, true, false)
	require.False(t, ok)
}

// Reset tells a sealed ring from one whose generation reached gen+2^14 by
// records alone: that one it takes back to gen, as it would from any
// generation (FuzzAtomicRing found a Reset refused there, when the seal
// was read from A's generation, and the outcome that followed dropped as
// stale).
func TestReset_TakesBackAGenerationSealAheadWithoutASeal(t *testing.T) {
	r, err := New(4)
	require.NoError(t, err)
	_, ok := r.Record(7+sealAhead, true, false)
	require.True(t, ok)
	r.Reset(7)
	c, ok := r.Record(7, true, true)
	require.True(t, ok, "the Reset was refused")
	require.Equal(t, window.Counts{Calls: 1, Failures: 1, SlowCalls: 1, SlowFailures: 1}, c)
}
