package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// impls is internal/breakers.All, the one table every behavioural test runs against (the
// uber-go/ratelimit pattern): the lock-free core and the mutex baseline.
var impls = breakers.All

// wordGens is the number of generations the lock-free state word's own
// generation field tells apart (core/state.go): the permits' generations
// are 64 bits, and a test that drives this many transitions crosses the
// word's wrap.
const wordGens = 1 << 20

// forEachImpl runs fn once per implementation as a subtest.
func forEachImpl(t *testing.T, fn func(t *testing.T, mk maker)) {
	t.Helper()
	for _, im := range impls {
		t.Run("impl="+im.Name, func(t *testing.T) { fn(t, maker{new: im.New, zero: im.Zero, restore: im.Restore}) })
	}
}

type maker struct {
	new  func(core.Config) (breakers.Breaker, error)
	zero func() breakers.Breaker // the zero value, made without New
	// restore builds from a snapshot (core.Restore, baseline.Restore).
	restore func(core.Config, core.Snapshot, time.Time) (breakers.Breaker, error)
}

// rig is a breaker on a manual clock with every notification recorded.
type rig struct {
	t     testing.TB
	B     breakers.Breaker
	Clock *core.ManualClock

	mu  sync.Mutex
	cbs []core.Transition
}

// build makes a rig for c. c.Clock and c.OnStateChange are set by the rig
// unless c already has them; listen, if non-nil, runs after the recording.
func (mk maker) build(t testing.TB, c core.Config, listen ...func(core.Transition)) *rig {
	t.Helper()
	return buildWith(t, c, mk.new, 0, listen...)
}

// buildWith is build with the breaker made by make, on a clock reading
// start.
func buildWith(t testing.TB, c core.Config, make func(core.Config) (breakers.Breaker, error), start time.Duration, listen ...func(core.Transition)) *rig {
	t.Helper()
	r := &rig{t: t, Clock: core.NewManualClock(start)}
	if c.Clock == nil {
		c.Clock = r.Clock
	}
	c.OnStateChange = func(tr core.Transition) {
		r.mu.Lock()
		r.cbs = append(r.cbs, tr)
		r.mu.Unlock()
		for _, l := range listen {
			l(tr)
		}
	}
	b, err := make(c)
	require.NoError(t, err)
	r.B = b
	return r
}

var (
	errFail    = errors.New("dependency failed")
	errIgnored = errors.New("ignored by the classifier")
)

// At sets the clock in seconds (fractions allowed: At(49.999)).
func (r *rig) At(sec float64) *rig {
	r.Clock.Set(secs(sec))
	return r
}

func secs(s float64) time.Duration { return time.Duration(s*1e3) * time.Millisecond }

// A is Allow that must grant.
func (r *rig) A() core.Permit {
	r.t.Helper()
	p, err := r.B.Allow()
	require.NoError(r.t, err, "Allow at %v", r.Clock.Now())
	return p
}

// Reject is Allow that must be refused with want (ErrOpen, ErrHalfOpenFull,
// ErrForcedOpen or ErrRampingUp).
func (r *rig) Reject(want error) {
	r.t.Helper()
	_, err := r.B.Allow()
	require.ErrorIs(r.t, err, want, "Allow at %v", r.Clock.Now())
	require.ErrorIs(r.t, err, core.ErrRejected)
}

// Rejected is Allow that must be refused for any reason.
func (r *rig) Rejected() {
	r.t.Helper()
	_, err := r.B.Allow()
	require.ErrorIs(r.t, err, core.ErrRejected, "Allow at %v", r.Clock.Now())
}

// D records an outcome.
func (r *rig) D(p core.Permit, o core.Outcome) { r.B.Record(p, o) }

// X is a whole call: Allow that must grant, then the outcome at the same time.
func (r *rig) X(o core.Outcome) {
	r.t.Helper()
	r.D(r.A(), o)
}

// XN is n calls with outcome o.
func (r *rig) XN(n int, o core.Outcome) {
	r.t.Helper()
	for range n {
		r.X(o)
	}
}

// Try is a call if the breaker admits it: it reports whether it did.
func (r *rig) Try(o core.Outcome) bool {
	p, err := r.B.Allow()
	if err != nil {
		return false
	}
	r.D(p, o)
	return true
}

// Is asserts the reported state.
func (r *rig) Is(want core.State) {
	r.t.Helper()
	require.Equal(r.t, want, r.B.State(), "state at %v", r.Clock.Now())
}

// Cnt asserts the window counts {n, f, s, sf}.
func (r *rig) Cnt(n, f, s, sf uint64) {
	r.t.Helper()
	c := r.B.Counts()
	require.Equal(r.t, [4]uint64{n, f, s, sf}, [4]uint64{c.Calls, c.Failures, c.SlowCalls, c.SlowFailures}, "counts at %v", r.Clock.Now())
}

// CBs returns the notifications so far as "C>O@1" strings (time in seconds).
func (r *rig) CBs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.cbs))
	for _, c := range r.cbs {
		out = append(out, fmt.Sprintf("%s>%s@%g", letter(c.From), letter(c.To), c.At.Seconds()))
	}
	return out
}

// Transitions returns a copy of the recorded notifications.
func (r *rig) Transitions() []core.Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Transition(nil), r.cbs...)
}

func letter(s core.State) string {
	return map[core.State]string{core.Closed: "C", core.Open: "O", core.HalfOpen: "H",
		core.ForcedOpen: "F", core.Disabled: "D", core.MetricsOnly: "M"}[s]
}

// classify maps the test errors: errIgnored is Ignored, the rest default.
func classify(err error) core.Outcome {
	if errors.Is(err, errIgnored) {
		return core.Ignored
	}
	return core.DefaultClassifier(err)
}

// call runs fn through core.Do and returns its error.
func (r *rig) call(ctx context.Context, fn func(context.Context) error) error {
	_, err := core.Do(ctx, r.B, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

// barrier releases n goroutines at once and waits for them.
func parallel(n int, fn func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			start.Wait()
			fn(i)
		}()
	}
	start.Done()
	done.Wait()
}

// rounds is the repeat count for concurrent tests: full, or small under -short.
func rounds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// ftErrAfter is a dependency error carrying its own retry-after hint (an HTTP
// 429 with a Retry-After header, say).
type ftErrAfter struct{ d time.Duration }

func (e ftErrAfter) Error() string             { return fmt.Sprintf("throttled, retry after %v", e.d) }
func (e ftErrAfter) RetryAfter() time.Duration { return e.d }

// errFtOK is an error the feature classifier calls a success.
var errFtOK = errors.New("a success by the classifier")

// ftClassify: errIgnored is Ignored, errFtOK is Success, the rest default.
func ftClassify(err error) core.Outcome {
	switch {
	case errors.Is(err, errIgnored):
		return core.Ignored
	case errors.Is(err, errFtOK):
		return core.Success
	}
	return core.DefaultClassifier(err)
}

// ftSet moves the rig's clock to an exact reading.
func ftSet(r *rig, d time.Duration) { r.Clock.Set(d) }

// ftWait is Allow that must be refused with ErrOpen and exactly Wait want.
func ftWait(r *rig, want time.Duration) {
	r.t.Helper()
	ftRefused(r, core.ErrOpen, want)
}

// ftHalfOpenFull is Allow that must be refused with ErrHalfOpenFull and
// exactly Wait want: the time left of the half-open max wait.
func ftHalfOpenFull(r *rig, want time.Duration) {
	r.t.Helper()
	ftRefused(r, core.ErrHalfOpenFull, want)
}

// ftRefused is Allow that must be refused with kind and exactly Wait want,
// which the rejection's RetryAfter repeats.
func ftRefused(r *rig, kind error, want time.Duration) {
	r.t.Helper()
	p, err := r.B.Allow()
	require.ErrorIs(r.t, err, kind, "Allow at %v", r.Clock.Now())
	require.ErrorIs(r.t, err, core.ErrRejected)
	require.Equal(r.t, core.Permit{RetryAfter: want}, p, "Allow at %v", r.Clock.Now())
	require.Equal(r.t, want, core.RetryAfterOf(err), "the rejection's RetryAfter at %v", r.Clock.Now())
}

// ftGen is the current generation.
func ftGen(r *rig) uint64 { return r.B.Counts().Generation }

// ftCBs asserts the notifications so far.
func ftCBs(r *rig, want ...string) {
	r.t.Helper()
	if want == nil {
		want = []string{}
	}
	require.Equal(r.t, want, r.CBs())
}

// ftNoChange runs fn and asserts it changed neither the counts, nor the
// state, nor the notifications.
func ftNoChange(r *rig, what string, fn func()) {
	r.t.Helper()
	c, s, cbs := r.B.Counts(), r.B.State(), r.CBs()
	fn()
	require.Equal(r.t, c, r.B.Counts(), what)
	require.Equal(r.t, s, r.B.State(), what)
	require.Equal(r.t, cbs, r.CBs(), what)
}

// rigPair builds the lock-free and the mutex breaker from the same config,
// each with its own manual clock at start and its own notification log.
func rigPair(t *testing.T, c core.Config, start time.Duration) (lf, mu *rig) {
	t.Helper()
	lf = maker{new: impls[0].New}.build(t, c)
	mu = maker{new: impls[1].New}.build(t, c)
	lf.Clock.Set(start)
	mu.Clock.Set(start)
	return lf, mu
}
