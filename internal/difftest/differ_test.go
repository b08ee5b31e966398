package difftest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/internal/difftest"
)

// forgetful is a breaker that records every failure as a success: a rule
// broken in one implementation.
type forgetful struct{ breakers.Breaker }

func (f forgetful) Record(p core.Permit, o core.Outcome) {
	if o == core.Failure {
		o = core.Success
	}
	f.Breaker.Record(p, o)
}

var tripOnOne = core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, CollectMetrics: true}

// The Differ catches an implementation that breaks a rule the other keeps,
// at the step where the two first disagree, and names it.
func TestDifferCatchesABrokenRule(t *testing.T) {
	broken := breakers.Impl{Name: "forgetful", New: func(c core.Config) (breakers.Breaker, error) {
		b, err := breakers.All[1].New(c)
		return forgetful{b}, err
	}}
	d, err := difftest.NewOf([]breakers.Impl{breakers.All[0], broken}, tripOnOne, 0, false)
	require.NoError(t, err)
	obs, err := d.Step(difftest.Op{Kind: difftest.Allow})
	require.NoError(t, err)
	_, err = d.Step(difftest.Op{Kind: difftest.Record, Permit: obs.Permit, Outcome: core.Failure})
	require.ErrorContains(t, err, "Counts: lockfree")
	require.ErrorContains(t, err, "Record(")
}

// Every implementation passes a history that uses every kind of
// operation, and the observations say what a caller saw.
func TestDifferEveryOperation(t *testing.T) {
	cfg := tripOnOne
	cfg.MaxRetryAfter = 5 * time.Second
	d, err := difftest.New(cfg, time.Hour, true)
	require.NoError(t, err)
	step := func(op difftest.Op) difftest.Obs {
		t.Helper()
		obs, err := d.Step(op)
		require.NoError(t, err)
		return obs
	}
	p := step(difftest.Op{Kind: difftest.Allow}).Permit
	step(difftest.Op{Kind: difftest.RecordHint, Permit: p, D: 2 * time.Second})
	rej := step(difftest.Op{Kind: difftest.Allow})
	require.True(t, rej.Err.Matches(core.ErrOpen))
	require.Equal(t, core.ErrOpen, rej.Err.Reason())
	require.Equal(t, 2*time.Second, rej.Err.Wait)
	step(difftest.Op{Kind: difftest.Advance, D: 2 * time.Second})
	require.Equal(t, core.HalfOpen, step(difftest.Op{Kind: difftest.State}).State)
	probe := step(difftest.Op{Kind: difftest.Allow}).Permit
	require.True(t, probe.Probe)
	step(difftest.Op{Kind: difftest.Done, Permit: probe})
	do := step(difftest.Op{Kind: difftest.Do, Value: 7, D: time.Second})
	require.Equal(t, 7, do.Value)
	require.Equal(t, time.Hour+3*time.Second, d.Now())
	require.Equal(t, difftest.PanicValue, step(difftest.Op{Kind: difftest.Do, Panic: true}).Panic)
	require.True(t, step(difftest.Op{Kind: difftest.Do, Cancelled: true}).Err.Text != "")
	require.True(t, step(difftest.Op{Kind: difftest.ForceOpen, D: -1}).Err.Matches(core.ErrInvalidArgument))
	step(difftest.Op{Kind: difftest.ForceOpen, D: time.Second})
	step(difftest.Op{Kind: difftest.Disable})
	step(difftest.Op{Kind: difftest.MetricsOnly})
	step(difftest.Op{Kind: difftest.Reset})
	step(difftest.Op{Kind: difftest.SetClock, D: 0})
	require.Equal(t, core.Closed, step(difftest.Op{Kind: difftest.Counts}).Counts.State)
	require.EqualValues(t, 4, step(difftest.Op{Kind: difftest.Metrics}).Metrics.Admitted)
	require.Len(t, d.Sides[0].Seen(), 8) // the panicking Do was a failure: it tripped again
	require.Panics(t, func() { difftest.Apply(d.Sides[0].B, d.Sides[0].Clock, difftest.Op{Kind: 200}) })
}

func TestErrOf(t *testing.T) {
	require.True(t, difftest.ErrOf(nil).Nil())
	e := difftest.ErrOf(core.WithRetryAfter(difftest.ErrFail, time.Second))
	require.False(t, e.Nil())
	require.Nil(t, e.Reason())
	require.Equal(t, time.Second, e.Wait)
	require.Equal(t, difftest.ErrFail.Error(), e.Text)
	require.False(t, e.Matches(difftest.ErrFail), "only the sentinels are recorded")
}

// Follows starts from the zero Transition: closed, generation 0.
func TestFollows(t *testing.T) {
	first := core.Transition{From: core.Closed, To: core.Open, Generation: 1}
	require.True(t, difftest.Follows(core.Transition{}, first))
	require.False(t, difftest.Follows(core.Transition{}, core.Transition{From: core.Open, To: core.HalfOpen, Generation: 1}))
	require.True(t, difftest.Follows(first, core.Transition{From: core.Open, To: core.HalfOpen, Generation: 2}))
	require.False(t, difftest.Follows(first, core.Transition{From: core.Open, To: core.HalfOpen, Generation: 3}))
}

// A zero Differ and one over a single implementation refuse to run,
// saying why.
func TestDifferMisuse(t *testing.T) {
	_, err := (&difftest.Differ{}).Step(difftest.Op{})
	require.ErrorContains(t, err, "difftest.New")
	_, err = difftest.NewOf(breakers.All[:1], tripOnOne, 0, false)
	require.ErrorContains(t, err, "two or more")
	_, err = difftest.New(core.Config{WindowSize: -1}, 0, false)
	require.ErrorIs(t, err, core.ErrInvalidConfig)
}

// keepsSlots is an open gate that never gives a slot back: a breaker
// that leaks its slot on leaving open.
type keepsSlots struct{ core.OpenGate }

func (keepsSlots) Release() {}

// With a *difftest.Gate, each side gets its own copy refusing the same
// trips, and the Differ catches a side whose gate count leaves its state.
func TestDifferGate(t *testing.T) {
	leaky := breakers.Impl{Name: "leaky", New: func(c core.Config) (breakers.Breaker, error) {
		c.OpenGate = keepsSlots{c.OpenGate}
		return breakers.All[1].New(c)
	}}
	cfg := tripOnOne
	cfg.OpenGate = &difftest.Gate{Seed: 1, RefusePercent: 50}
	d, err := difftest.NewOf([]breakers.Impl{breakers.All[0], leaky}, cfg, 0, false)
	require.NoError(t, err)
	require.NotSame(t, d.Sides[0].Gate, d.Sides[1].Gate)
	for {
		obs, err := d.Step(difftest.Op{Kind: difftest.Allow})
		require.NoError(t, err)
		_, err = d.Step(difftest.Op{Kind: difftest.Record, Permit: obs.Permit, Outcome: core.Failure})
		require.NoError(t, err)
		if d.Sides[0].B.State() == core.Open {
			break
		}
	}
	_, refused := d.Sides[1].Gate.Held()
	require.Equal(t, d.Sides[0].B.Counts().Generation-1, uint64(refused), "each trip but the last capped, on both sides")
	_, err = d.Step(difftest.Op{Kind: difftest.Reset})
	require.ErrorContains(t, err, "leaky: open gate: 1 slots held in state closed, want 0")
}

// The differential histories' open-duration functions return every class
// of result the bound rule tells apart, the same for the same arguments,
// and panic on the one error.
func TestOpenDurationCoversEveryClass(t *testing.T) {
	const bound = 5 * time.Second
	classes := map[string]bool{}
	for seed := range uint64(20) {
		f := difftest.OpenDuration(seed, bound)
		for reopens := range 32 {
			for _, err := range []error{nil, difftest.ErrFail, difftest.ErrIgnored} {
				d := f(reopens, err)
				require.Equal(t, d, f(reopens, err), "a function of its arguments")
				switch {
				case d == 0:
					classes["zero"] = true
				case d < 0:
					classes["negative"] = true
				case d < time.Millisecond:
					classes["tiny"] = true
				case d <= bound:
					classes["in bound"] = true
				default:
					classes["over bound"] = true
				}
			}
		}
		require.PanicsWithValue(t, difftest.ErrDurationPanics, func() { f(0, difftest.ErrDurationPanics) })
	}
	require.Len(t, classes, 5, "%v", classes)
}

// Restart catches a restore that loses what the snapshot carries even when
// every implementation loses it alike: a ramp-up with time left, a count
// window's calls. Both sides here drop them, so they agree with each
// other; the restored breaker's own snapshot gives them away.
func TestDifferRestartCatchesWhatARestoreLoses(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(*core.Snapshot)
		why  string
	}{
		{"ramp-up", func(s *core.Snapshot) { s.RampUntil = time.Time{} }, "it ramps for 0s"},
		{"window", func(s *core.Snapshot) { s.Window = nil }, "it snapshots as"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			impls := append([]breakers.Impl(nil), breakers.All...)
			for i, im := range impls {
				restore := im.Restore
				impls[i].Restore = func(c core.Config, s core.Snapshot, now time.Time) (breakers.Breaker, error) {
					tc.lose(&s)
					return restore(c, s, now)
				}
			}
			cfg := core.Config{FailureRateThreshold: 50, WindowSize: 4, MinimumNumberOfCalls: 4, OpenDuration: time.Second,
				RampUpDuration: time.Minute, RampUpStartPercent: 100, CollectMetrics: true}
			d, err := difftest.NewOf(impls, cfg, 0, false)
			require.NoError(t, err)
			_, err = d.Step(difftest.Op{Kind: difftest.HalfOpen})
			require.NoError(t, err)
			obs, err := d.Step(difftest.Op{Kind: difftest.Allow})
			require.NoError(t, err)
			_, err = d.Step(difftest.Op{Kind: difftest.Record, Permit: obs.Permit, Outcome: core.Success}) // closed, ramping
			require.NoError(t, err)
			obs, err = d.Step(difftest.Op{Kind: difftest.Allow}) // admitted: the ramp starts at 100 %
			require.NoError(t, err)
			require.True(t, obs.Err.Nil())
			_, err = d.Step(difftest.Op{Kind: difftest.Record, Permit: obs.Permit, Outcome: core.Failure})
			require.NoError(t, err)
			_, err = d.Restart(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), true, time.Second, 0)
			require.ErrorContains(t, err, tc.why)
		})
	}
}
