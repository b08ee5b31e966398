package resilience_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/resilience"
)

// countingClock is a manual clock that counts its readings.
type countingClock struct {
	*core.ManualClock
	reads int
}

func (c *countingClock) Now() time.Duration {
	c.reads++
	return c.ManualClock.Now()
}

func TestBudgetGrantsPercentOfCalls(t *testing.T) {
	clock := &countingClock{ManualClock: core.NewManualClock(0)}
	b := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 10, MinPerSecond: resilience.NoFloor, MaxSaved: 1000, Clock: clock}))(t)
	require.False(t, b.TryWithdraw(), "an empty budget grants nothing")
	for range 1000 {
		b.Deposit()
	}
	granted := 0
	for b.TryWithdraw() {
		granted++
	}
	require.Equal(t, 100, granted)
	require.Zero(t, b.Saved())
	require.Zero(t, clock.reads, "the clock was read with the floor off")
}

// TestBudgetFloorPerSecond: each whole second of the clock, rounded down,
// grants the floor once, whichever way the clock moved to it: forward, back
// to an earlier second, to a negative reading, or across zero.
func TestBudgetFloorPerSecond(t *testing.T) {
	type step struct {
		at      time.Duration // the clock's reading
		granted int           // floor grants there, asked until refused
	}
	for _, tc := range []struct {
		name    string
		steps   []step
		rereads int // withdrawals whose reading was older than the last grant's: the clock is read twice
	}{
		{"forward", []step{{500 * time.Millisecond, 3}, {1500 * time.Millisecond, 3}, {2500 * time.Millisecond, 3}, {2999 * time.Millisecond, 0}}, 0},
		{"back to an earlier second", []step{{2500 * time.Millisecond, 3}, {time.Second, 3}, {1999 * time.Millisecond, 0}, {3 * time.Second, 3}}, 1},
		{"back one second", []step{{2500 * time.Millisecond, 3}, {1500 * time.Millisecond, 3}, {2 * time.Second, 3}}, 1},
		{"back to a negative reading", []step{{time.Hour, 3}, {-time.Second - 1, 3}, {-1, 3}, {-time.Second, 0}, {0, 3}, {time.Second, 3}}, 1},
		{"negative seconds round down", []step{{-1500 * time.Millisecond, 3}, {-time.Second - 1, 0}, {-time.Second, 3}, {-500 * time.Millisecond, 0}}, 1},
		{"negative from the start", []step{{-100 * time.Hour, 3}, {-99 * time.Hour, 3}, {time.Second, 3}}, 1},
		{"past the 32-bit wrap of seconds", []step{{(1<<32 - 1) * time.Second, 3}, {1 << 32 * time.Second, 3}, {(1<<32 + 1) * time.Second, 3}}, 1},
		{"the extremes", []step{{math.MinInt64, 3}, {math.MaxInt64, 3}, {math.MinInt64, 3}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &countingClock{ManualClock: core.NewManualClock(0)}
			b := must(resilience.NewBudget(resilience.BudgetConfig{MinPerSecond: 3, Clock: clock}))(t)
			for i, st := range tc.steps {
				clock.Set(st.at)
				granted := 0
				for b.TryWithdraw() {
					granted++
				}
				require.Equal(t, st.granted, granted, "step %d, at %v", i, st.at)
			}
			withdrawals := 0
			for _, st := range tc.steps {
				withdrawals += st.granted + 1
			}
			require.Equal(t, withdrawals+tc.rereads, clock.reads, "clock readings")
		})
	}
}

func TestBudgetFloorComesBeforeBalance(t *testing.T) {
	b := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 100, MinPerSecond: 1, Clock: core.NewManualClock(0)}))(t)
	b.Deposit()
	require.True(t, b.TryWithdraw())
	require.Equal(t, 1.0, b.Saved(), "the floor paid, the balance is kept")
	require.True(t, b.TryWithdraw())
	require.False(t, b.TryWithdraw())
}

func TestBudgetSavesAtMostMaxSaved(t *testing.T) {
	b := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 50, MinPerSecond: resilience.NoFloor, MaxSaved: 4, Clock: core.NewManualClock(0)}))(t)
	for range 100 {
		b.Deposit()
	}
	require.Equal(t, 4.0, b.Saved())
	require.Zero(t, testing.AllocsPerRun(100, b.Deposit))
}

// TestBudgetNeverOverspendsUnderContention: 512 goroutines deposit and
// withdraw at once; the retries granted are exactly what the deposits paid
// for plus the floor, never one more (the balance never reaches its cap).
func TestBudgetNeverOverspendsUnderContention(t *testing.T) {
	const goroutines, calls = 512, 40 // 20480 calls at 10 %: 2048 retries
	clock := core.NewManualClock(0)
	b := must(resilience.NewBudget(resilience.BudgetConfig{Percent: 10, MinPerSecond: 7, MaxSaved: resilience.MaxBudgetSaved, Clock: clock}))(t)
	var granted atomic.Int64
	storm(goroutines, func() {
		for range calls {
			b.Deposit()
			for range 2 { // ask for more than was paid for
				if b.TryWithdraw() {
					granted.Add(1)
				}
			}
		}
	})
	for b.TryWithdraw() {
		granted.Add(1)
	}
	require.Equal(t, int64(goroutines*calls/10+7), granted.Load())
	require.Zero(t, b.Saved())
}

func TestNewBudgetErrors(t *testing.T) {
	_, err := resilience.NewBudget(resilience.BudgetConfig{Percent: 1001, MinPerSecond: -2, MaxSaved: -1})
	require.ErrorIs(t, err, resilience.ErrInvalidConfig)
	for _, field := range []string{"Percent 1001", "MinPerSecond -2", "MaxSaved -1"} {
		require.ErrorContains(t, err, "BudgetConfig."+field)
	}
	_, err = resilience.NewBudget(resilience.BudgetConfig{Percent: -1, MinPerSecond: resilience.MaxBudgetFloor + 1, MaxSaved: resilience.MaxBudgetSaved + 1})
	for _, field := range []string{"Percent -1", "MinPerSecond 1073741825", "MaxSaved 1073741825"} {
		require.ErrorContains(t, err, "BudgetConfig."+field)
	}
	for _, c := range []resilience.BudgetConfig{
		{Percent: resilience.MaxBudgetPercent, MinPerSecond: resilience.MaxBudgetFloor, MaxSaved: resilience.MaxBudgetSaved},
		{Percent: 1, MinPerSecond: 1, MaxSaved: 1},
	} {
		_, err := resilience.NewBudget(c)
		require.NoError(t, err, "%+v", c)
	}
	var zero resilience.Budget
	require.PanicsWithValue(t, "resilience: Budget used without NewBudget", zero.Deposit)
}

// interleavedClock returns its reading and, once, runs during before it
// returns: a call that takes its reading and is descheduled before it acts
// on it, while during runs in full.
type interleavedClock struct {
	now    time.Duration
	during func()
}

func (c *interleavedClock) Now() time.Duration {
	v := c.now
	if f := c.during; f != nil {
		c.during = nil
		f()
	}
	return v
}

// Two concurrent callers of a monotonic clock: X reads 5.9 s and is
// descheduled; Y reads 6.0 s and takes second 6's floor. X then finds the
// floor word on second 6, reads its own second as a fresh one, and takes
// second 5's floor again; the next caller in second 6 does the same the
// other way. With a floor of one and no balance, seconds 5 and 6 grant four
// retries where the budget promises at most one each ("Under any
// contention it never grants more than the floor and the balance hold").
func TestBudgetFloorNotRefilledByALateReading(t *testing.T) {
	clock := &interleavedClock{now: 5500 * time.Millisecond}
	b := must(resilience.NewBudget(resilience.BudgetConfig{MinPerSecond: 1, Clock: clock}))(t)
	require.True(t, b.TryWithdraw(), "second 5's floor")
	require.False(t, b.TryWithdraw(), "second 5's floor is spent")

	clock.now = 5900 * time.Millisecond // X's reading
	yGot := false
	clock.during = func() {
		clock.now = 6 * time.Second
		yGot = b.TryWithdraw() // Y, while X is descheduled
	}
	xGot := b.TryWithdraw()
	require.True(t, yGot, "second 6's floor")
	zGot := b.TryWithdraw() // Z, at 6.0 s
	granted := 0
	for _, g := range []bool{xGot, zGot} {
		if g {
			granted++
		}
	}
	require.Zero(t, granted, "X (second 5) and Z (second 6) found both floors spent")
}
