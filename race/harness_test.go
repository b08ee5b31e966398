package race_test

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// impls is the one table every test here runs against: the lock-free core and
// the mutex baseline, behind the breakers.Breaker contract.
var impls = breakers.All

type newFunc = func(core.Config) (breakers.Breaker, error)

// forEachImpl runs fn once per implementation, as subtest "impl=<name>".
func forEachImpl(t *testing.T, fn func(t *testing.T, newB newFunc)) {
	t.Helper()
	for _, im := range impls {
		t.Run("impl="+im.Name, func(t *testing.T) { fn(t, im.New) })
	}
}

// procs sets GOMAXPROCS to n for the calling test and restores it when the
// test ends: old := runtime.GOMAXPROCS(n); defer runtime.GOMAXPROCS(old).
// More Ps than cores is deliberate: the OS then preempts goroutines in the
// middle of an operation, which is where the interleavings worth testing are.
func procs(t *testing.T, n int) {
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// size is the full size (make stress) or the -short size (make test).
func size(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// mustNew builds a breaker or fails the test.
func mustNew(t testing.TB, newB newFunc, c core.Config) breakers.Breaker {
	t.Helper()
	b, err := newB(c)
	if err != nil {
		t.Fatalf("config %+v: %v", c, err)
	}
	return b
}

// transitions records every notification a breaker delivers, in delivery
// order. Its listen method is safe to use as core.Config.OnStateChange.
type transitions struct {
	mu   sync.Mutex
	list []core.Transition
}

func (r *transitions) listen(tr core.Transition) {
	r.mu.Lock()
	r.list = append(r.list, tr)
	r.mu.Unlock()
}

func (r *transitions) get() []core.Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Transition(nil), r.list...)
}

// gang is a pool of n goroutines that run one function per round, all
// released at once by closing the round's ready channel they are parked on:
// a start barrier that costs one close per round, not one goroutine or one
// channel send per goroutine.
type gang struct {
	n    int
	next *gangRound // the round the goroutines are parked on
	wg   sync.WaitGroup
}

type gangRound struct {
	ready chan struct{}
	fn    func(i int) // nil: stop
	next  *gangRound
	done  sync.WaitGroup
}

func newGang(n int) *gang {
	g := &gang{n: n, next: &gangRound{ready: make(chan struct{})}}
	g.wg.Add(n)
	for i := range n {
		go func(r *gangRound) {
			defer g.wg.Done()
			for {
				<-r.ready
				if r.fn == nil {
					return
				}
				r.fn(i)
				next := r.next
				r.done.Done()
				r = next
			}
		}(g.next)
	}
	return g
}

// run hands fn to every goroutine of the gang, releases them together and
// waits for all of them.
func (g *gang) run(fn func(i int)) {
	r := g.next
	r.fn, r.next = fn, &gangRound{ready: make(chan struct{})}
	r.done.Add(g.n)
	close(r.ready) // publishes fn and next to every goroutine
	r.done.Wait()
	g.next = r.next
}

// stop ends the gang's goroutines and waits for them.
func (g *gang) stop() {
	close(g.next.ready)
	g.wg.Wait()
}

// parallel runs fn on n fresh goroutines released together by a barrier.
func parallel(n int, fn func(i int)) {
	g := newGang(n)
	g.run(fn)
	g.stop()
}

func letter(s core.State) string {
	switch s {
	case core.Closed:
		return "C"
	case core.Open:
		return "O"
	case core.HalfOpen:
		return "H"
	}
	return s.String()
}

// tripWithOneFailure trips b, a closed breaker whose rule is one failure, at
// the clock's current reading (generation 1 for a new one), failing round
// if it refuses the call.
func tripWithOneFailure(t testing.TB, b breakers.Breaker, round int) {
	t.Helper()
	p, err := b.Allow()
	if err != nil {
		t.Fatalf("round %d: closed breaker refused: %v", round, err)
	}
	b.Record(p, core.Failure)
}

// featureLetter extends letter with the manual-control states.
func featureLetter(s core.State) string {
	switch s {
	case core.ForcedOpen:
		return "FO"
	case core.Disabled:
		return "D"
	case core.MetricsOnly:
		return "MO"
	}
	return letter(s)
}

func pairName(from, to core.State) string { return featureLetter(from) + ">" + featureLetter(to) }

// sortedKinds prints a transition tally in a stable order.
func sortedKinds(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%s:%d", k, m[k])
	}
	return sb.String()
}

// transitionsSum is the number of transitions a Metrics snapshot counts.
func transitionsSum(m core.Metrics) uint64 {
	var n uint64
	for i := range m.Transitions {
		for j := range m.Transitions[i] {
			n += m.Transitions[i][j]
		}
	}
	return n
}

// pairsOf counts notifications by (from, to), laid out like Metrics.Transitions.
func pairsOf(trs []core.Transition) (n [core.NumStates][core.NumStates]uint64) {
	for _, tr := range trs {
		n[tr.From][tr.To]++
	}
	return n
}
