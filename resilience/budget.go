package resilience

import (
	"errors"
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Limits of BudgetConfig.
const (
	MaxBudgetPercent = 1000    // percent: ten retries per call
	MaxBudgetSaved   = 1 << 30 // retries
	MaxBudgetFloor   = 1 << 30 // retries per second
)

// unit is one retry in the budget's fixed-point balance: a call deposits
// Percent*10 units, a retry withdraws 1000.
const unit = 1000

// BudgetConfig describes a retry budget. Every field's zero value is
// documented; the zero BudgetConfig is a valid budget of 10 % with a floor
// of 10 retries a second.
type BudgetConfig struct {
	// Percent is how much retries may add to the call volume, in percent of
	// the calls deposited, 1..1000 (so 10 lets 1 call in 10 retry once).
	// Zero: 10.
	Percent int
	// MinPerSecond is the floor: retries allowed in each whole second of
	// the clock whatever the volume, before the deposited balance is
	// touched, so that a dependency with little traffic can still be
	// retried. 1..2^30; zero: 10. NoFloor turns it off. The seconds are
	// those of the clock's reading, rounded down (so -0.5 s is second -1).
	// A clock that steps back, to a negative reading too, starts the
	// floor of the second it steps to afresh; a caller descheduled between
	// its clock read and its withdrawal, whose reading is older than the
	// newest grant's, reads the clock again, so no second's floor is
	// handed out twice.
	MinPerSecond int
	// MaxSaved caps the deposited balance, in retries, 1..2^30: what a long
	// healthy period can save up for a burst of failures. Zero: 100.
	MaxSaved int
	// Clock is read by TryWithdraw to tell the seconds of the floor apart
	// (and only when the floor is on). Zero: a core.SystemClock.
	Clock core.Clock
}

// NoFloor is the BudgetConfig.MinPerSecond that turns the floor off: only
// the deposited balance pays for retries.
const NoFloor = -1

// Budget is a retry budget: a token bucket shared by every call to one
// dependency, so that a failing dependency never sees a retry storm. Every
// call deposits a fraction of a retry (Deposit), every retry withdraws one
// (TryWithdraw), and a retry the budget cannot pay for is not made. Over
// any stretch of time the retries granted are at most MinPerSecond for each
// second of the clock plus Percent % of the calls deposited plus what was
// saved before (at most MaxSaved).
//
// It is lock-free: the balance is one atomic word changed by
// compare-and-swap, the floor another (the second it counts and the
// retries granted in it). A full balance makes Deposit a load without a
// write, so a healthy dependency's calls write no shared cache line.
// Neither method allocates. All methods are safe for concurrent use.
//
// Make one with NewBudget; a zero Budget panics with a message naming it.
type Budget struct {
	// The atomic words first: 64-bit aligned on 32-bit platforms.
	balance atomic.Int64  // units, 0..max
	second  atomic.Uint64 // the floor's second (high 32 bits) and retries granted in it (low 32)

	perCall int64 // units deposited per call
	max     int64 // units
	floor   uint32
	clock   core.Clock
}

// NewBudget returns a budget with an empty balance. Its errors match
// ErrInvalidConfig and name the field; it never panics.
func NewBudget(c BudgetConfig) (*Budget, error) {
	var errs []error
	if c.Percent < 0 || c.Percent > MaxBudgetPercent {
		errs = append(errs, configError("BudgetConfig.Percent", "%d is outside 1..%d (0: 10)", c.Percent, MaxBudgetPercent))
	} else if c.Percent == 0 {
		c.Percent = 10
	}
	if c.MinPerSecond == NoFloor {
		c.MinPerSecond = 0
	} else if c.MinPerSecond < 0 || c.MinPerSecond > MaxBudgetFloor {
		errs = append(errs, configError("BudgetConfig.MinPerSecond", "%d is outside 0..%d (0: 10, NoFloor: none)", c.MinPerSecond, MaxBudgetFloor))
	} else if c.MinPerSecond == 0 {
		c.MinPerSecond = 10
	}
	if c.MaxSaved < 0 || c.MaxSaved > MaxBudgetSaved {
		errs = append(errs, configError("BudgetConfig.MaxSaved", "%d is outside 1..%d (0: 100)", c.MaxSaved, MaxBudgetSaved))
	} else if c.MaxSaved == 0 {
		c.MaxSaved = 100
	}
	if err := nilInside("BudgetConfig.Clock", c.Clock); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Clock == nil {
		c.Clock = core.NewSystemClock()
	}
	return &Budget{
		perCall: int64(c.Percent) * unit / 100,
		max:     int64(c.MaxSaved) * unit,
		floor:   uint32(c.MinPerSecond),
		clock:   c.Clock,
	}, nil
}

func (b *Budget) mustBeNew() {
	if b.clock == nil {
		panic("resilience: Budget used without NewBudget")
	}
}

// Deposit records one call (a first attempt, not a retry): it adds
// Percent/100 of a retry to the balance, up to MaxSaved. It reads no
// clock; with the balance full it writes nothing.
func (b *Budget) Deposit() {
	b.mustBeNew()
	for {
		cur := b.balance.Load()
		if cur >= b.max {
			return
		}
		if b.balance.CompareAndSwap(cur, min(cur+b.perCall, b.max)) {
			return
		}
	}
}

// TryWithdraw asks to make one retry: it takes one from the floor of the
// current second if any is left there, otherwise one whole retry from the
// balance, and reports whether it got one. Under any contention it never
// grants more than the floor and the balance hold. A clock reading in
// another whole second than the last floor grant starts that second's
// floor afresh, also when the clock stepped back (to a negative reading
// too); a reading older than the last grant's is taken again first, so
// that a caller descheduled after its read does not restart a second that
// has passed. It reads the clock once, twice in that case, and only when
// the floor is on.
func (b *Budget) TryWithdraw() bool {
	b.mustBeNew()
	if b.floor > 0 && b.fromFloor() {
		return true
	}
	for {
		cur := b.balance.Load()
		if cur < unit {
			return false
		}
		if b.balance.CompareAndSwap(cur, cur-unit) {
			return true
		}
	}
}

// fromFloor takes one retry from the current second's floor.
func (b *Budget) fromFloor() bool {
	now := wholeSecond(b.clock.Now())
	for {
		w := b.second.Load()
		sec, used := uint32(w>>32), uint32(w)
		if int32(now-sec) < 0 {
			// Older than the newest grant's second: either this caller
			// read the clock before another one's grant (descheduled in
			// between), and a fresh reading is in that grant's second or
			// later, or the clock stepped back, and a fresh reading is
			// still older: its second starts afresh.
			now = wholeSecond(b.clock.Now())
		}
		if now != sec {
			used = 0
		}
		if used >= b.floor {
			return false
		}
		if b.second.CompareAndSwap(w, uint64(now)<<32|uint64(used+1)) {
			return true
		}
	}
}

// wholeSecond is the second a clock reading falls in, rounded down, in the
// 32 bits of the floor word: seconds 2^32 apart share a number, and the
// comparison of two is by their difference, so a clock that crosses zero
// or the word's wrap is seen to move by what it moved.
func wholeSecond(now time.Duration) uint32 {
	s := now / time.Second
	if now%time.Second < 0 {
		s--
	}
	return uint32(int64(s))
}

// Saved returns the deposited balance in retries (fractions included),
// not counting the floor: a snapshot, for metrics and tests.
func (b *Budget) Saved() float64 {
	b.mustBeNew()
	return float64(b.balance.Load()) / unit
}
